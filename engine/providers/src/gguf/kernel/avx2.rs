//! The kernels compiled with AVX2 and FMA: the bodies of `super::body`
//! under `#[target_feature]`, and a hand-written `Q8_0` product.
//!
//! This is one of the workspace's audited `unsafe` blocks (see the root
//! `Cargo.toml`). Two kinds of `unsafe` appear, each for one reason:
//!
//! - calling a `#[target_feature(enable = "avx2,fma")]` function, which is
//!   sound only on a CPU with those features: every public function here
//!   asserts them first ([`super::avx2_fma`], cached by the standard
//!   library), so a wrong call panics instead of executing an illegal
//!   instruction;
//! - unaligned loads and stores through pointers into slices whose lengths
//!   are asserted at the top of [`matmul`].
//!
//! The product computes each output as `super::body::matmul` does, in the
//! same order of floating-point operations: the integer dot product of a
//! block is exact whatever its lanes, and the block's scale and the
//! accumulation are two multiplies and an add per output, lane by lane. The
//! tests in `super` compare every operation with the portable build.
#![allow(unsafe_code)]

use super::{body, Cached, Q8Matrix, Q8Rows, QK};
use std::arch::x86_64::*;

fn check() {
    assert!(super::avx2_fma(), "the AVX2 kernels were called on a CPU without AVX2 and FMA; this is a bug");
}

macro_rules! compiled {
    ($name:ident, $inner:ident ( $($arg:ident : $ty:ty),* )) => {
        #[target_feature(enable = "avx2,fma")]
        fn $inner($($arg: $ty),*) {
            body::$name($($arg),*)
        }

        /// `super::body`'s function of the same name, compiled for AVX2 and FMA.
        pub fn $name($($arg: $ty),*) {
            check();
            // SAFETY: `check` asserted that this CPU has AVX2 and FMA.
            unsafe { $inner($($arg),*) }
        }
    };
}

compiled!(rms_norm, rms_norm_avx2(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]));
compiled!(swiglu, swiglu_avx2(gu: &[f32], half: usize, out: &mut [f32]));
compiled!(quantize_rows, quantize_rows_avx2(x: &[f32], cols: usize, qs: &mut [i8], d: &mut [f32]));
compiled!(attend, attend_avx2(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]));

/// Outputs `n0..n1` of `x · wᵀ` row by row into `out` (row `r`'s output
/// `n` at `r * stride + n - n0`): whole tiles of eight outputs by the AVX2
/// kernel (by its AVX-512 VNNI form where the CPU has it, see [`vnni`]),
/// the rest by the portable body.
pub fn matmul(w: &Q8Matrix, n0: usize, n1: usize, x: &Q8Rows, out: &mut [f32], stride: usize) {
    matmul_with(w, n0, n1, x, out, stride, vnni());
}

/// Whether this CPU has AVX-512 VNNI with 256-bit vectors, which computes
/// a block's integer dot product in one instruction per row instead of
/// two: the same exact integers, so the same bits.
pub fn vnni() -> bool {
    std::arch::is_x86_feature_detected!("avx512vnni") && std::arch::is_x86_feature_detected!("avx512vl")
}

/// [`matmul`] with the VNNI tile or without (the tests run both).
pub fn matmul_with(w: &Q8Matrix, n0: usize, n1: usize, x: &Q8Rows, out: &mut [f32], stride: usize, vnni: bool) {
    check();
    assert!(!vnni || self::vnni(), "the VNNI tile was asked for on a CPU without it; this is a bug");
    let (k, m) = (w.cols, x.rows);
    let blocks = k / QK;
    assert!(
        k % QK == 0
            && x.cols == k
            && n1 <= w.rows
            && n0 <= n1
            && stride >= n1 - n0
            && w.qs.len() >= w.rows * k
            && w.d.len() >= blocks * w.rows
            && x.qs.len() >= m * k
            && x.d.len() >= m * blocks
            && (m == 0 || out.len() >= (m - 1) * stride + (n1 - n0)),
        "a product's operands have their sizes; this is a bug"
    );
    let whole = n0 + (n1 - n0) / 8 * 8;
    let mut n = n0;
    while n < whole {
        for r in 0..m {
            // SAFETY: `check` asserted AVX2 and FMA (and `vnni` VNNI); the
            // asserts above keep rows n..n+8 of `w`, row r of `x` and their
            // scales in bounds.
            let acc = unsafe {
                match vnni {
                    true => tile8_vnni(w, n, x, r, blocks),
                    false => tile8(w, n, x, r, blocks),
                }
            };
            let at = r * stride + n - n0;
            out[at..at + 8].copy_from_slice(&acc);
        }
        n += 8;
    }
    body::matmul(w, whole, n1, x, &mut out[whole - n0..], stride);
}

