//! The row-wise operations of a bidirectional encoder (MiniLM's BERT):
//! layer norm, GELU and one text's self-attention, each defined once in
//! `body` and compiled per [`Level`].

use super::Level;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    //! Off x86-64 the AVX2 level is never available
    //! ([`super::Level::available`]); these stand-ins keep the dispatch
    //! total.
    use super::body;

    pub fn layer_norm(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        body::layer_norm(x, g, b, eps, out)
    }
    pub fn gelu_all(x: &mut [f32]) {
        body::gelu_all(x)
    }
    pub fn attend(qkv: &[f32], width: usize, heads: usize, scale: f32, out: &mut [f32]) {
        body::attend(qkv, width, heads, scale, out)
    }
}

/// Rows per task where a row-wise operation is split over rayon's pool;
/// fewer than twice as many run on the calling thread. Each row is
/// computed whole by one task, so the split changes no bit.
const PAR_ROWS: usize = 32;

/// The bodies, compiled once per level (`#[inline(always)]` puts the same
/// source in each).
pub(super) mod body {
    use crate::kernel::{dot, gelu, softmax, sum};

    /// Layer norm of each row of `x` (width `g.len()`) into `out`: `d = x -
    /// mean(x)`, then `(d * (1 / sqrt(mean(d^2) + eps))) * g + b`; both
    /// means by eight lanes and [`crate::kernel::lanes_sum`].
    #[inline(always)]
    pub fn layer_norm(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        let n = g.len();
        for (row, o) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
            let mean = sum(row) / n as f32;
            for (o, v) in o.iter_mut().zip(row) {
                *o = *v - mean;
            }
            let var = dot(o, o) / n as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((o, g), b) in o.iter_mut().zip(g).zip(b) {
                *o = (*o * inv) * *g + *b;
            }
        }
    }

    /// [`gelu`] of every value, in place.
    #[inline(always)]
    pub fn gelu_all(x: &mut [f32]) {
        for v in x {
            *v = gelu(*v);
        }
    }

    /// Self-attention of one text of `n = qkv.len() / (3 * width)` rows,
    /// each row `[q | k | v]` of `width = heads * head_dim` each, into
    /// `out` (`n` rows of `width`). For each head and query row: the scores
    /// `dot(q, k_t) * scale` ([`dot`]'s order: lane `j` of eight adds the
    /// dimensions `d ≡ j (mod 8)` in order, then the lanes' tree), their
    /// [`softmax`], then `Σ_t p_t v_t` in order of `t`.
    #[inline(always)]
    pub fn attend(qkv: &[f32], width: usize, heads: usize, scale: f32, out: &mut [f32]) {
        let n = qkv.len() / (3 * width);
        let hd = width / heads;
        let row = |t: usize| &qkv[t * 3 * width..(t + 1) * 3 * width];
        let mut scores = vec![0f32; n];
        for h in 0..heads {
            let at = h * hd;
            for t in 0..n {
                let q = &row(t)[at..at + hd];
                for (s, slot) in scores.iter_mut().enumerate() {
                    *slot = dot(q, &row(s)[width + at..width + at + hd]) * scale;
                }
                let max = scores.iter().fold(f32::NEG_INFINITY, |m, s| m.max(*s));
                let inv = softmax(&mut scores, max);
                let o = &mut out[t * width + at..t * width + at + hd];
                o.fill(0.0);
                for (s, p) in scores.iter().enumerate() {
                    let p = *p * inv;
                    for (o, v) in o.iter_mut().zip(&row(s)[2 * width + at..2 * width + at + hd]) {
                        *o += p * *v;
                    }
                }
            }
        }
    }
}

macro_rules! leveled {
    ($level:expr, $name:ident ( $($arg:expr),* )) => {
        match $level {
            Level::Portable => body::$name($($arg),*),
            Level::Avx2 => x86::$name($($arg),*),
        }
    };
}

/// Layer norm of each row of `x` (width `g.len()`) into `out` (see
/// `body::layer_norm`), rows split over rayon's pool in passes of many.
pub fn layer_norm(level: Level, x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let n = g.len();
    if x.len() < 2 * PAR_ROWS * n {
        return leveled!(level, layer_norm(x, g, b, eps, out));
    }
    out.par_chunks_mut(PAR_ROWS * n)
        .zip(x.par_chunks(PAR_ROWS * n))
        .for_each(|(o, x)| leveled!(level, layer_norm(x, g, b, eps, o)));
}

/// GELU of every value of `x`, in place, in passes of `width`-wide rows
/// split over rayon's pool.
pub fn gelu(level: Level, x: &mut [f32], width: usize) {
    if x.len() < 2 * PAR_ROWS * width {
        return leveled!(level, gelu_all(x));
    }
    x.par_chunks_mut(PAR_ROWS * width).for_each(|x| leveled!(level, gelu_all(x)));
}

