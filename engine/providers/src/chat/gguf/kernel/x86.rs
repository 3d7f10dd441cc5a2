//! The x86-64 kernels, compiled with AVX2 and FMA (and AVX-512F or
//! AVX-512 VNNI where the CPU has them): the bodies of `super::body` under
//! `#[target_feature]`, a hand-written `Q8_0` product, a hand-written
//! attention head and the activations' quantizing by hand.
//!
//! This is one of the workspace's audited `unsafe` blocks (see the root
//! `Cargo.toml`). Two kinds of `unsafe` appear, each for one reason:
//!
//! - calling a `#[target_feature]` function (AVX2 and FMA, and for some
//!   AVX-512F or AVX-512 VNNI), which is sound only on a CPU with those
//!   features: every public function here asserts them first
//!   ([`super::avx2_fma`], [`Tile::available`], [`avx512`], cached by the
//!   standard library), so a wrong call panics instead of executing an
//!   illegal instruction;
//! - unaligned loads and stores through pointers into slices whose lengths
//!   are asserted (or checked) at the top of [`matmul_with`],
//!   [`attend_with`] and [`quantize_blocks`].
//!
//! The product computes each output as `super::body::matmul` does, in the
//! same order of floating-point operations: the integer dot product of a
//! block is exact whatever its lanes (and the VNNI form's offset exact
//! too), and the block's scale and the accumulation are two multiplies and
//! an add per output, lane by lane. Attention computes each score, each
//! exponential and each output with the body's operations in the body's
//! order, only several at once. The tests in `super` compare every
//! operation with the portable build.
#![allow(unsafe_code)]

use super::{body, Cached, Q8Matrix, Q8Rows, KEY_BLOCK, QK, TILE};
use crate::kernel::avx2_compiled;
use std::arch::x86_64::*;

fn check() {
    assert!(super::avx2_fma(), "the AVX2 kernels were called on a CPU without AVX2 and FMA; this is a bug");
}

avx2_compiled!(body => rms_norm, rms_norm_avx2(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]));
avx2_compiled!(body => swiglu, swiglu_avx2(gu: &[f32], half: usize, out: &mut [f32]));
avx2_compiled!(body => quantize_rows, quantize_rows_avx2(x: &[f32], cols: usize, qs: &mut [i8], d: &mut [f32]));

/// `super::body::quantize_rows` by hand (the body, compiled for AVX2, where
/// the lengths are not whole blocks), with the same value in every byte
/// and scale:
///
/// - the block's largest magnitude by vector maxima, which pass over a
///   NaN as `f32::max` does (the maximum of the others is the same in any
///   order);
/// - the scale and its inverse as in `super::quantize_block`, on one value;
/// - each value times the inverse, rounded by the same add and subtract,
///   clamped to ±127 with a NaN kept apart, then made a byte (a NaN's is 0,
///   as `as i8` gives).
pub fn quantize_blocks(x: &[f32], cols: usize, qs: &mut [i8], d: &mut [f32]) {
    check();
    let blocks = x.len() / QK;
    if !x.len().is_multiple_of(QK) || qs.len() != x.len() || d.len() != blocks {
        return quantize_rows(x, cols, qs, d);
    }
    // SAFETY: `check` asserted AVX2 and FMA; the lengths checked above
    // keep every load and store within its slice.
    unsafe { quantize8(x, qs, d) }
}