/// [`tile8`] with AVX-512 VNNI (256-bit): `vpdpbusd` sums each four
/// adjacent byte products into a lane, the same exact `i32` as
/// `maddubs` then `madd`.
///
/// # Safety
///
/// As [`tile8`], and the CPU has AVX-512 VNNI and VL.
#[target_feature(enable = "avx2,fma,avx512vnni,avx512vl")]
unsafe fn tile8_vnni(w: &Q8Matrix, n: usize, x: &Q8Rows, r: usize, blocks: usize) -> [f32; 8] {
    let k = w.cols;
    let mut acc = _mm256_setzero_ps();
    // SAFETY (for the block): the caller keeps every pointer below within
    // its slice (see the function's contract).
    unsafe {
        let xq = x.qs.as_ptr().add(r * k);
        let wq = w.qs.as_ptr().add(n * k);
        let wd = w.d.as_ptr();
        let xd = x.d.as_ptr().add(r * blocks);
        let zero = _mm256_setzero_si256();
        for b in 0..blocks {
            let xv = _mm256_loadu_si256(xq.add(b * QK).cast());
            let ax = _mm256_sign_epi8(xv, xv);
            macro_rules! lanes {
                ($j:expr) => {{
                    let wv = _mm256_loadu_si256(wq.add($j * k + b * QK).cast());
                    _mm256_dpbusd_epi32(zero, ax, _mm256_sign_epi8(wv, xv))
                }};
            }
            let h01 = _mm256_hadd_epi32(lanes!(0), lanes!(1));
            let h23 = _mm256_hadd_epi32(lanes!(2), lanes!(3));
            let h45 = _mm256_hadd_epi32(lanes!(4), lanes!(5));
            let h67 = _mm256_hadd_epi32(lanes!(6), lanes!(7));
            let h0123 = _mm256_hadd_epi32(h01, h23);
            let h4567 = _mm256_hadd_epi32(h45, h67);
            let low = _mm256_permute2x128_si256(h0123, h4567, 0x20);
            let high = _mm256_permute2x128_si256(h0123, h4567, 0x31);
            let isum = _mm256_add_epi32(low, high);
            let scale = _mm256_mul_ps(_mm256_set1_ps(*xd.add(b)), _mm256_loadu_ps(wd.add(b * w.rows + n)));
            acc = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale), acc);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), acc);
        out
    }
}

/// Eight outputs (`w`'s rows `n..n + 8`) of activation row `r`.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; `n + 8 <= w.rows`, `r < x.rows`, and both
/// operands hold `blocks` whole blocks per row with their scales.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile8(w: &Q8Matrix, n: usize, x: &Q8Rows, r: usize, blocks: usize) -> [f32; 8] {
    let k = w.cols;
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    // SAFETY (for the block): the caller keeps every pointer below within
    // its slice (see the function's contract).
    unsafe {
        let xq = x.qs.as_ptr().add(r * k);
        let wq = w.qs.as_ptr().add(n * k);
        let wd = w.d.as_ptr();
        let xd = x.d.as_ptr().add(r * blocks);
        for b in 0..blocks {
            let xv = _mm256_loadu_si256(xq.add(b * QK).cast());
            // |x| as unsigned bytes, and each weight given x's sign: their
            // byte products are x * w, summed in pairs (at most 2 * 127 *
            // 127, no saturation), then in fours, as exact `i32` lanes.
            let ax = _mm256_sign_epi8(xv, xv);
            // (A macro, not a closure: the intrinsics stay inlined in
            // this function's AVX2 context.)
            macro_rules! lanes {
                ($j:expr) => {{
                    let wv = _mm256_loadu_si256(wq.add($j * k + b * QK).cast());
                    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv)), ones)
                }};
            }
            let h01 = _mm256_hadd_epi32(lanes!(0), lanes!(1));
            let h23 = _mm256_hadd_epi32(lanes!(2), lanes!(3));
            let h45 = _mm256_hadd_epi32(lanes!(4), lanes!(5));
            let h67 = _mm256_hadd_epi32(lanes!(6), lanes!(7));
            let h0123 = _mm256_hadd_epi32(h01, h23);
            let h4567 = _mm256_hadd_epi32(h45, h67);
            let low = _mm256_permute2x128_si256(h0123, h4567, 0x20);
            let high = _mm256_permute2x128_si256(h0123, h4567, 0x31);
            // Lane j: the block's integer dot product with row n + j.
            let isum = _mm256_add_epi32(low, high);
            let scale = _mm256_mul_ps(_mm256_set1_ps(*xd.add(b)), _mm256_loadu_ps(wd.add(b * w.rows + n)));
            acc = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale), acc);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), acc);
        out
    }
}