/// Self-attention of several texts packed one after another (`lens`:
/// each text's rows) into `out`, each text attending to its own rows only
/// (see `body::attend`), texts split over rayon's pool.
pub fn attend(level: Level, qkv: &[f32], lens: &[usize], width: usize, heads: usize, scale: f32, out: &mut [f32]) {
    let mut parts = Vec::with_capacity(lens.len());
    let (mut qkv, mut rest) = (qkv, &mut *out);
    for &n in lens {
        let (q, q_rest) = qkv.split_at(n * 3 * width);
        let (o, o_rest) = rest.split_at_mut(n * width);
        parts.push((q, o));
        (qkv, rest) = (q_rest, o_rest);
    }
    let one = |(q, o): (&[f32], &mut [f32])| leveled!(level, attend(q, width, heads, scale, o));
    if parts.len() < 2 {
        parts.into_iter().for_each(one);
    } else {
        parts.into_par_iter().for_each(one);
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut s =
            engine::rng::Stream::from_key(engine::digest::DigestWriter::new("encoder test").u64(seed).finish().0);
        (0..n).map(|_| (s.unit() as f32 - 0.5) * 4.0).collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every level this CPU runs gives the portable body's bits, on the
    /// calling thread and split over the pool; a text's attention does not
    /// depend on the texts packed with it.
    #[test]
    fn every_level_gives_the_portable_bits() {
        let width = 48;
        for rows in [3, 2 * PAR_ROWS + 5] {
            let x = seeded(rows * width, rows as u64);
            let (g, b) = (seeded(width, 1), seeded(width, 2));
            let mut want = vec![0f32; x.len()];
            body::layer_norm(&x, &g, &b, 1e-12, &mut want);
            let mut gelu_want = x.clone();
            body::gelu_all(&mut gelu_want);
            for level in [Level::Portable, Level::Avx2].into_iter().filter(|l| l.available()) {
                let mut got = vec![0f32; x.len()];
                layer_norm(level, &x, &g, &b, 1e-12, &mut got);
                assert_eq!(bits(&got), bits(&want), "{level:?} layer norm, {rows} rows");
                let mut got = x.clone();
                gelu(level, &mut got, width);
                assert_eq!(bits(&got), bits(&gelu_want), "{level:?} gelu, {rows} rows");
            }
        }
        // Heads of 12 (a remainder of four dimensions) and 8; texts shorter
        // than a block of positions, and longer.
        let lens = [5, 1, 17, 9, 33];
        let total: usize = lens.iter().sum();
        let qkv = seeded(total * 3 * width, 9);
        for heads in [4, 6] {
            let mut alone = Vec::new();
            let mut start = 0;
            for n in lens {
                let mut o = vec![0f32; n * width];
                body::attend(&qkv[start * 3 * width..(start + n) * 3 * width], width, heads, 0.3, &mut o);
                alone.extend(o);
                start += n;
            }
            for level in [Level::Portable, Level::Avx2].into_iter().filter(|l| l.available()) {
                let mut got = vec![0f32; total * width];
                attend(level, &qkv, &lens, width, heads, 0.3, &mut got);
                assert_eq!(bits(&got), bits(&alone), "{level:?} attention, {heads} heads");
            }
        }
    }

    /// Attention against an `f64` reference: softmax-weighted sums within
    /// 1e-5.
    #[test]
    fn attention_is_close_to_the_exact_one() {
        let (width, heads, n) = (32, 2, 6);
        let qkv = seeded(n * 3 * width, 4);
        let mut out = vec![0f32; n * width];
        attend(Level::detect(), &qkv, &[n], width, heads, 0.25, &mut out);
        let hd = width / heads;
        for h in 0..heads {
            for t in 0..n {
                let q = &qkv[t * 3 * width + h * hd..][..hd];
                let s: Vec<f64> = (0..n)
                    .map(|u| {
                        let k = &qkv[u * 3 * width + width + h * hd..][..hd];
                        q.iter().zip(k).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum::<f64>() * 0.25
                    })
                    .collect();
                let max = s.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v));
                let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
                let total: f64 = e.iter().sum();
                for d in 0..hd {
                    let want: f64 =
                        (0..n).map(|u| e[u] / total * f64::from(qkv[u * 3 * width + 2 * width + h * hd + d])).sum();
                    let got = f64::from(out[t * width + h * hd + d]);
                    assert!((got - want).abs() < 1e-5, "head {h}, row {t}, dim {d}: {got} vs {want}");
                }
            }
        }
    }
}