/// # Safety
///
/// The CPU has AVX2; `x` and `qs` hold `d.len()` whole blocks.
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize8(x: &[f32], qs: &mut [i8], d: &mut [f32]) {
    // SAFETY (for the block): the caller's contract bounds every pointer.
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        let magic = _mm256_set1_ps(12_582_912.0);
        let (lo, hi) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (b, s) in d.iter_mut().enumerate() {
            let p = x.as_ptr().add(b * QK);
            let v =
                [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))];
            // `_mm256_max_ps(a, m)` is `m` where `a` is NaN; `m` never is.
            let mut m = _mm256_setzero_ps();
            for v in v {
                m = _mm256_max_ps(_mm256_andnot_ps(sign, v), m);
            }
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
            let amax = _mm_cvtss_f32(m);
            let scale = amax / 127.0;
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            *s = scale;
            let inv = _mm256_set1_ps(inv);
            let q = v.map(|v| {
                let r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v, inv), magic), magic);
                let c = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
                // Zero where `r` is NaN (`max` gave -127 there).
                _mm256_cvttps_epi32(_mm256_and_ps(c, _mm256_cmp_ps(r, r, _CMP_ORD_Q)))
            });
            // Values in ±127: the packs never saturate. They interleave the
            // 128-bit halves; the permutation puts the fours back in order.
            let bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            let bytes = _mm256_permutevar8x32_epi32(bytes, order);
            _mm256_storeu_si256(qs.as_mut_ptr().add(b * QK).cast(), bytes);
        }
    }
}

/// The end of an attention head, inside an `unsafe fn` compiled for the
/// vector width it names: the softmax of the scores (`body::softmax`),
/// then `$weighted::<V>` (`V` registers of `$lanes` outputs) over runs of
/// at most eight registers, until every output of `$out` is written.
macro_rules! weigh {
    ($weighted:ident, $lanes:literal, $scores:expr, $values:expr, $stride:expr, $n:expr, $max:expr, $out:expr) => {{
        let (scores, values, stride, n, out): (&mut [f32], &[f32], usize, usize, &mut [f32]) =
            ($scores, $values, $stride, $n, $out);
        let inv = body::softmax(&mut scores[..n], $max);
        let hd = out.len();
        let mut c0 = 0;
        while c0 < hd {
            let width = (hd - c0).min(8 * $lanes);
            // SAFETY: the caller's contract; outputs `c0..c0 + width` of
            // each value row.
            unsafe {
                match width / $lanes {
                    8 => $weighted::<8>(scores, values, stride, n, inv, c0, out),
                    7 => $weighted::<7>(scores, values, stride, n, inv, c0, out),
                    6 => $weighted::<6>(scores, values, stride, n, inv, c0, out),
                    5 => $weighted::<5>(scores, values, stride, n, inv, c0, out),
                    4 => $weighted::<4>(scores, values, stride, n, inv, c0, out),
                    3 => $weighted::<3>(scores, values, stride, n, inv, c0, out),
                    2 => $weighted::<2>(scores, values, stride, n, inv, c0, out),
                    _ => $weighted::<1>(scores, values, stride, n, inv, c0, out),
                }
            }
            c0 += width;
        }
    }};
}

#[target_feature(enable = "avx2,fma")]
fn attend_body(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]) {
    body::attend(q, kv, scores, out);
}

/// Whether this CPU has AVX-512F, for [`attend`]'s 512-bit form.
pub fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// `super::body::attend`, by hand for heads whose width is a multiple of
/// eight (the body, compiled for AVX2, otherwise), with the same
/// operations on every value:
///
/// - each score in one lane of a vector over positions: lane `j`'s sum of
///   the body's eight kept in its own vector (eight positions, or sixteen
///   on AVX-512F), each dimension's keys for those positions one load,
///   then [`super::lanes_sum`]'s tree as seven vector adds and the scale;
/// - the weighted sum of the values with its accumulators in registers,
///   64 outputs at a time (128 on AVX-512F), each adding the positions in
///   order.
///
/// On AVX-512F (and heads a multiple of sixteen wide) the vectors are
/// 512-bit: half the instructions for the same lanes.
pub fn attend(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]) {
    attend_with(q, kv, scores, out, avx512());
}

/// [`attend`] with its 512-bit form (`wide`, on a CPU with AVX-512F) or
/// without (the tests run both).
pub fn attend_with(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32], wide: bool) {
    check();
    assert!(!wide || avx512(), "the 512-bit attention was asked for on a CPU without AVX-512F; this is a bug");
    let hd = q.len();
    if hd == 0 || !hd.is_multiple_of(8) || out.len() != hd || scores.len() < kv.n || !kv.fits(hd) {
        // SAFETY: `check` asserted AVX2 and FMA.
        return unsafe { attend_body(q, kv, scores, out) };
    }
    // SAFETY: `check` asserted AVX2 and FMA (and `avx512` AVX-512F); the
    // lengths checked above keep every load and store within its slice.
    unsafe {
        if wide && hd.is_multiple_of(16) {
            attend16(q, kv, scores, out);
        } else {
            attend8(q, kv, scores, out);
        }
    }
}

