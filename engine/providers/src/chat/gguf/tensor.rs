//! A GGUF file's tensors, read into the forms the forward pass computes
//! with: `f32` vectors (norms) and [`Q8Matrix`] matrices.
//!
//! The formats the file's own bytes are decoded from here are `F32`, `F16`,
//! `BF16`, `Q8_0`, `Q4_0` and `Q4_1` (each value `d * q`, `d * (q - 8)` or
//! `d * q + m`, with `d` and `m` converted exactly from half precision).
//! Any other format is dequantized by candle's reference code (scalar, the
//! same on every CPU). A matrix that is not `Q8_0` in the file is then
//! quantized to `Q8_0` ([`Q8Matrix::quantize`]): `Q8_0` keeps each 16-level
//! `Q4_1` block to within 1/254 of its largest weight, and has the fast
//! integer product. A file's own `Q8_0` values are kept, -128 clamped to
//! -127 (which no quantizer writes) so that every kernel level computes the
//! same products.

use super::kernel::{Q8Matrix, QK};
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use std::io::{Read, Seek, SeekFrom};

/// A tensor's name, shape (rows, then columns: GGUF's dimensions
/// reversed) and format.
#[derive(Debug, Clone)]
pub struct Info {
    /// Rows (1 for a vector).
    pub rows: usize,
    /// Values per row.
    pub cols: usize,
    /// The file's format.
    pub dtype: GgmlDType,
    offset: u64,
}

/// The tensors of one open file.
pub(crate) struct Tensors<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
}

/// `h` (IEEE half precision bits) as `f32`, exactly.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let man = f32::from(h & 0x3ff);
    match exp {
        0 => sign * man * (1.0 / 16_777_216.0),
        31 if man == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => {
            f32::from_bits((u32::from(h & 0x8000) << 16) | ((u32::from(e) + 112) << 23) | (u32::from(h & 0x3ff) << 13))
        }
    }
}

