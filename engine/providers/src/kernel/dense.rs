//! A dense layer's product, `y = x · wᵀ + b`, on `f32` weights (an
//! encoder's, as MiniLM's checkpoint stores them), in an order that
//! depends on the shapes alone.
//!
//! **The definition.** Output `(m, n)` is `acc + b[n]`, where `acc` starts
//! at zero and adds `x[m][k] * w[n][k]` for `k = 0, 1, 2, ...` in order,
//! each product and each sum rounded once. Every output is summed in one
//! place, so a vector holds [`PANEL`] outputs side by side, one per lane,
//! and any vector width (the baseline's four lanes, AVX2's eight,
//! AVX-512F's sixteen) computes the same bits.
//!
//! **What does not change a bit** ([`Split`]): the rows of a tile, the
//! rows and panels of a task, the number of tasks and of threads. Each
//! output is computed whole, by one task, in the definition's order. The
//! weights are laid out once ([`Dense::new`]) in panels of [`PANEL`]
//! outputs, `[k][PANEL]`, so that a panel is read in order; a tile reads
//! its rows in order side by side.

use super::Level;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    //! Off x86-64 the AVX2 level is never available
    //! ([`super::Level::available`]); this stand-in keeps the dispatch
    //! total.
    use super::{body, Dense};

    pub fn dense_task(w: &Dense, x: &[f32], panels: std::ops::Range<usize>, tile_rows: usize, part: &mut [f32]) {
        body::task(w, x, panels, tile_rows, part)
    }
}

/// Outputs per panel of the laid-out weights: one 512-bit vector of
/// `f32`, two 256-bit ones.
pub const PANEL: usize = 16;

/// The most rows a tile holds ([`Split::tile_rows`]).
pub const MAX_TILE_ROWS: usize = 12;

/// A dense layer's weights (`n` outputs of `k` inputs) and bias, laid out
/// in panels of [`PANEL`] outputs, the last one padded with zeros.
#[derive(Clone)]
pub struct Dense {
    n: usize,
    k: usize,
    /// Panel `p`'s weight for output `p * PANEL + j` and input `i` at
    /// `(p * k + i) * PANEL + j`.
    panels: Vec<f32>,
    /// The bias, padded to whole panels.
    bias: Vec<f32>,
}

impl std::fmt::Debug for Dense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dense").field("outputs", &self.n).field("inputs", &self.k).finish_non_exhaustive()
    }
}

impl Dense {
    /// The layer of `weights` (`n` rows of `k`, a linear layer's `out x in`
    /// as PyTorch stores it) and `bias` (`n`). Panics on other lengths
    /// (the callers read both from one checkpoint's shapes).
    pub fn new(weights: &[f32], bias: &[f32], n: usize, k: usize) -> Dense {
        assert!(weights.len() == n * k && bias.len() == n, "a dense layer's shapes agree; this is a bug");
        let count = n.div_ceil(PANEL);
        let mut panels = vec![0f32; count * k * PANEL];
        for (o, row) in weights.chunks_exact(k.max(1)).enumerate() {
            let (p, j) = (o / PANEL, o % PANEL);
            for (i, w) in row.iter().enumerate() {
                panels[(p * k + i) * PANEL + j] = *w;
            }
        }
        let mut bias = bias.to_vec();
        bias.resize(count * PANEL, 0.0);
        Dense { n, k, panels, bias }
    }

    /// Outputs per row.
    pub fn outputs(&self) -> usize {
        self.n
    }

    /// Inputs per row.
    pub fn inputs(&self) -> usize {
        self.k
    }

    fn panel_count(&self) -> usize {
        self.n.div_ceil(PANEL)
    }

    /// `out = x · wᵀ + b` for the rows of `x` (each [`Dense::inputs`]
    /// wide), at `level`, split over rayon's pool as [`Split::for_shape`]
    /// chooses.
    pub fn product(&self, level: Level, x: &[f32], out: &mut Vec<f32>) {
        let rows = x.len() / self.k.max(1);
        let split = Split::for_shape(level, rows, self, rayon::current_num_threads());
        self.product_split(level, x, out, split);
    }

