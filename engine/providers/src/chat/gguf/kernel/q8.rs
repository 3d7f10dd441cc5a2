//! The `Q8_0` formats the kernels read: weights tiled for the product
//! ([`Q8Matrix`]), activations row by row ([`Q8Rows`]), and the one
//! definition of quantizing a block ([`quantize_block`]).

use super::round_even;

/// Weights per quantization block.
pub const QK: usize = 32;

/// Rows of a [`Q8Matrix`] in one tile: sixteen, one 512-bit vector's
/// lanes of `i32` (a 256-bit vector takes half a tile).
pub const TILE: usize = 16;

/// A matrix in `Q8_0`: `rows` rows of `cols` signed bytes, one scale per
/// block of [`QK`], laid out in tiles of [`TILE`] rows (the last padded
/// with zero rows) so that a product reads one tile's block as eight
/// contiguous loads:
///
/// - tile `t`'s block `b` is 512 bytes at `(t * blocks + b) * 512`: eight
///   groups of four columns (`4g..4g + 4` of the block), each holding the
///   tile's sixteen rows' four values in row order (64 bytes; its first
///   32 are the first eight rows');
/// - its sixteen rows' scales are `d[(t * blocks + b) * 16..][..16]`.
#[derive(Debug, Clone, Default)]
pub struct Q8Matrix {
    /// Rows (outputs of a product).
    pub rows: usize,
    /// Columns (`K`), a multiple of [`QK`].
    pub cols: usize,
    /// The quantized values, tiled (see the type).
    pub qs: Vec<i8>,
    /// The scales, tiled.
    pub d: Vec<f32>,
}

impl Q8Matrix {
    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / QK
    }

    /// Tiles of [`TILE`] rows.
    pub fn tiles(&self) -> usize {
        self.rows.div_ceil(TILE)
    }

    /// An all-zero matrix of this shape.
    fn zeros(rows: usize, cols: usize) -> Q8Matrix {
        assert!(cols.is_multiple_of(QK), "Q8_0 needs whole blocks; this is a bug");
        let padded = rows.div_ceil(TILE) * TILE;
        Q8Matrix { rows, cols, qs: vec![0; padded * cols], d: vec![0.0; padded * cols / QK] }
    }

    /// Where row `r`'s block `b` starts: its tile's block, and the row in
    /// the tile.
    fn at(&self, r: usize, b: usize) -> (usize, usize) {
        ((r / TILE) * self.blocks() + b, r % TILE)
    }

    /// Row `r`'s block `b`: its values and its scale.
    #[inline(always)]
    pub fn block(&self, r: usize, b: usize) -> ([i8; QK], f32) {
        let (tb, j) = self.at(r, b);
        let base = tb * TILE * QK + 4 * j;
        let mut q = [0i8; QK];
        for (g, four) in q.chunks_exact_mut(4).enumerate() {
            let from = base + g * 4 * TILE;
            four.copy_from_slice(&self.qs[from..from + 4]);
        }
        (q, self.d[tb * TILE + j])
    }

    fn set_block(&mut self, r: usize, b: usize, q: &[i8; QK], d: f32) {
        let (tb, j) = self.at(r, b);
        let base = tb * TILE * QK + 4 * j;
        for (g, four) in q.chunks_exact(4).enumerate() {
            let to = base + g * 4 * TILE;
            self.qs[to..to + 4].copy_from_slice(four);
        }
        self.d[tb * TILE + j] = d;
    }

    /// Quantizes `rows` rows of `cols` values (row-major), block by block
    /// as [`quantize_block`] defines.
    pub fn quantize(values: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        assert!(cols.is_multiple_of(QK) && values.len() == rows * cols, "Q8_0 needs whole blocks; this is a bug");
        let mut m = Q8Matrix::zeros(rows, cols);
        let mut q = [0i8; QK];
        for r in 0..rows {
            for b in 0..m.blocks() {
                let at = r * cols + b * QK;
                let src: &[f32; QK] = values[at..at + QK].try_into().expect("a whole block");
                let d = quantize_block(src, &mut q);
                m.set_block(r, b, &q, d);
            }
        }
        m
    }

    /// Builds a matrix from blocks already in `Q8_0` (a file's own): row
    /// `r`'s block `b` is `scales[r * blocks + b]` and its 32 values, at
    /// `qs[(r * blocks + b) * 32..]`.
    pub fn from_blocks(qs: &[i8], scales: &[f32], rows: usize, cols: usize) -> Q8Matrix {
        let mut m = Q8Matrix::zeros(rows, cols);
        let blocks = m.blocks();
        for r in 0..rows {
            for b in 0..blocks {
                let at = (r * blocks + b) * QK;
                let q: &[i8; QK] = qs[at..at + QK].try_into().expect("a whole block");
                m.set_block(r, b, q, scales[r * blocks + b]);
            }
        }
        m
    }

    /// Stacks matrices of the same width into one (their rows in order):
    /// fused products (Q, K and V; gate and up) then take one pass.
    pub fn stack(parts: &[Q8Matrix]) -> Q8Matrix {
        let cols = parts[0].cols;
        let mut out = Q8Matrix::zeros(parts.iter().map(|p| p.rows).sum(), cols);
        let mut r0 = 0;
        for p in parts {
            assert_eq!(p.cols, cols, "stacked matrices share their width; this is a bug");
            for r in 0..p.rows {
                for b in 0..p.blocks() {
                    let (q, d) = p.block(r, b);
                    out.set_block(r0 + r, b, &q, d);
                }
            }
            r0 += p.rows;
        }
        out
    }

    /// Row `r` as `f32` (an embedding lookup): `d * q` for each value.
    pub fn row(&self, r: usize, out: &mut [f32]) {
        for b in 0..self.blocks() {
            let (q, d) = self.block(r, b);
            for i in 0..QK {
                out[b * QK + i] = d * f32::from(q[i]);
            }
        }
    }

    /// Bytes the matrix takes in memory.
    pub fn bytes(&self) -> usize {
        self.qs.len() + 4 * self.d.len()
    }
}

