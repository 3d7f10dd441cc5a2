//! The arithmetic of the GGUF model's forward pass, owned by the project so
//! that a reply's bits are the same on every machine, at every thread count
//! and in every batch.
//!
//! The discipline is the one every local model shares (`crate::kernel`):
//! one definition per operation in plain arithmetic and a fixed order, no
//! fused multiply-add, and levels ([`Level`], `[chat.gguf] kernel`) that
//! change speed, never bits. Here, besides the shared operations:
//!
//! - **Levels.** The AVX2 level adds a hand-written AVX2 matrix product
//!   and attention head (`kernel/x86.rs`).
//! - **Matrix products** ([`Ops::matmul`]) take `Q8_0` weights and `Q8_0`
//!   activations (blocks of 32 signed bytes with one `f32` scale). Each
//!   output is `acc = isum_b as f32 * (xd_b * wd_b) + acc` over the blocks
//!   `b` in order, where `isum_b` is the block's integer dot product (exact
//!   in `i32`, so any order of its terms gives the same value). The work is
//!   split over outputs only, never over `K`, so a row's result depends on
//!   neither the thread count nor the other rows of the batch. Where the CPU
//!   has AVX-512 VNNI, the AVX2 level computes a block's integer dot product
//!   with `vpdpbusd` (the same exact integer, so the same bits, in fewer
//!   instructions), on 512-bit vectors where it has AVX-512F too: sixteen
//!   weight rows, a whole tile, per instruction.
//! - **Reductions over `f32`** run in eight lanes and end with one fixed
//!   tree ([`lanes_sum`]); [`exp`] is the project's own. RoPE's angles come
//!   from the `libm` crate (a Rust port of musl's, the same on every
//!   platform).

mod q8;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use crate::kernel::{dot, exp, lanes_sum, round_even, Level};
pub use q8::{quantize_block, Q8Matrix, Q8Rows, QK, TILE};

#[cfg(target_arch = "x86_64")]
use crate::kernel::avx2_fma;
use rayon::prelude::*;

/// Positions in one block of a sequence's cached keys ([`Cached`]): the
/// width of a 512-bit vector of `f32`, so that one load gives one
/// dimension of sixteen positions' keys.
pub const KEY_BLOCK: usize = 16;

/// One sequence's cached keys and values for one head, as attention reads
/// them.
///
/// - The keys are in blocks of [`KEY_BLOCK`] positions, each dimension's
///   values for the block's positions side by side: position `t`'s key's
///   dimension `d` is `keys[(t / KEY_BLOCK) * key_stride + d * KEY_BLOCK +
///   t % KEY_BLOCK]` (the head's offset already applied). A score is then
///   one lane of a vector over positions, with no sums across lanes.
/// - The values are row by row: position `t`'s value is
///   `values[t * stride..][..head_dim]`.
#[derive(Debug, Clone, Copy)]
pub struct Cached<'a> {
    /// Keys from the head's offset on, in blocks (see the type).
    pub keys: &'a [f32],
    /// Keys between one block of positions and the next.
    pub key_stride: usize,
    /// Values from the head's offset on.
    pub values: &'a [f32],
    /// Values between one position and the next.
    pub stride: usize,
    /// Positions attended to.
    pub n: usize,
    /// The scores' scale (`1 / sqrt(head_dim)`).
    pub scale: f32,
}

impl Cached<'_> {
    /// Whether the keys and values hold `n` positions of a head of `hd`:
    /// whole blocks of keys (every position of the last block's rows, held
    /// or not) and the values' rows.
    pub fn fits(&self, hd: usize) -> bool {
        let blocks = self.n.div_ceil(KEY_BLOCK);
        self.n == 0
            || (self.keys.len() >= (blocks - 1) * self.key_stride + hd * KEY_BLOCK
                && self.key_stride >= hd * KEY_BLOCK
                && self.values.len() >= (self.n - 1) * self.stride + hd)
    }
}

/// The bodies of the row-wise operations. Each is compiled once per level
/// (see [`Ops`]); `#[inline(always)]` puts the same source in each.
mod body {
    use super::{dot, exp, lanes_sum, quantize_block, Cached, KEY_BLOCK, QK};
    pub use crate::kernel::softmax;