/// # Safety
///
/// The CPU has AVX2 and FMA; `q.len()` is a multiple of 8 and equals
/// `out.len()`; `scores` holds `kv.n`; `kv` fits a head of `q.len()`
/// ([`Cached::fits`]).
#[target_feature(enable = "avx2,fma")]
unsafe fn attend8(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]) {
    let Cached { keys, key_stride, values, stride, n, scale } = kv;
    let hd = q.len();
    let mut max = f32::NEG_INFINITY;
    // SAFETY (for the block): the caller's contract bounds every pointer.
    unsafe {
        let mut maxv = _mm256_set1_ps(f32::NEG_INFINITY);
        let scale_v = _mm256_set1_ps(scale);
        let mut t = 0;
        while t < n {
            // Positions t..t + 8: half of block t / KEY_BLOCK.
            let base = keys.as_ptr().add((t / KEY_BLOCK) * key_stride + t % KEY_BLOCK);
            let mut acc = [_mm256_setzero_ps(); 8];
            for c in 0..hd / 8 {
                for (j, a) in acc.iter_mut().enumerate() {
                    let d = 8 * c + j;
                    let k = _mm256_loadu_ps(base.add(d * KEY_BLOCK));
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(_mm256_set1_ps(*q.get_unchecked(d)), k));
                }
            }
            // lanes_sum(l) = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)),
            // lane by lane.
            let sums = _mm256_add_ps(
                _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])),
            );
            let s = _mm256_mul_ps(sums, scale_v);
            if t + 8 <= n {
                _mm256_storeu_ps(scores.as_mut_ptr().add(t), s);
                // A NaN score is passed over, as `f32::max` does.
                maxv = _mm256_max_ps(s, maxv);
            } else {
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), s);
                for (slot, s) in scores[t..n].iter_mut().zip(lanes) {
                    *slot = s;
                    max = max.max(s);
                }
            }
            t += 8;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), maxv);
        for l in lanes {
            max = max.max(l);
        }
    }
    weigh!(weighted, 8, scores, values, stride, n, max, out);
}

/// [`attend8`] in 512-bit vectors: a whole block of sixteen positions'
/// scores at once, and sixteen of the weighted sum's outputs per register.
///
/// # Safety
///
/// As [`attend8`], with `q.len()` a multiple of 16, and the CPU has
/// AVX-512F.
#[target_feature(enable = "avx2,fma,avx512f")]
unsafe fn attend16(q: &[f32], kv: Cached<'_>, scores: &mut [f32], out: &mut [f32]) {
    let Cached { keys, key_stride, values, stride, n, scale } = kv;
    let hd = q.len();
    let mut max = f32::NEG_INFINITY;
    // SAFETY (for the block): the caller's contract bounds every pointer.
    unsafe {
        let mut maxv = _mm512_set1_ps(f32::NEG_INFINITY);
        let scale_v = _mm512_set1_ps(scale);
        let mut t = 0;
        while t < n {
            let base = keys.as_ptr().add((t / KEY_BLOCK) * key_stride);
            let mut acc = [_mm512_setzero_ps(); 8];
            for c in 0..hd / 8 {
                for (j, a) in acc.iter_mut().enumerate() {
                    let d = 8 * c + j;
                    let k = _mm512_loadu_ps(base.add(d * KEY_BLOCK));
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(_mm512_set1_ps(*q.get_unchecked(d)), k));
                }
            }
            let sums = _mm512_add_ps(
                _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
                _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7])),
            );
            let s = _mm512_mul_ps(sums, scale_v);
            // The block's positions below n: all sixteen but in the last.
            let held: __mmask16 = if t + KEY_BLOCK <= n { !0 } else { (1 << (n - t)) - 1 };
            _mm512_mask_storeu_ps(scores.as_mut_ptr().add(t), held, s);
            // A NaN score is passed over, as `f32::max` does.
            maxv = _mm512_mask_max_ps(maxv, held, s, maxv);
            t += KEY_BLOCK;
        }
        let mut lanes = [0f32; 16];
        _mm512_storeu_ps(lanes.as_mut_ptr(), maxv);
        for l in lanes {
            max = max.max(l);
        }
    }
    weigh!(weighted16, 16, scores, values, stride, n, max, out);
}