fn half(bytes: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

impl<'a, R: Read + Seek> Tensors<'a, R> {
    /// The tensors of `content`, read from `reader`.
    pub(crate) fn new(content: &'a Content, reader: &'a mut R) -> Self {
        Tensors { content, reader }
    }

    /// Whether the file holds `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// `name`'s shape and format.
    pub(crate) fn info(&self, name: &str) -> Result<Info, String> {
        let t = self.content.tensor_infos.get(name).ok_or_else(|| format!("it has no tensor {name}"))?;
        let dims = t.shape.dims();
        let (rows, cols) = match dims {
            [c] => (1, *c),
            [r, c] => (*r, *c),
            other => return Err(format!("its tensor {name} has {} dimensions, not 1 or 2", other.len())),
        };
        Ok(Info { rows, cols, dtype: t.ggml_dtype, offset: t.offset })
    }

    fn bytes(&mut self, info: &Info) -> Result<Vec<u8>, String> {
        let n = info.rows * info.cols;
        let block = info.dtype.block_size();
        if !n.is_multiple_of(block) {
            return Err(format!("a {:?} tensor of {n} values is not whole blocks", info.dtype));
        }
        let len = n / block * info.dtype.type_size();
        let mut buf = vec![0u8; len];
        self.reader
            .seek(SeekFrom::Start(self.content.tensor_data_offset + info.offset))
            .and_then(|_| self.reader.read_exact(&mut buf))
            .map_err(|e| format!("its tensors cannot be read ({e})"))?;
        Ok(buf)
    }

    /// `name`'s values as `f32`, row-major.
    pub(crate) fn values(&mut self, name: &str) -> Result<Vec<f32>, String> {
        let info = self.info(name)?;
        let bytes = self.bytes(&info)?;
        let n = info.rows * info.cols;
        let mut out = Vec::with_capacity(n);
        match info.dtype {
            GgmlDType::F32 => {
                out.extend(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
            }
            GgmlDType::F16 => out.extend((0..n).map(|i| half(&bytes, 2 * i))),
            GgmlDType::BF16 => {
                out.extend(
                    bytes.chunks_exact(2).map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)),
                );
            }
            GgmlDType::Q8_0 => {
                for b in bytes.chunks_exact(2 + QK) {
                    let d = half(b, 0);
                    out.extend(b[2..].iter().map(|q| d * f32::from(*q as i8)));
                }
            }
            GgmlDType::Q4_0 => {
                for b in bytes.chunks_exact(2 + QK / 2) {
                    let d = half(b, 0);
                    let nib = &b[2..];
                    out.extend(nib.iter().map(|q| d * f32::from((q & 0x0f) as i8 - 8)));
                    out.extend(nib.iter().map(|q| d * f32::from((q >> 4) as i8 - 8)));
                }
            }
            GgmlDType::Q4_1 => {
                for b in bytes.chunks_exact(4 + QK / 2) {
                    let (d, m) = (half(b, 0), half(b, 2));
                    let nib = &b[4..];
                    out.extend(nib.iter().map(|q| d * f32::from(q & 0x0f) + m));
                    out.extend(nib.iter().map(|q| d * f32::from(q >> 4) + m));
                }
            }
            GgmlDType::Q5_0
            | GgmlDType::Q5_1
            | GgmlDType::Q8_1
            | GgmlDType::Q2K
            | GgmlDType::Q3K
            | GgmlDType::Q4K
            | GgmlDType::Q5K
            | GgmlDType::Q6K
            | GgmlDType::Q8K => {
                let q = self
                    .content
                    .tensor(self.reader, name, &Device::Cpu)
                    .and_then(|t| t.dequantize(&Device::Cpu))
                    .and_then(|t| t.flatten_all())
                    .and_then(|t| t.to_vec1::<f32>())
                    .map_err(|e| format!("its tensor {name} cannot be read ({e})"))?;
                out = q;
            }
        }
        if out.len() != n {
            return Err(format!("its tensor {name} holds {} values, not {n}", out.len()));
        }
        Ok(out)
    }

    /// `name` as a vector of `len` values.
    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, String> {
        let v = self.values(name)?;
        if v.len() != len {
            return Err(format!("its tensor {name} has {} values, where the model needs {len}", v.len()));
        }
        Ok(v)
    }

    /// `name` as a `Q8_0` matrix of `rows` x `cols`: the file's own blocks
    /// when it is `Q8_0`, else its values quantized.
    pub(crate) fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Q8Matrix, String> {
        let info = self.info(name)?;
        if (info.rows, info.cols) != (rows, cols) {
            return Err(format!(
                "its tensor {name} is {} x {}, where the model needs {rows} x {cols}",
                info.rows, info.cols
            ));
        }
        if !cols.is_multiple_of(QK) {
            return Err(format!("its tensor {name} has rows of {cols} values, not whole blocks of {QK}"));
        }
        if info.dtype == GgmlDType::Q8_0 {
            let bytes = self.bytes(&info)?;
            let mut qs = Vec::with_capacity(rows * cols);
            let mut scales = Vec::with_capacity(rows * cols / QK);
            for b in bytes.chunks_exact(2 + QK) {
                scales.push(half(b, 0));
                qs.extend(b[2..].iter().map(|q| (*q as i8).max(-127)));
            }
            return Ok(Q8Matrix::from_blocks(&qs, &scales, rows, cols));
        }
        let values = self.values(name)?;
        Ok(Q8Matrix::quantize(&values, rows, cols))
    }
}

#[cfg(test)]
// Exact bits are what these tests check.
#[allow(clippy::float_cmp)]
mod tests {
    use super::f16_to_f32;

    #[test]
    fn half_precision_converts_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24), "the smallest subnormal");
        assert_eq!(f16_to_f32(0x0400), 2f32.powi(-14), "the smallest normal");
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
    }
}