    /// RMS norm of each row of `x` (width `w.len()`) into `out`:
    /// `x * (1 / sqrt(mean(x^2) + eps)) * w`.
    #[inline(always)]
    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let n = w.len();
        for (row, o) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
            let mean = dot(row, row) / n as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for ((o, v), g) in o.iter_mut().zip(row).zip(w) {
                *o = (*v * scale) * *g;
            }
        }
    }

    /// Quantizes each row of `x` (width `cols`) into `qs` and `d`.
    #[inline(always)]
    pub fn quantize_rows(x: &[f32], cols: usize, qs: &mut [i8], d: &mut [f32]) {
        for ((src, dst), s) in x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK)).zip(d.iter_mut()) {
            let src: &[f32; QK] = src.try_into().expect("a whole block");
            let dst: &mut [i8; QK] = dst.try_into().expect("a whole block");
            *s = quantize_block(src, dst);
        }
        debug_assert_eq!(x.len() % cols, 0);
    }

    /// `silu(g) * u` for the interleaved halves of each row of `gu`
    /// (`[g | u]`, each `half` wide): `g / (1 + e^-g) * u`.
    #[inline(always)]
    pub fn swiglu(gu: &[f32], half: usize, out: &mut [f32]) {
        for (row, o) in gu.chunks_exact(2 * half).zip(out.chunks_exact_mut(half)) {
            let (g, u) = row.split_at(half);
            for ((o, g), u) in o.iter_mut().zip(g).zip(u) {
                *o = (*g / (1.0 + exp(-*g))) * *u;
            }
        }
    }

    /// One attention head of one query row: `softmax(q·k_t * scale)` over
    /// the `n` positions of `kv`, then `Σ p_t v_t` into `out`. `scores` is
    /// scratch of at least `n`.
    ///
    /// Each score is [`dot`]'s: lane `j` of eight adds `q[d] k_t[d]` for the
    /// dimensions `d ≡ j (mod 8)` in order, from zero, then
    /// [`lanes_sum`], times `scale`. The keys come a block of positions at
    /// a time, each lane's sums kept for every position of the block.
    #[inline(always)]
    pub fn attend(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]) {
        let Cached { keys, key_stride, values, stride, n, scale } = kv;
        let hd = q.len();
        let mut max = f32::NEG_INFINITY;
        for (b, chunk) in scores[..n].chunks_mut(KEY_BLOCK).enumerate() {
            let block = &keys[b * key_stride..];
            // lanes[j][p]: lane j's sum for position p of the block.
            let mut lanes = [[0f32; KEY_BLOCK]; 8];
            for (d, qd) in q.iter().enumerate() {
                let row: &[f32; KEY_BLOCK] =
                    block[d * KEY_BLOCK..(d + 1) * KEY_BLOCK].try_into().expect("a block's row");
                for (l, k) in lanes[d % 8].iter_mut().zip(row) {
                    *l += *qd * *k;
                }
            }
            for (p, slot) in chunk.iter_mut().enumerate() {
                let s = lanes_sum(&std::array::from_fn(|j| lanes[j][p])) * scale;
                *slot = s;
                max = max.max(s);
            }
        }
        let inv = softmax(&mut scores[..n], max);
        out.iter_mut().for_each(|o| *o = 0.0);
        for t in 0..n {
            let p = scores[t] * inv;
            let v = &values[t * stride..t * stride + hd];
            for (o, v) in out.iter_mut().zip(v) {
                *o += p * *v;
            }
        }
    }

    /// The integer dot product of two blocks (exact: any order of its
    /// terms gives the same value). Written as one plain reduction, which
    /// LLVM's loop vectorizer turns into SSE2's `pmaddwd` on the baseline
    /// CPU (a hand-unrolled form it left scalar).
    #[inline(always)]
    pub fn block_dot(a: &[i8; QK], b: &[i8; QK]) -> i32 {
        a.iter().zip(b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum()
    }

    /// Outputs `n0..n1` of `x · wᵀ` for every row of `x`, row by row into
    /// `out` (row `m`'s output `n` at `m * stride + n - n0`), as the module
    /// docs define them.
    #[inline(always)]
    pub fn matmul(w: &super::Q8Matrix, n0: usize, n1: usize, x: &super::Q8Rows, out: &mut [f32], stride: usize) {
        let blocks = w.blocks();
        let (k, m_rows) = (w.cols, x.rows);
        // Weight row `n`, gathered from its tiles once for all the rows of
        // `x` (the gather is what a prompt's many rows would repeat).
        let mut row = vec![0i8; k];
        let mut scales = vec![0f32; blocks];
        for n in n0..n1 {
            for (b, (q, d)) in row.chunks_exact_mut(QK).zip(scales.iter_mut()).enumerate() {
                let (wb, wd) = w.block(n, b);
                q.copy_from_slice(&wb);
                *d = wd;
            }
            for m in 0..m_rows {
                let mut acc = 0f32;
                for b in 0..blocks {
                    let xa = m * k + b * QK;
                    let xb: &[i8; QK] = x.qs[xa..xa + QK].try_into().expect("a whole block");
                    let wb: &[i8; QK] = row[b * QK..(b + 1) * QK].try_into().expect("a whole block");
                    let isum = block_dot(xb, wb);
                    let s = x.d[m * blocks + b] * scales[b];
                    acc += isum as f32 * s;
                }
                out[m * stride + n - n0] = acc;
            }
        }
    }
}