/// [`weighted`] in 512-bit registers: outputs `c0..c0 + 16 * V`.
///
/// # Safety
///
/// As [`weighted`] for `16 * V` outputs, and the CPU has AVX-512F.
#[target_feature(enable = "avx2,fma,avx512f")]
unsafe fn weighted16<const V: usize>(
    scores: &[f32],
    values: &[f32],
    stride: usize,
    n: usize,
    inv: f32,
    c0: usize,
    out: &mut [f32],
) {
    // SAFETY (for the block): the caller's contract bounds every pointer.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); V];
        let vp = values.as_ptr().add(c0);
        for (t, s) in scores[..n].iter().enumerate() {
            let p = _mm512_set1_ps(*s * inv);
            let row = vp.add(t * stride);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = _mm512_add_ps(*a, _mm512_mul_ps(p, _mm512_loadu_ps(row.add(16 * j))));
            }
        }
        for (j, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(c0 + 16 * j), *a);
        }
    }
}

/// Outputs `c0..c0 + 8 * V` of `Σ_t (scores[t] * inv) v_t`, the positions
/// added in order from zero, in `V` vector registers.
///
/// # Safety
///
/// The CPU has AVX2; `scores` holds `n`, `values` holds `n` positions of
/// `stride` with at least `c0 + 8 * V` values each, and so does `out`.
#[target_feature(enable = "avx2,fma")]
unsafe fn weighted<const V: usize>(
    scores: &[f32],
    values: &[f32],
    stride: usize,
    n: usize,
    inv: f32,
    c0: usize,
    out: &mut [f32],
) {
    // SAFETY (for the block): the caller's contract bounds every pointer.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); V];
        let vp = values.as_ptr().add(c0);
        for (t, s) in scores[..n].iter().enumerate() {
            let p = _mm256_set1_ps(*s * inv);
            let row = vp.add(t * stride);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(p, _mm256_loadu_ps(row.add(8 * j))));
            }
        }
        for (j, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(c0 + 8 * j), *a);
        }
    }
}

/// Outputs `n0..n1` of `x · wᵀ` row by row into `out` (row `r`'s output
/// `n` at `r * stride + n - n0`), a tile of weight rows and four
/// activation rows at a time, by the fastest [`Tile`] this CPU has. `n0`
/// is a tile's first row.
pub fn matmul(w: &Q8Matrix, n0: usize, n1: usize, x: &Q8Rows, out: &mut [f32], stride: usize) {
    matmul_with(w, n0, n1, x, out, stride, Tile::detect());
}

/// The hand-written forms of the product's tile. Each computes every
/// output with the same operations in the same order (the block's exact
/// integer dot product, then a multiply by the scales and an add), only
/// more of them per instruction, so every form gives the same bits; the
/// CPU decides which runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// AVX2: `maddubs` and `madd` on sign-fixed bytes, eight weight rows
    /// (half a tile) per vector.
    Avx2,
    /// AVX-512 VNNI on 256-bit vectors: one `vpdpbusd` per four columns,
    /// eight weight rows per vector.
    Vnni,
    /// AVX-512 VNNI on 512-bit vectors: a whole tile of sixteen weight
    /// rows per `vpdpbusd`, so half the instructions per output of
    /// [`Tile::Vnni`].
    Vnni512,
}

impl Tile {
    /// The fastest form this CPU runs (the AVX2 level's floor is
    /// [`Tile::Avx2`]).
    pub fn detect() -> Tile {
        if Tile::Vnni512.available() {
            Tile::Vnni512
        } else if Tile::Vnni.available() {
            Tile::Vnni
        } else {
            Tile::Avx2
        }
    }