    /// [`Dense::product`] with the work split as `split` says; every split
    /// gives the same bits.
    pub fn product_split(&self, level: Level, x: &[f32], out: &mut Vec<f32>, split: Split) {
        let (n, k) = (self.n, self.k);
        assert!(k > 0 && x.len().is_multiple_of(k), "a product's inner sizes agree; this is a bug");
        let m = x.len() / k;
        out.clear();
        out.resize(m * n, 0.0);
        if m == 0 || n == 0 {
            return;
        }
        let split = split.clamped();
        let panels = self.panel_count();
        let row_tasks = m.div_ceil(split.rows_per_task);
        let groups = panels.div_ceil(split.panels_per_task);
        let task = |t: usize| {
            let (r, g) = (t / groups, t % groups);
            let rows = r * split.rows_per_task..((r + 1) * split.rows_per_task).min(m);
            let ps = g * split.panels_per_task..((g + 1) * split.panels_per_task).min(panels);
            let mut part = vec![0f32; rows.len() * ps.len() * PANEL];
            let x = &x[rows.start * k..rows.end * k];
            match level {
                Level::Portable => body::task(self, x, ps.clone(), split.tile_rows, &mut part),
                Level::Avx2 => x86::dense_task(self, x, ps.clone(), split.tile_rows, &mut part),
            }
            (rows, ps, part)
        };
        let parts: Vec<_> = if row_tasks * groups == 1 {
            vec![task(0)]
        } else {
            (0..row_tasks * groups).into_par_iter().map(task).collect()
        };
        for (rows, ps, part) in parts {
            let width = ps.len() * PANEL;
            let (c0, c1) = (ps.start * PANEL, (ps.end * PANEL).min(n));
            for (r, row) in rows.zip(part.chunks_exact(width)) {
                out[r * n + c0..r * n + c1].copy_from_slice(&row[..c1 - c0]);
            }
        }
    }
}

/// How a product's work is split. None of it changes a bit of the result;
/// it changes only speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Rows a tile holds, whose sums are kept in registers together (1 to
    /// [`MAX_TILE_ROWS`]).
    pub tile_rows: usize,
    /// Rows per task.
    pub rows_per_task: usize,
    /// Panels of [`PANEL`] outputs per task.
    pub panels_per_task: usize,
}

impl Split {
    /// The split for `rows` rows of `w` at `level` on a pool of `threads`:
    /// tiles as many rows as the level's registers hold, tasks of about 48
    /// rows, and where that makes fewer than four tasks a thread, the
    /// outputs split too.
    pub fn for_shape(level: Level, rows: usize, w: &Dense, threads: usize) -> Split {
        let tile_rows = match level {
            Level::Portable => 2,
            Level::Avx2 if super::avx512() => 12,
            Level::Avx2 => 6,
        };
        let rows_per_task = tile_rows * (48 / tile_rows);
        let row_tasks = rows.div_ceil(rows_per_task).max(1);
        let panels = w.panel_count().max(1);
        let want = 4 * threads.max(1);
        let groups = if row_tasks >= want { 1 } else { want.div_ceil(row_tasks).min(panels) };
        Split { tile_rows, rows_per_task, panels_per_task: panels.div_ceil(groups) }
    }

    fn clamped(self) -> Split {
        Split {
            tile_rows: self.tile_rows.clamp(1, MAX_TILE_ROWS),
            rows_per_task: self.rows_per_task.max(1),
            panels_per_task: self.panels_per_task.max(1),
        }
    }
}

/// The product's body, compiled once per level (`#[inline(always)]` puts
/// the same source in each).
pub(super) mod body {
    use super::{Dense, MAX_TILE_ROWS, PANEL};

    /// One tile's product against one panel: `(rows, tile, panel, bias,
    /// out, stride)`, as [`tile`] defines it.
    pub trait TileFn: FnMut(usize, &[f32], &[f32], &[f32; PANEL], &mut [f32], usize) {}
    impl<F: FnMut(usize, &[f32], &[f32], &[f32; PANEL], &mut [f32], usize)> TileFn for F {}

    /// The outputs of panels `panels` for the rows of `x` into `part`
    /// (row by row, `panels.len() * PANEL` wide), `tile_rows` rows at a
    /// time, each tile's product by [`tile`].
    #[inline(always)]
    pub fn task(w: &Dense, x: &[f32], panels: std::ops::Range<usize>, tile_rows: usize, part: &mut [f32]) {
        task_with(w, x, panels, tile_rows, part, tile);
    }

    /// [`task`] with each tile's product by `each` (the same operations as
    /// [`tile`], in another compiled form).
    #[inline(always)]
    pub fn task_with(
        w: &Dense,
        x: &[f32],
        panels: std::ops::Range<usize>,
        tile_rows: usize,
        part: &mut [f32],
        mut each: impl TileFn,
    ) {
        let k = w.k;
        let rows = x.len() / k;
        let width = panels.len() * PANEL;
        for (pi, p) in panels.enumerate() {
            let panel = &w.panels[p * k * PANEL..(p + 1) * k * PANEL];
            let bias: &[f32; PANEL] = w.bias[p * PANEL..(p + 1) * PANEL].try_into().expect("a whole panel");
            for t0 in (0..rows).step_by(tile_rows) {
                let r = tile_rows.min(rows - t0);
                each(r, &x[t0 * k..(t0 + r) * k], panel, bias, &mut part[t0 * width + pi * PANEL..], width);
            }
        }
    }