/// Rows per task where a row-wise operation is split over rayon's pool;
/// a pass of fewer than twice as many rows runs it on the calling thread.
/// Each row is computed whole by one task, so the split changes no bit.
const PAR_ROWS: usize = 16;

/// The row-wise operations at one [`Level`].
#[derive(Debug, Clone, Copy)]
pub struct Ops {
    level: Level,
}

macro_rules! leveled {
    ($(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) ) => {
        $(#[$doc])*
        pub fn $name(&self, $($arg: $ty),*) {
            match self.level {
                Level::Portable => body::$name($($arg),*),
                Level::Avx2 => x86::$name($($arg),*),
            }
        }
    };
}

impl Ops {
    /// The operations at `level`. Refuses a level this CPU cannot run.
    pub fn new(level: Level) -> Option<Ops> {
        level.available().then_some(Ops { level })
    }

    /// The level they run at.
    pub fn level(&self) -> Level {
        self.level
    }

    fn rms_norm_rows(&self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        match self.level {
            Level::Portable => body::rms_norm(x, w, eps, out),
            Level::Avx2 => x86::rms_norm(x, w, eps, out),
        }
    }

    fn swiglu_rows(&self, gu: &[f32], half: usize, out: &mut [f32]) {
        match self.level {
            Level::Portable => body::swiglu(gu, half, out),
            Level::Avx2 => x86::swiglu(gu, half, out),
        }
    }

    /// RMS norm of each row of `x` (width `w.len()`) into `out` (see
    /// `body::rms_norm`), rows split over rayon's pool in passes of many.
    pub fn rms_norm(&self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let n = w.len();
        if x.len() < 2 * PAR_ROWS * n {
            return self.rms_norm_rows(x, w, eps, out);
        }
        out.par_chunks_mut(PAR_ROWS * n).zip(x.par_chunks(PAR_ROWS * n)).for_each(|(o, x)| {
            self.rms_norm_rows(x, w, eps, o);
        });
    }

    /// `silu(g) * u` of each row of `gu` (see `body::swiglu`), rows split
    /// over rayon's pool in passes of many.
    pub fn swiglu(&self, gu: &[f32], half: usize, out: &mut [f32]) {
        if out.len() < 2 * PAR_ROWS * half {
            return self.swiglu_rows(gu, half, out);
        }
        out.par_chunks_mut(PAR_ROWS * half).zip(gu.par_chunks(2 * PAR_ROWS * half)).for_each(|(o, gu)| {
            self.swiglu_rows(gu, half, o);
        });
    }

    /// Quantizes the rows of `x` (width `cols`) into `out`.
    pub fn quantize_rows(&self, x: &[f32], cols: usize, out: &mut Q8Rows) {
        let rows = x.len() / cols;
        out.rows = rows;
        out.cols = cols;
        out.qs.resize(rows * cols, 0);
        out.d.resize(rows * cols / QK, 0.0);
        out.sums.resize(rows * cols / QK, 0);
        let level = self.level;
        let some = |x: &[f32], qs: &mut [i8], d: &mut [f32], sums: &mut [i32]| {
            match level {
                Level::Portable => body::quantize_rows(x, cols, qs, d),
                Level::Avx2 => x86::quantize_blocks(x, cols, qs, d),
            }
            for (s, b) in sums.iter_mut().zip(qs.chunks_exact(QK)) {
                *s = b.iter().map(|q| i32::from(*q)).sum();
            }
        };
        if rows < 2 * PAR_ROWS {
            return some(x, &mut out.qs, &mut out.d, &mut out.sums);
        }
        let blocks = PAR_ROWS * cols / QK;
        out.qs
            .par_chunks_mut(PAR_ROWS * cols)
            .zip(out.d.par_chunks_mut(blocks))
            .zip(out.sums.par_chunks_mut(blocks))
            .zip(x.par_chunks(PAR_ROWS * cols))
            .for_each(|(((qs, d), sums), x)| some(x, qs, d, sums));
    }

    leveled!(
        /// One attention head of one query row (see `body::attend`).
        attend(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32])
    );

    /// `out = x · wᵀ` (`[x.rows][w.rows]`), split over groups of outputs on
    /// rayon's pool. Each output is computed whole by one task.
    pub fn matmul(&self, w: &Q8Matrix, x: &Q8Rows, out: &mut Vec<f32>) {
        assert_eq!(w.cols, x.cols, "a product's inner sizes agree; this is a bug");
        let (m, n) = (x.rows, w.rows);
        out.clear();
        if m == 0 || n == 0 {
            return;
        }
        // Groups of whole tiles, about four per thread, so that the
        // pool balances; a group is never split within a row. Each group
        // writes its outputs row by row into its own part of `parts`
        // (`[m][group]`), which is then copied into `out` a row's run at a
        // time.
        let threads = rayon::current_num_threads().max(1);
        let group = (n.div_ceil(4 * threads)).div_ceil(TILE).max(1) * TILE;
        let groups = n.div_ceil(group);
        let mut parts = vec![0f32; groups * group * m];
        let level = self.level;
        parts.par_chunks_mut(group * m).enumerate().for_each(|(i, part)| {
            let n0 = i * group;
            let n1 = (n0 + group).min(n);
            match level {
                Level::Portable => body::matmul(w, n0, n1, x, part, group),
                Level::Avx2 => x86::matmul(w, n0, n1, x, part, group),
            }
        });
        out.resize(m * n, 0.0);
        for (i, part) in parts.chunks_exact(group * m).enumerate() {
            let (n0, n1) = (i * group, ((i + 1) * group).min(n));
            for (r, row) in part.chunks_exact(group).enumerate() {
                out[r * n + n0..r * n + n1].copy_from_slice(&row[..n1 - n0]);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    //! Off x86-64 the AVX2 level is never available ([`super::Level::available`]);
    //! these stand-ins keep the dispatch total.
    use super::{body, Cached, Q8Matrix, Q8Rows};

    macro_rules! fused {
        ($($name:ident ( $($arg:ident : $ty:ty),* );)*) => {$(
            pub fn $name($($arg: $ty),*) {
                body::$name($($arg),*)
            }
        )*};
    }

    pub fn quantize_blocks(x: &[f32], cols: usize, qs: &mut [i8], d: &mut [f32]) {
        body::quantize_rows(x, cols, qs, d)
    }

    fused! {
        rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]);
        swiglu(gu: &[f32], half: usize, out: &mut [f32]);
        attend(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]);
        matmul(w: &Q8Matrix, n0: usize, n1: usize, x: &Q8Rows, out: &mut [f32], stride: usize);
    }
}