    /// Whether this CPU runs the form.
    pub fn available(self) -> bool {
        use std::arch::is_x86_feature_detected as has;
        let vnni = super::avx2_fma() && has!("avx512vnni");
        match self {
            Tile::Avx2 => super::avx2_fma(),
            Tile::Vnni => vnni && has!("avx512vl"),
            Tile::Vnni512 => vnni && has!("avx512f"),
        }
    }
}

/// Rows of activations a half tile's weights are used for while in
/// registers (sixteen 256-bit registers hold the half tile, the rows'
/// sums and the values in flight).
const ROWS: usize = 4;

/// Rows of activations a whole tile's weights are used for while in
/// registers, on 512-bit vectors (thirty-two of them): a batch's eight
/// generated rows in one sweep over the weights, so that each weight read
/// from memory is used eight times as it arrives.
const WIDE_ROWS: usize = 8;

/// Weight rows in half a tile: one 256-bit vector's lanes.
const HALF: usize = TILE / 2;

/// Bytes of one group of four columns of a tile's block (its rows' four
/// values each, in row order).
const GROUP: usize = 4 * TILE;

/// Copies the outputs of `rows` (activation rows `r..`, weight rows
/// `n..n + W` of which those below `n1` are real) into place.
fn put<const W: usize>(
    out: &mut [f32],
    stride: usize,
    (n0, n1): (usize, usize),
    n: usize,
    r: usize,
    rows: &[[f32; W]],
) {
    let wide = (n1 - n).min(W);
    for (i, row) in rows.iter().enumerate() {
        let at = (r + i) * stride + n - n0;
        out[at..at + wide].copy_from_slice(&row[..wide]);
    }
}

/// [`matmul`] with the given form of the tile (the tests run each).
pub fn matmul_with(w: &Q8Matrix, n0: usize, n1: usize, x: &Q8Rows, out: &mut [f32], stride: usize, form: Tile) {
    check();
    assert!(form.available(), "the {form:?} tile was asked for on a CPU without it; this is a bug");
    let (k, m) = (w.cols, x.rows);
    let blocks = k / QK;
    assert!(
        k % QK == 0
            && x.cols == k
            && n1 <= w.rows
            && n0 <= n1
            && n0.is_multiple_of(TILE)
            && stride >= n1 - n0
            && w.qs.len() >= w.tiles() * TILE * k
            && w.d.len() >= w.tiles() * TILE * blocks
            && x.qs.len() >= m * k
            && x.d.len() >= m * blocks
            && x.sums.len() >= m * blocks
            && (m == 0 || out.len() >= (m - 1) * stride + (n1 - n0)),
        "a product's operands have their sizes; this is a bug"
    );
    let span = (n0, n1);
    // SAFETY (each call below): `check` and `form.available()` asserted
    // the CPU's features; the asserts above keep tile t of `w` (both its
    // halves), the rows r.. of `x` and their scales and sums in bounds.
    for t in n0 / TILE..n1.div_ceil(TILE) {
        if form == Tile::Vnni512 {
            let n = t * TILE;
            let mut r = 0;
            while r + WIDE_ROWS <= m {
                put(out, stride, span, n, r, &unsafe { tile_vnni512::<WIDE_ROWS>(w, t, x, r) });
                r += WIDE_ROWS;
            }
            match m - r {
                7 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<7>(w, t, x, r) }),
                6 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<6>(w, t, x, r) }),
                5 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<5>(w, t, x, r) }),
                4 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<4>(w, t, x, r) }),
                3 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<3>(w, t, x, r) }),
                2 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<2>(w, t, x, r) }),
                1 => put(out, stride, span, n, r, &unsafe { tile_vnni512::<1>(w, t, x, r) }),
                _ => {}
            }
            continue;
        }
        let vnni = form == Tile::Vnni;
        for h in 0..2 {
            let n = t * TILE + h * HALF;
            if n >= n1 {
                break;
            }
            let mut r = 0;
            while r + ROWS <= m {
                put(out, stride, span, n, r, &unsafe { half::<ROWS>(w, t, h, x, r, vnni) });
                r += ROWS;
            }
            match m - r {
                3 => put(out, stride, span, n, r, &unsafe { half::<3>(w, t, h, x, r, vnni) }),
                2 => put(out, stride, span, n, r, &unsafe { half::<2>(w, t, h, x, r, vnni) }),
                1 => put(out, stride, span, n, r, &unsafe { half::<1>(w, t, h, x, r, vnni) }),
                _ => {}
            }
        }
    }
}