/// Activations in `Q8_0`: `rows` rows of `cols` values, row-major, and
/// their scales row-major (`d[r * blocks + b]`).
#[derive(Debug, Clone, Default)]
pub struct Q8Rows {
    /// Rows (tokens).
    pub rows: usize,
    /// Columns, a multiple of [`QK`].
    pub cols: usize,
    /// Quantized values.
    pub qs: Vec<i8>,
    /// Scales.
    pub d: Vec<f32>,
    /// Each block's sum of its quantized values (`sums[r * blocks + b]`),
    /// for the VNNI product's offset.
    pub sums: Vec<i32>,
}

/// Quantizes one block: `d = amax / 127`, each value `round(x / d)` with
/// ties to even (computed as `x * (1 / d)`), `d = 0` for a block of zeros.
/// Returns `d`.
#[inline(always)]
pub fn quantize_block(x: &[f32; QK], q: &mut [i8; QK]) -> f32 {
    let mut amax = 0f32;
    for v in x {
        amax = amax.max(v.abs());
    }
    let d = amax / 127.0;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, v) in q.iter_mut().zip(x) {
        *q = round_even(*v * id).clamp(-127.0, 127.0) as i8;
    }
    d
}

#[cfg(test)]
// Exact bits are what these tests check.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;
    use crate::chat::gguf::kernel::tests::seeded;

    #[test]
    fn a_quantized_block_keeps_each_value_within_half_a_step() {
        let x: [f32; QK] = seeded(QK, 1).try_into().unwrap();
        let mut q = [0i8; QK];
        let d = quantize_block(&x, &mut q);
        for (v, q) in x.iter().zip(q) {
            assert!((v - d * f32::from(q)).abs() <= d / 2.0 + 1e-6);
        }
        let mut z = [1i8; QK];
        assert_eq!(quantize_block(&[0.0; QK], &mut z), 0.0);
        assert_eq!(z, [0; QK]);
    }

    /// The tiled layout keeps every row's blocks: a file's blocks come
    /// back as they went in, through a stack and with rows past the last
    /// whole tile.
    #[test]
    fn a_matrix_keeps_its_blocks_in_tiles() {
        let (rows, cols) = (11, 64);
        let qs: Vec<i8> = (0..rows * cols).map(|i| ((i * 37) % 255) as i8).map(|q| q.max(-127)).collect();
        let scales: Vec<f32> = (0..rows * cols / QK).map(|i| i as f32 + 0.5).collect();
        let m = Q8Matrix::from_blocks(&qs, &scales, rows, cols);
        let both = Q8Matrix::stack(&[m.clone(), m.clone()]);
        assert_eq!((both.rows, both.tiles()), (22, 2));
        for r in 0..rows {
            for b in 0..2 {
                let at = (r * 2 + b) * QK;
                let want = (qs[at..at + QK].try_into().unwrap(), scales[r * 2 + b]);
                assert_eq!(m.block(r, b), want, "row {r} block {b}");
                assert_eq!(both.block(rows + r, b), want, "stacked row {r} block {b}");
            }
            let mut row = vec![0f32; cols];
            m.row(r, &mut row);
            assert_eq!(row[QK + 3], scales[r * 2 + 1] * f32::from(qs[r * cols + QK + 3]));
        }
    }
}