#[cfg(test)]
// Exact bits are what these tests check.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    pub(super) fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut s =
            engine::rng::Stream::from_key(engine::digest::DigestWriter::new("kernel test").u64(seed).finish().0);
        (0..n).map(|_| (s.unit() as f32 - 0.5) * 4.0).collect()
    }

    /// Quantizing gives the portable bytes and scales on blocks of every
    /// kind: ties, NaNs and infinities, zeros of both signs, subnormals and
    /// a scale whose inverse overflows, the largest magnitude at each place.
    #[test]
    fn quantizing_gives_the_portable_bits_on_every_kind_of_block() {
        let portable = Ops::new(Level::Portable).unwrap();
        let mut blocks: Vec<[f32; QK]> = Vec::new();
        let base: [f32; QK] = seeded(QK, 3).try_into().unwrap();
        blocks.push(base);
        blocks.push([0.0; QK]);
        blocks.push([-0.0; QK]);
        // 127 / 127 * k / 2: halves to round to even.
        blocks.push(std::array::from_fn(|i| if i == 0 { 127.0 } else { (i as f32 - 16.0) + 0.5 }));
        blocks.push(std::array::from_fn(|i| f32::from_bits(1 + i as u32)));
        blocks.push(std::array::from_fn(|i| f32::MIN_POSITIVE * (i as f32 - 16.0)));
        blocks.push(std::array::from_fn(|i| f32::MAX * if i % 2 == 0 { 1.0 } else { -0.5 }));
        for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
            for at in [0, 7, 8, 31] {
                let mut b = base;
                b[at] = special;
                blocks.push(b);
            }
        }
        for at in 0..QK {
            let mut b = base;
            b[at] = -9.0;
            blocks.push(b);
        }
        let x: Vec<f32> = blocks.concat();
        for level in [Level::Avx2, Level::Portable] {
            let Some(ops) = Ops::new(level) else { continue };
            let (mut a, mut b) = (Q8Rows::default(), Q8Rows::default());
            ops.quantize_rows(&x, QK, &mut a);
            portable.quantize_rows(&x, QK, &mut b);
            for (i, block) in blocks.iter().enumerate() {
                let q = |r: &Q8Rows| (r.qs[i * QK..(i + 1) * QK].to_vec(), r.d[i].to_bits(), r.sums[i]);
                assert_eq!(q(&a), q(&b), "{level:?}, block {i}: {block:?}");
            }
        }
    }

    /// Every level this CPU runs gives the same bits as the portable one,
    /// for products of any row count (the tiles and their remainders) and
    /// for the row-wise operations.
    #[test]
    fn every_level_gives_the_portable_bits() {
        let portable = Ops::new(Level::Portable).unwrap();
        let (k, n) = (96, 44);
        let w = Q8Matrix::quantize(&seeded(n * k, 2), n, k);
        for level in [Level::Avx2, Level::Portable] {
            let Some(ops) = Ops::new(level) else { continue };
            for m in [1, 2, 3, 5, 17] {
                let xs = seeded(m * k, 10 + m as u64);
                let (mut qa, mut qb) = (Q8Rows::default(), Q8Rows::default());
                ops.quantize_rows(&xs, k, &mut qa);
                portable.quantize_rows(&xs, k, &mut qb);
                assert_eq!((&qa.qs, bits(&qa.d)), (&qb.qs, bits(&qb.d)), "{level:?} quantize, {m} rows");
                let (mut a, mut b) = (Vec::new(), Vec::new());
                ops.matmul(&w, &qa, &mut a);
                portable.matmul(&w, &qb, &mut b);
                assert_eq!(bits(&a), bits(&b), "{level:?} matmul, {m} rows");
                // A row's outputs do not depend on the other rows.
                let mut one = Q8Rows::default();
                portable.quantize_rows(&xs[..k], k, &mut one);
                let mut c = Vec::new();
                ops.matmul(&w, &one, &mut c);
                assert_eq!(bits(&c), bits(&a[..n]), "{level:?}: row 0 alone and among {m}");
            }
            // A few rows, and enough to be split over the pool (against
            // the body on the calling thread).
            for rows in [3, 2 * PAR_ROWS + 5] {
                let x = seeded(rows * k, 5);
                let g = seeded(k, 6);
                let (mut a, mut b) = (vec![0.0; rows * k], vec![0.0; rows * k]);
                ops.rms_norm(&x, &g, 1e-5, &mut a);
                body::rms_norm(&x, &g, 1e-5, &mut b);
                assert_eq!(bits(&a), bits(&b), "{level:?} rms_norm, {rows} rows");
                let (mut a, mut b) = (vec![0.0; rows * k / 2], vec![0.0; rows * k / 2]);
                ops.swiglu(&x, k / 2, &mut a);
                body::swiglu(&x, k / 2, &mut b);
                assert_eq!(bits(&a), bits(&b), "{level:?} swiglu, {rows} rows");
                let mut qa = Q8Rows::default();
                ops.quantize_rows(&x, k, &mut qa);
                let (mut qs, mut d) = (vec![0i8; rows * k], vec![0f32; rows * k / QK]);
                body::quantize_rows(&x, k, &mut qs, &mut d);
                let sums: Vec<i32> = qs.chunks_exact(QK).map(|b| b.iter().map(|q| i32::from(*q)).sum()).collect();
                assert_eq!((&qa.qs, bits(&qa.d), &qa.sums), (&qs, bits(&d), &sums), "{level:?} quantize, {rows} rows");
            }
        }
    }

    /// Attention as the kernels defined it on keys kept row by row (each
    /// score [`dot`]'s, then the softmax and the weighted sum in order):
    /// the reference every layout and level is held to.
    fn attend_row_major(q: &[f32], keys: &[f32], values: &[f32], stride: usize, n: usize, scale: f32) -> Vec<u32> {
        let hd = q.len();
        let mut scores: Vec<f32> = (0..n).map(|t| dot(q, &keys[t * stride..t * stride + hd]) * scale).collect();
        let max = scores.iter().fold(f32::NEG_INFINITY, |m, s| m.max(*s));
        let inv = body::softmax(&mut scores, max);
        let mut out = vec![0f32; hd];
        for (t, s) in scores.iter().enumerate() {
            let p = s * inv;
            for (o, v) in out.iter_mut().zip(&values[t * stride..t * stride + hd]) {
                *o += p * *v;
            }
        }
        bits(&out).into_iter().chain(bits(&scores)).collect()
    }

    /// Row-major keys (`n` positions of `heads * hd`) laid out in blocks
    /// as a sequence keeps them ([`Cached`]), with `junk` in the last
    /// block's unused positions.
    fn in_blocks(keys: &[f32], heads: usize, hd: usize, n: usize, junk: f32) -> Vec<f32> {
        let width = heads * hd;
        let mut out = vec![junk; n.div_ceil(KEY_BLOCK) * KEY_BLOCK * width];
        for t in 0..n {
            for i in 0..width {
                out[(t / KEY_BLOCK) * KEY_BLOCK * width + i * KEY_BLOCK + t % KEY_BLOCK] = keys[t * width + i];
            }
        }
        out
    }

    /// Attention on keys in blocks gives the row-major definition's bits
    /// (scores and outputs) on every level and form this CPU runs: heads of
    /// 64 (SmolLM2's) and 128, widths the 512-bit form leaves to the
    /// 256-bit one (72) and the AVX2 form leaves to the body (36), and
    /// position counts around the blocks and their halves; the last
    /// block's unused positions hold junk, NaN and infinity included.
    #[test]
    fn attention_on_keys_in_blocks_gives_the_row_major_bits() {
        let heads = 3;
        for (hd, n) in [(64, 37), (64, 1), (64, 8), (64, 9), (64, 16), (64, 300), (128, 17), (72, 23), (36, 11)] {
            let stride = heads * hd;
            let rows = seeded(stride * n, 7 + n as u64);
            let values = seeded(stride * n, 8 + n as u64);
            let q = seeded(hd, 9);
            for junk in [0.0, f32::NAN, f32::INFINITY] {
                let blocks = in_blocks(&rows, heads, hd, n, junk);
                for head in [0, heads - 1] {
                    let want = attend_row_major(&q, &rows[head * hd..], &values[head * hd..], stride, n, 0.125);
                    let kv = Cached {
                        keys: &blocks[head * hd * KEY_BLOCK..],
                        key_stride: stride * KEY_BLOCK,
                        values: &values[head * hd..],
                        stride,
                        n,
                        scale: 0.125,
                    };
                    let run = |f: &dyn Fn(&mut [f32], &mut [f32])| {
                        let (mut scores, mut out) = (vec![0f32; n], vec![0f32; hd]);
                        f(&mut scores, &mut out);
                        bits(&out).into_iter().chain(bits(&scores)).collect::<Vec<u32>>()
                    };
                    let case = format!("head {head} of {hd}, {n} positions, junk {junk}");
                    assert_eq!(run(&|s, o| body::attend(&q, kv, s, o)), want, "portable, {case}");
                    #[cfg(target_arch = "x86_64")]
                    if avx2_fma() {
                        assert_eq!(run(&|s, o| x86::attend_with(&q, kv, s, o, false)), want, "AVX2, {case}");
                        if x86::avx512() {
                            assert_eq!(run(&|s, o| x86::attend_with(&q, kv, s, o, true)), want, "AVX-512F, {case}");
                        }
                    }
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if !(avx2_fma() && x86::avx512()) {
            eprintln!("this CPU has no AVX-512F: the 512-bit attention is not tested here");
        }
    }

    /// Every form of the hand-written tile this CPU runs (AVX-512 VNNI on
    /// 512-bit and 256-bit vectors, AVX2) gives the portable body's bits,
    /// for whole tiles, half tiles and a ragged tail, at every row count,
    /// into a strided output.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_form_of_the_tile_gives_the_portable_bits() {
        use x86::Tile;
        if !avx2_fma() {
            eprintln!("this CPU has no AVX2: only the portable body runs");
            return;
        }
        let forms: Vec<Tile> = [Tile::Vnni512, Tile::Vnni, Tile::Avx2].into_iter().filter(|f| f.available()).collect();
        if forms.len() < 3 {
            eprintln!("this CPU runs only {forms:?} of the tile's forms: the others are not tested here");
        }
        let portable = Ops::new(Level::Portable).unwrap();
        // 41 rows: two whole tiles, then a tile with one whole half and a
        // ragged one; 7: a ragged first half alone.
        for n in [41, 7] {
            let k = 96;
            let w = Q8Matrix::quantize(&seeded(n * k, 30 + n as u64), n, k);
            for m in [1, 4, 6, 7, 9] {
                let mut q = Q8Rows::default();
                portable.quantize_rows(&seeded(m * k, 31 + m as u64), k, &mut q);
                let stride = n + 3;
                let mut want = vec![0f32; m * stride];
                body::matmul(&w, 0, n, &q, &mut want, stride);
                for form in &forms {
                    let mut got = vec![0f32; m * stride];
                    x86::matmul_with(&w, 0, n, &q, &mut got, stride, *form);
                    assert_eq!(bits(&got), bits(&want), "{n} outputs, {m} rows: {form:?} against the portable body");
                }
                // From the second tile on, as a group of the pool writes.
                if n > TILE {
                    let mut got = vec![0f32; m * stride];
                    let mut part = vec![0f32; m * stride];
                    body::matmul(&w, TILE, n, &q, &mut part, stride);
                    x86::matmul_with(&w, TILE, n, &q, &mut got, stride, forms[0]);
                    assert_eq!(bits(&got), bits(&part), "{n} outputs from {TILE}, {m} rows: {:?}", forms[0]);
                }
            }
        }
    }

    /// The product against a plain `f64` reference: within the
    /// quantization's error.
    #[test]
    fn the_product_is_close_to_the_exact_one() {
        let (m, k, n) = (3, 128, 16);
        let xs = seeded(m * k, 20);
        let ws = seeded(n * k, 21);
        let w = Q8Matrix::quantize(&ws, n, k);
        let ops = Ops::new(Level::detect()).unwrap();
        let mut q = Q8Rows::default();
        ops.quantize_rows(&xs, k, &mut q);
        let mut out = Vec::new();
        ops.matmul(&w, &q, &mut out);
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|t| f64::from(xs[i * k + t]) * f64::from(ws[j * k + t])).sum();
                assert!((f64::from(out[i * n + j]) - exact).abs() < 0.3, "{i},{j}: {} vs {exact}", out[i * n + j]);
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}