/// # Safety
///
/// As [`tile_avx2`], and with `vnni` only on a CPU with AVX-512 VNNI.
unsafe fn half<const R: usize>(
    w: &Q8Matrix,
    t: usize,
    h: usize,
    x: &Q8Rows,
    r0: usize,
    vnni: bool,
) -> [[f32; HALF]; R] {
    // SAFETY: the caller's contract.
    unsafe {
        match vnni {
            true => tile_vnni::<R>(w, t, h, x, r0),
            false => tile_avx2::<R>(w, t, h, x, r0),
        }
    }
}

/// [`tile_vnni`] on a whole tile at once, in 512-bit vectors: each
/// `vpdpbusd` gives sixteen weight rows' partial sums, and each lane
/// computes its output with the same operations as the 256-bit form's.
///
/// # Safety
///
/// As [`tile_avx2`] (for the whole tile), and the CPU has AVX-512F and
/// AVX-512 VNNI.
#[target_feature(enable = "avx2,fma,avx512f,avx512vnni")]
unsafe fn tile_vnni512<const R: usize>(w: &Q8Matrix, t: usize, x: &Q8Rows, r0: usize) -> [[f32; TILE]; R] {
    let blocks = w.blocks();
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY (for the block): the caller keeps every pointer below within
    // its slice (see the function's contract).
    unsafe {
        let flip = _mm512_set1_epi8(i8::MIN);
        let wq = w.qs.as_ptr().add(t * blocks * TILE * QK);
        let wd = w.d.as_ptr().add(t * blocks * TILE);
        for b in 0..blocks {
            let mut wv = [_mm512_setzero_si512(); 8];
            for (g, v) in wv.iter_mut().enumerate() {
                *v = _mm512_xor_si512(_mm512_loadu_si512(wq.add((b * 8 + g) * GROUP).cast()), flip);
            }
            let dw = _mm512_loadu_ps(wd.add(b * TILE));
            for (i, a) in acc.iter_mut().enumerate() {
                let at = (r0 + i) * blocks + b;
                let xq = x.qs.as_ptr().add(at * QK);
                let mut isum = _mm512_setzero_si512();
                for (g, v) in wv.iter().enumerate() {
                    let xb = _mm512_set1_epi32(xq.add(4 * g).cast::<i32>().read_unaligned());
                    isum = _mm512_dpbusd_epi32(isum, *v, xb);
                }
                let dot = _mm512_sub_epi32(isum, _mm512_set1_epi32(128 * *x.sums.as_ptr().add(at)));
                let scale = _mm512_mul_ps(_mm512_set1_ps(*x.d.as_ptr().add(at)), dw);
                *a = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), scale), *a);
            }
        }
        let mut out = [[0f32; TILE]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }
}

