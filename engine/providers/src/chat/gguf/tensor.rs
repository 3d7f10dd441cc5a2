//! A GGUF file's tensors, read into the forms the forward pass computes
//! with: `f32` vectors (norms) and [`Q8Matrix`] matrices.
//!
//! `F32`, `F16` and `BF16` are converted exactly; `Q8_0`, `Q4_0`, `Q4_1`,
//! `Q5_0`, `Q5_1`, `Q4_K`, `Q5_K` and `Q6_K` are decoded by the project's
//! own code ([`super::quants`]); the rare rest (`Q2_K`, `Q3_K`) by candle's
//! reference code (scalar, the same on every CPU).
//!
//! Every matrix is then held in `Q8_0`, the format of the fast integer
//! product:
//!
//! - `Q8_0`, `Q4_0` and `Q5_0` blocks are already `Q8_0` blocks with small
//!   integers, and are kept exactly ([`super::quants::exact_q8`]); a
//!   file's `Q8_0` -128 is clamped to -127 (which no quantizer writes) so
//!   that every kernel level computes the same products.
//! - Any other format is decoded to `f32` and quantized to `Q8_0`
//!   ([`Q8Matrix::quantize`]), which keeps each value to within 1/254 of
//!   its block's largest (a `Q4_K` or `Q6_K` block's own step is 1/30 or
//!   1/62 of it). docs/BENCHMARKS.md has why this repack, not a product
//!   on the file's own blocks.

use super::kernel::{Q8Matrix, QK};
use super::quants::{self, f16_to_f32};
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

    /// The file's bytes of a tensor: its rows whole blocks of its format,
    /// and within the file (checked before anything is allocated).
    fn bytes(&mut self, info: &Info) -> Result<Vec<u8>, String> {
        let block = info.dtype.block_size();
        if !info.cols.is_multiple_of(block) {
            return Err(format!(
                "a {:?} tensor has rows of {} values, not whole blocks of {block}",
                info.dtype, info.cols
            ));
        }
        let len = info
            .rows
            .checked_mul(info.cols / block)
            .and_then(|blocks| blocks.checked_mul(info.dtype.type_size()))
            .ok_or_else(|| format!("its tensors cannot be read (a tensor of {} x {} values)", info.rows, info.cols))?;
        let start = self.content.tensor_data_offset.saturating_add(info.offset);
        let size = self.reader.seek(SeekFrom::End(0)).map_err(|e| format!("its tensors cannot be read ({e})"))?;
        if start.saturating_add(len as u64) > size {
            return Err(format!("its tensors cannot be read (one ends past the file's {size} bytes: cut short?)"));
        }
        let mut buf = vec![0u8; len];
        self.reader
            .seek(SeekFrom::Start(start))
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
            GgmlDType::Q8_0
            | GgmlDType::Q4_0
            | GgmlDType::Q4_1
            | GgmlDType::Q5_0
            | GgmlDType::Q5_1
            | GgmlDType::Q4K
            | GgmlDType::Q5K
            | GgmlDType::Q6K => {
                quants::decode(info.dtype, &bytes, &mut out).ok_or("a format decoded here; this is a bug")?;
            }
            GgmlDType::Q8_1 | GgmlDType::Q2K | GgmlDType::Q3K | GgmlDType::Q8K => {
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
        if matches!(info.dtype, GgmlDType::Q8_0 | GgmlDType::Q4_0 | GgmlDType::Q5_0) {
            let bytes = self.bytes(&info)?;
            let mut qs = Vec::with_capacity(rows * cols);
            let mut scales = Vec::with_capacity(rows * cols / QK);
            quants::exact_q8(info.dtype, &bytes, &mut qs, &mut scales).ok_or("a Q8_0-like format; this is a bug")?;
            return Ok(Q8Matrix::from_blocks(&qs, &scales, rows, cols));
        }
        let values = self.values(name)?;
        Ok(Q8Matrix::quantize(&values, rows, cols))
    }
}
