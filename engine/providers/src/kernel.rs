//! The arithmetic the project's local models share (the GGUF chat model's
//! forward pass, `chat::gguf::kernel`, and MiniLM's encoder,
//! `embed::minilm`), owned by the project so that their outputs are the
//! same bits on every CPU, at every thread count and in every batch.
//!
//! - **One definition per operation.** Each operation is defined by plain
//!   Rust arithmetic in a fixed order: every `f32` multiply and add rounds
//!   once, as IEEE 754 says. There is no fused multiply-add anywhere (the
//!   baseline CPU has none, and emulating one costs more than it gives).
//!   Rust never reassociates or contracts floating-point code, so the same
//!   source gives the same bits whether the compiler emits scalar or vector
//!   instructions, of any width.
//! - **Levels.** [`Level::Avx2`] compiles the same bodies with AVX2 and FMA
//!   enabled (and AVX-512F for the dense product where the CPU has it);
//!   [`Level::Portable`] compiles them for the baseline CPU. Every level
//!   gives the same bits; the level only changes speed. The level is chosen
//!   by the project ([`Level::detect`], or a config's `kernel` key), never
//!   by a dependency, an environment variable or the CPU's cache sizes.
//! - **Reductions over `f32`** (a norm's sums, attention's dot products, a
//!   softmax's sum) run in eight lanes (`lane[i % 8]`) and end with one
//!   fixed tree ([`lanes_sum`]).
//! - **Dense products** ([`dense`]) sum each output serially over the inner
//!   dimension, so that a vector holds one output per lane, at any width.
//! - **Transcendentals**: [`exp`] and [`gelu`] (through the complementary
//!   error function) are the project's own: range reduction and
//!   polynomials in plain arithmetic.

pub mod dense;
pub mod encoder;