    /// The product of a tile of `rows` rows (row by row, `k` wide) and a
    /// panel (`[k][PANEL]`) into `out` (`rows` rows, `stride` apart): each of the
    /// `rows * PANEL` outputs adds its terms in order of `k` from zero,
    /// then its bias.
    #[inline(always)]
    pub fn tile(rows: usize, tile: &[f32], panel: &[f32], bias: &[f32; PANEL], out: &mut [f32], stride: usize) {
        macro_rules! rows {
            ($($n:literal)*) => {
                match rows {
                    $($n => tile_of::<$n>(tile, panel, bias, out, stride),)*
                    _ => unreachable!("a tile holds 1 to {MAX_TILE_ROWS} rows"),
                }
            };
        }
        rows!(1 2 3 4 5 6 7 8 9 10 11 12);
    }

    /// [`tile`] for `R` rows.
    #[inline(always)]
    fn tile_of<const R: usize>(tile: &[f32], panel: &[f32], bias: &[f32; PANEL], out: &mut [f32], stride: usize) {
        let k = panel.len() / PANEL;
        let xs: [&[f32]; R] = std::array::from_fn(|r| &tile[r * k..(r + 1) * k]);
        let mut acc = [[0f32; PANEL]; R];
        let (ws, _) = panel.as_chunks::<PANEL>();
        for (i, wv) in ws.iter().enumerate() {
            for (a, x) in acc.iter_mut().zip(&xs) {
                let x = x[i];
                for (a, w) in a.iter_mut().zip(wv) {
                    *a += x * *w;
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            let o: &mut [f32; PANEL] = (&mut out[r * stride..r * stride + PANEL]).try_into().expect("a panel's row");
            for ((o, a), b) in o.iter_mut().zip(a).zip(bias) {
                *o = *a + *b;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut s = engine::rng::Stream::from_key(engine::digest::DigestWriter::new("dense test").u64(seed).finish().0);
        (0..n).map(|_| (s.unit() as f32 - 0.5) * 4.0).collect()
    }

    /// The definition, written out: each output's serial sum, then its bias.
    fn defined(w: &[f32], b: &[f32], x: &[f32], n: usize, k: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for row in x.chunks_exact(k) {
            for o in 0..n {
                let mut acc = 0f32;
                for i in 0..k {
                    acc += row[i] * w[o * k + i];
                }
                out.push((acc + b[o]).to_bits());
            }
        }
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every level this CPU runs, every tile height, task size and panel
    /// group, and pools of 1 to 3 threads give the definition's bits, for
    /// output counts that fill panels or leave a ragged one and row counts
    /// around the tiles.
    #[test]
    fn every_level_and_split_gives_the_defined_bits() {
        let k = 40;
        for n in [16, 37] {
            let (w, b) = (seeded(n * k, n as u64), seeded(n, 100 + n as u64));
            let dense = Dense::new(&w, &b, n, k);
            for m in [1, 2, 7, 13, 30] {
                let x = seeded(m * k, 200 + m as u64);
                let want = defined(&w, &b, &x, n, k);
                for level in [Level::Portable, Level::Avx2] {
                    if !level.available() {
                        continue;
                    }
                    for tile_rows in 1..=MAX_TILE_ROWS {
                        for (rows_per_task, panels_per_task) in [(1, 1), (5, 2), (48, 1), (1000, 1000)] {
                            let split = Split { tile_rows, rows_per_task, panels_per_task };
                            let mut out = Vec::new();
                            dense.product_split(level, &x, &mut out, split);
                            assert_eq!(bits(&out), want, "{level:?}, {n} outputs, {m} rows, {split:?}");
                        }
                    }
                    #[cfg(target_arch = "x86_64")]
                    if level == Level::Avx2 {
                        // Both x86 forms, whichever the level picks here.
                        let forms = if crate::kernel::avx512() {
                            vec![false, true]
                        } else {
                            eprintln!("this CPU has no AVX-512F: the 512-bit tile is not tested here");
                            vec![false]
                        };
                        for wide in forms {
                            let mut part = vec![0f32; m * dense.panel_count() * PANEL];
                            let panels = 0..dense.panel_count();
                            x86::dense_task_with(&dense, &x, panels, 5, &mut part, wide);
                            let got: Vec<u32> =
                                part.chunks_exact(dense.panel_count() * PANEL).flat_map(|r| bits(&r[..n])).collect();
                            assert_eq!(got, want, "AVX-512F {wide}, {n} outputs, {m} rows");
                        }
                    }
                    for threads in 1..=3 {
                        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
                        let mut out = Vec::new();
                        pool.install(|| dense.product(level, &x, &mut out));
                        assert_eq!(bits(&out), want, "{level:?}, {n} outputs, {m} rows, {threads} threads");
                    }
                }
            }
        }
    }
}