/// [`tile_avx2`] with AVX-512 VNNI (256-bit): `vpdpbusd` multiplies
/// unsigned bytes by signed ones, so the weights are offset by 128 (`w ^
/// 0x80` is `w + 128` as a `u8`) and the block's `128 Σ x` taken off
/// again: the same exact `i32` as the AVX2 form.
///
/// # Safety
///
/// As [`tile_avx2`], and the CPU has AVX-512 VNNI and VL.
#[target_feature(enable = "avx2,fma,avx512vnni,avx512vl")]
unsafe fn tile_vnni<const R: usize>(w: &Q8Matrix, t: usize, h: usize, x: &Q8Rows, r0: usize) -> [[f32; HALF]; R] {
    let blocks = w.blocks();
    let mut acc = [_mm256_setzero_ps(); R];
    // SAFETY (for the block): the caller keeps every pointer below within
    // its slice (see the function's contract).
    unsafe {
        let flip = _mm256_set1_epi8(i8::MIN);
        let wq = w.qs.as_ptr().add(t * blocks * TILE * QK + h * 4 * HALF);
        let wd = w.d.as_ptr().add(t * blocks * TILE + h * HALF);
        for b in 0..blocks {
            let mut wv = [_mm256_setzero_si256(); 8];
            for (g, v) in wv.iter_mut().enumerate() {
                *v = _mm256_xor_si256(_mm256_loadu_si256(wq.add((b * 8 + g) * GROUP).cast()), flip);
            }
            let dw = _mm256_loadu_ps(wd.add(b * TILE));
            for (i, a) in acc.iter_mut().enumerate() {
                let at = (r0 + i) * blocks + b;
                let xq = x.qs.as_ptr().add(at * QK);
                let mut isum = _mm256_setzero_si256();
                for (g, v) in wv.iter().enumerate() {
                    // Four of x's bytes (columns 4g..4g + 4) against each
                    // row's four in lane j.
                    let xb = _mm256_set1_epi32(xq.add(4 * g).cast::<i32>().read_unaligned());
                    isum = _mm256_dpbusd_epi32(isum, *v, xb);
                }
                let dot = _mm256_sub_epi32(isum, _mm256_set1_epi32(128 * *x.sums.as_ptr().add(at)));
                let scale = _mm256_mul_ps(_mm256_set1_ps(*x.d.as_ptr().add(at)), dw);
                *a = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), scale), *a);
            }
        }
        let mut out = [[0f32; HALF]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm256_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }
}

/// Half `h` of tile `t`: its eight outputs (`w`'s rows `TILE t + 8h..`
/// and the seven after) of the activation rows `r0..r0 + R`. Each block's
/// eight weight vectors are loaded once for the `R` rows.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; `t < w.tiles()`, `h < 2`, `r0 + R <= x.rows`,
/// and both operands hold `blocks` whole blocks per row with their scales
/// (and `x` its sums).
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const R: usize>(w: &Q8Matrix, t: usize, h: usize, x: &Q8Rows, r0: usize) -> [[f32; HALF]; R] {
    let blocks = w.blocks();
    let mut acc = [_mm256_setzero_ps(); R];
    // SAFETY (for the block): the caller keeps every pointer below within
    // its slice (see the function's contract).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let wq = w.qs.as_ptr().add(t * blocks * TILE * QK + h * 4 * HALF);
        let wd = w.d.as_ptr().add(t * blocks * TILE + h * HALF);
        for b in 0..blocks {
            let mut wv = [_mm256_setzero_si256(); 8];
            for (g, v) in wv.iter_mut().enumerate() {
                *v = _mm256_loadu_si256(wq.add((b * 8 + g) * GROUP).cast());
            }
            let dw = _mm256_loadu_ps(wd.add(b * TILE));
            for (i, a) in acc.iter_mut().enumerate() {
                let at = (r0 + i) * blocks + b;
                let xq = x.qs.as_ptr().add(at * QK);
                let mut isum = _mm256_setzero_si256();
                for (g, v) in wv.iter().enumerate() {
                    let xb = _mm256_set1_epi32(xq.add(4 * g).cast::<i32>().read_unaligned());
                    // |x| as unsigned bytes, and each weight given x's
                    // sign: their byte products are x * w, summed in pairs
                    // (at most 2 * 127 * 127, no saturation), then in
                    // fours, as exact `i32` lanes.
                    let ax = _mm256_sign_epi8(xb, xb);
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(*v, xb)), ones);
                    isum = _mm256_add_epi32(isum, p);
                }
                let scale = _mm256_mul_ps(_mm256_set1_ps(*x.d.as_ptr().add(at)), dw);
                *a = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale), *a);
            }
        }
        let mut out = [[0f32; HALF]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm256_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }
}