/// Defines `pub fn $name`, the body `$($body)::+::$name` compiled for AVX2
/// and FMA (`#[target_feature]`), behind the caller's `check()`, which
/// asserts that the CPU has both. For the audited x86 modules only: the
/// expansion holds their one kind of `unsafe`, the call.
#[cfg(target_arch = "x86_64")]
macro_rules! avx2_compiled {
    ($($body:ident)::+ => $name:ident, $inner:ident ( $($arg:ident : $ty:ty),* )) => {
        #[target_feature(enable = "avx2,fma")]
        fn $inner($($arg: $ty),*) {
            $($body)::+::$name($($arg),*)
        }

        /// The body of the same name, compiled for AVX2 and FMA.
        pub fn $name($($arg: $ty),*) {
            check();
            // SAFETY: `check` asserted that this CPU has AVX2 and FMA.
            unsafe { $inner($($arg),*) }
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use avx2_compiled;

use engine::config::KernelLevel;
use serde::Serialize;

/// Which compiled form of the kernels runs. Every level gives the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// AVX2 and FMA (x86-64-v3), the project's floor for speed.
    Avx2,
    /// The baseline CPU: the same arithmetic without vector extensions
    /// beyond the target's default (slower).
    Portable,
}

impl Level {
    /// The fastest level this CPU runs.
    pub fn detect() -> Level {
        if Level::Avx2.available() {
            Level::Avx2
        } else {
            Level::Portable
        }
    }

    /// Whether this CPU can run the level.
    pub fn available(self) -> bool {
        match self {
            Level::Portable => true,
            Level::Avx2 => avx2_fma(),
        }
    }

    /// Its name in configs, summaries and traces.
    pub fn name(self) -> &'static str {
        match self {
            Level::Avx2 => "avx2",
            Level::Portable => "portable",
        }
    }

    /// The level `kernel` asks for on this CPU: `auto` is the fastest it
    /// runs; a level it cannot run is refused, naming `field` (the config
    /// key, as `chat.gguf.kernel`).
    pub fn for_setting(kernel: KernelLevel, field: &str) -> engine::Result<Level> {
        let level = match kernel {
            KernelLevel::Auto => return Ok(Level::detect()),
            KernelLevel::Avx2 => Level::Avx2,
            KernelLevel::Portable => Level::Portable,
        };
        if !level.available() {
            let section = field.rsplit_once('.').map_or(field, |(s, _)| s);
            return Err(engine::Error::Config {
                source_name: format!("[{section}]"),
                field: field.into(),
                cause: format!(
                    "{:?}: this CPU lacks AVX2 or FMA; use \"auto\" or \"portable\" (every level gives the same bits)",
                    kernel.name()
                ),
            });
        }
        Ok(level)
    }

    /// The setting that names this level.
    pub fn setting(self) -> KernelLevel {
        match self {
            Level::Avx2 => KernelLevel::Avx2,
            Level::Portable => KernelLevel::Portable,
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx2_fma() -> bool {
    false
}

/// Whether this CPU has AVX-512F beside AVX2 and FMA (the dense product's
/// widest form).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512() -> bool {
    avx2_fma() && std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx512() -> bool {
    false
}

/// `x` rounded to the nearest integer, ties to even, for `|x| < 2^22`:
/// adding and subtracting 1.5 * 2^23 leaves the rounded value (IEEE
/// round-to-nearest-even), in plain arithmetic that vectorizes.
#[inline(always)]
pub fn round_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// `e^x` for the engines' uses (softmax, SiLU, the error function): `x`
/// clamped to [-87, 88], `x = n ln 2 + r` with `|r| <= ln 2 / 2`, `e^r` by
/// its degree-7 Taylor polynomial (relative error below 4e-7), scaled by
/// `2^n` through the exponent bits. Plain arithmetic, so the same bits on
/// every CPU.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let n = round_even(x * LOG2E);
    let r = n * -LN2_HI + x;
    let r = n * -LN2_LO + r;
    let mut p: f32 = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2^n through the exponent bits: n + 127 (1 to 254) is an integer, so
    // adding it to 1.5 * 2^23 leaves it in the low bits, exactly (integer
    // operations only, which vectorize where a float-to-int conversion
    // would not).
    const MAGIC: f32 = 12_582_912.0;
    let biased = (n + 127.0) + MAGIC;
    let scale = f32::from_bits((biased.to_bits() - MAGIC.to_bits()) << 23);
    p * scale
}

/// The complementary error function of `|x|`, `erfc(|x|)`: `t = 1 / (1 +
/// |x| / 2)` and `t e^(-x^2 + P(t))` with the degree-9 polynomial of
/// Numerical Recipes' `erfcc` (its coefficients rounded to `f32`; its
/// relative error below 1.2e-7 before `f32` rounding), in plain
/// arithmetic and the project's [`exp`].
#[inline(always)]
pub fn erfc_abs(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let mut p: f32 = 0.170_872_77;
    p = p * t - 0.822_152_23;
    p = p * t + 1.488_515_9;
    p = p * t - 1.135_204;
    p = p * t + 0.278_868_07;
    p = p * t - 0.186_288_06;
    p = p * t + 0.096_784_18;
    p = p * t + 0.374_091_96;
    p = p * t + 1.000_023_7;
    p = p * t - 1.265_512_2;
    t * exp(-(z * z) + p)
}

/// GELU, the exact (error-function) form: `x Φ(x) = x (1 + erf(x / √2)) /
/// 2`, computed from [`erfc_abs`] so that neither tail cancels: `x
/// erfc(|x| / √2) / 2` below zero, `x - x erfc(x / √2) / 2` from zero on.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let half_tail = 0.5 * erfc_abs(x * FRAC_1_SQRT_2);
    let below = x * half_tail;
    if x < 0.0 {
        below
    } else {
        x - below
    }
}

/// The sum of eight lanes, in one fixed tree.
#[inline(always)]
pub fn lanes_sum(l: &[f32; 8]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

/// `Σ a[i] * b[i]`, each term added into lane `i % 8`, then
/// [`lanes_sum`].
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let n = a.len().min(b.len());
    let whole = n / 8 * 8;
    for (ca, cb) in a[..whole].chunks_exact(8).zip(b[..whole].chunks_exact(8)) {
        for j in 0..8 {
            acc[j] += ca[j] * cb[j];
        }
    }
    for i in whole..n {
        acc[i % 8] += a[i] * b[i];
    }
    lanes_sum(&acc)
}

/// `Σ a[i]`, each term added into lane `i % 8`, then [`lanes_sum`].
#[inline(always)]
pub fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let whole = a.len() / 8 * 8;
    for c in a[..whole].chunks_exact(8) {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    for (i, x) in a.iter().enumerate().skip(whole) {
        acc[i % 8] += *x;
    }
    lanes_sum(&acc)
}

/// The scores' exponentials `e^(s - max)` in place, and the inverse of
/// their sum: lane `j` of eight adds positions `j, j + 8, ...` in order,
/// then [`lanes_sum`].
#[inline(always)]
pub fn softmax(scores: &mut [f32], max: f32) -> f32 {
    let n = scores.len();
    // Eight positions at a time, so that the exponentials vectorize;
    // lane j still adds positions j, j + 8, ... in order.
    let mut lanes = [0f32; 8];
    let whole = n / 8 * 8;
    for chunk in scores[..whole].chunks_exact_mut(8) {
        let mut e = [0f32; 8];
        for (e, s) in e.iter_mut().zip(chunk.iter()) {
            *e = exp(*s - max);
        }
        chunk.copy_from_slice(&e);
        for (lane, e) in lanes.iter_mut().zip(e) {
            *lane += e;
        }
    }
    for t in whole..n {
        let e = exp(scores[t] - max);
        scores[t] = e;
        lanes[t % 8] += e;
    }
    1.0 / lanes_sum(&lanes)
}

#[cfg(test)]
// Exact bits are what some of these tests check.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_close_to_the_true_exponential() {
        for i in -8700..8800 {
            let x = i as f32 / 100.0;
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            assert!(((got - want) / want).abs() < 4e-7, "exp({x}) = {got}, want {want}");
        }
        assert!(exp(-1e9) > 0.0 && exp(1e9).is_finite());
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(round_even(2.5), 2.0);
        assert_eq!(round_even(3.5), 4.0);
        assert_eq!(round_even(-2.5), -2.0);
        assert_eq!(round_even(-126.7), -127.0);
        assert_eq!(round_even(0.49), 0.0);
    }

    /// GELU against the exact form on `f64` (`libm`'s `erf`, an
    /// independent implementation): within 1e-6 of `|x|` plus 1e-7, over
    /// the range activations take, and exact at zero and in both tails.
    #[test]
    fn gelu_is_close_to_the_exact_form() {
        for i in -1200..=1200 {
            let x = i as f32 / 100.0;
            let xf = f64::from(x);
            let want = 0.5 * xf * (1.0 + libm::erf(xf / std::f64::consts::SQRT_2));
            let got = f64::from(gelu(x));
            assert!((got - want).abs() < 1e-6 * xf.abs() + 1e-7, "gelu({x}) = {got}, want {want}");
        }
        assert_eq!(gelu(0.0), 0.0);
        assert!(gelu(-30.0).abs() < 1e-30 && gelu(30.0) == 30.0);
    }
}
