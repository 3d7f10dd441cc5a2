//! GGML's block formats, decoded by the project's own code, value for
//! value as GGML's reference dequantizers (`ggml-quants.c`) define them.
//!
//! - `Q4_0`, `Q5_0`: blocks of 32 signed integers (`q - 8`, `q - 16`) and
//!   one half-precision scale. These are `Q8_0` blocks with small integers,
//!   so [`exact_q8`] hands them to the `Q8_0` kernels as they are, with no
//!   rounding at all.
//! - `Q4_1`, `Q5_1`: 32 unsigned integers, a scale and a minimum:
//!   `d * q + m`.
//! - The K-quants, in super-blocks of 256 values:
//!   - `Q4_K` and `Q5_K`: eight groups of 32, each with a 6-bit scale and
//!     a 6-bit minimum packed into 12 bytes ([`scale_min`]), on a
//!     half-precision super-scale and super-minimum: `d * sc * q - dmin *
//!     m`;
//!   - `Q6_K`: sixteen groups of 16 with signed 8-bit scales: `d * sc *
//!     (q - 32)`.
//!
//! Each value is computed in `f32` in GGML's order (`(d * sc) * q -
//! (dmin * m)`), with the half-precision numbers converted exactly, so the
//! bits are GGML's on every CPU.

use candle_core::quantized::GgmlDType;

/// Values per block of the 32-value formats.
const QK: usize = 32;
/// Values per K-quant super-block.
pub const QK_K: usize = 256;

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

fn half(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Bytes of one block of `dtype`, for the formats decoded here.
pub fn block_bytes(dtype: GgmlDType) -> Option<(usize, usize)> {
    use GgmlDType as T;
    match dtype {
        T::Q4_0 => Some((QK, 2 + QK / 2)),
        T::Q4_1 => Some((QK, 4 + QK / 2)),
        T::Q5_0 => Some((QK, 2 + 4 + QK / 2)),
        T::Q5_1 => Some((QK, 4 + 4 + QK / 2)),
        T::Q8_0 => Some((QK, 2 + QK)),
        T::Q4K => Some((QK_K, 4 + 12 + QK_K / 2)),
        T::Q5K => Some((QK_K, 4 + 12 + QK_K / 8 + QK_K / 2)),
        T::Q6K => Some((QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2)),
        T::F32 | T::F16 | T::BF16 | T::Q8_1 | T::Q2K | T::Q3K | T::Q8K => None,
    }
}

/// The 5-bit values of a `Q5_0`/`Q5_1` block: the low nibbles from `qs`,
/// the fifth bits from `qh` (value `j`'s at bit `j`, value `j + 16`'s at
/// bit `j + 16`), in the block's order.
fn five_bits(qh: &[u8], qs: &[u8]) -> [u8; QK] {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut out = [0u8; QK];
    for j in 0..QK / 2 {
        let hi0 = (((h >> j) << 4) & 0x10) as u8;
        let hi1 = ((h >> (j + 12)) & 0x10) as u8;
        out[j] = (qs[j] & 0x0f) | hi0;
        out[j + QK / 2] = (qs[j] >> 4) | hi1;
    }
    out
}

/// Group `j`'s (of eight) 6-bit scale and minimum in a `Q4_K`/`Q5_K`
/// super-block's 12 scale bytes: groups 0–3 hold theirs in the low six
/// bits of bytes `j` and `j + 4`; groups 4–7 take four bits from byte
/// `j + 4` and their top two from the spare bits of bytes `j - 4` and `j`.
pub fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Decodes `bytes`, whole blocks of `dtype`, into `out` (appended). `None`
/// for a format not decoded here.
pub fn decode(dtype: GgmlDType, bytes: &[u8], out: &mut Vec<f32>) -> Option<()> {
    use GgmlDType as T;
    let (_, size) = block_bytes(dtype)?;
    for b in bytes.chunks_exact(size) {
        match dtype {
            T::Q8_0 => {
                let d = half(b, 0);
                out.extend(b[2..].iter().map(|q| d * f32::from(*q as i8)));
            }
            T::Q4_0 => {
                let d = half(b, 0);
                let nib = &b[2..];
                out.extend(nib.iter().map(|q| d * f32::from((q & 0x0f) as i8 - 8)));
                out.extend(nib.iter().map(|q| d * f32::from((q >> 4) as i8 - 8)));
            }
            T::Q4_1 => {
                let (d, m) = (half(b, 0), half(b, 2));
                let nib = &b[4..];
                out.extend(nib.iter().map(|q| d * f32::from(q & 0x0f) + m));
                out.extend(nib.iter().map(|q| d * f32::from(q >> 4) + m));
            }
            T::Q5_0 => {
                let d = half(b, 0);
                out.extend(five_bits(&b[2..6], &b[6..]).iter().map(|q| f32::from(*q as i8 - 16) * d));
            }
            T::Q5_1 => {
                let (d, m) = (half(b, 0), half(b, 2));
                out.extend(five_bits(&b[4..8], &b[8..]).iter().map(|q| f32::from(*q) * d + m));
            }
            T::Q4K => q4k(b, out),
            T::Q5K => q5k(b, out),
            T::Q6K => q6k(b, out),
            T::F32 | T::F16 | T::BF16 | T::Q8_1 | T::Q2K | T::Q3K | T::Q8K => return None,
        }
    }
    Some(())
}

/// One `Q4_K` super-block: `d`, `dmin`, 12 scale bytes, 128 bytes of
/// nibbles (each 32 bytes: a group's values in the low nibbles, the next
/// group's in the high).
fn q4k(b: &[u8], out: &mut Vec<f32>) {
    let (d, min) = (half(b, 0), half(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..]);
    for (pair, q) in qs.chunks_exact(32).enumerate() {
        let (sc, m) = scale_min(2 * pair, scales);
        let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
        let (sc, m) = scale_min(2 * pair + 1, scales);
        let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
        out.extend(q.iter().map(|q| d1 * f32::from(q & 0x0f) - m1));
        out.extend(q.iter().map(|q| d2 * f32::from(q >> 4) - m2));
    }
}

/// One `Q5_K` super-block: as `Q4_K`, with a fifth bit per value from 32
/// bytes of high bits (group `g`'s at bit `g` of byte `l`).
fn q5k(b: &[u8], out: &mut Vec<f32>) {
    let (d, min) = (half(b, 0), half(b, 2));
    let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..]);
    for (pair, q) in qs.chunks_exact(32).enumerate() {
        let (u1, u2) = (1u8 << (2 * pair), 2u8 << (2 * pair));
        let (sc, m) = scale_min(2 * pair, scales);
        let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
        let (sc, m) = scale_min(2 * pair + 1, scales);
        let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
        let hi = |l: usize, u: u8| if qh[l] & u != 0 { 16 } else { 0 };
        out.extend(q.iter().enumerate().map(|(l, q)| d1 * f32::from((q & 0x0f) + hi(l, u1)) - m1));
        out.extend(q.iter().enumerate().map(|(l, q)| d2 * f32::from((q >> 4) + hi(l, u2)) - m2));
    }
}

/// One `Q6_K` super-block: 128 bytes of low nibbles, 64 of high bit
/// pairs, 16 signed scales, then `d`. Each half of 128 values takes 64 low
/// bytes, 32 high bytes and 8 scales.
fn q6k(b: &[u8], out: &mut Vec<f32>) {
    let d = half(b, 208);
    let start = out.len();
    out.resize(start + QK_K, 0.0);
    let y = &mut out[start..];
    for half in 0..2 {
        let (ql, qh) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..128 + 32 * half + 32]);
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            let s = |k: usize| d * f32::from(sc[is + k] as i8);
            y[l] = s(0) * f32::from(q1);
            y[l + 32] = s(2) * f32::from(q2);
            y[l + 64] = s(4) * f32::from(q3);
            y[l + 96] = s(6) * f32::from(q4);
        }
    }
}

/// A `Q4_0` or `Q5_0` tensor as `Q8_0` blocks, exactly: each block's
/// signed integers and its scale (appended to `qs` and `scales`). `None`
/// for any other format.
pub fn exact_q8(dtype: GgmlDType, bytes: &[u8], qs: &mut Vec<i8>, scales: &mut Vec<f32>) -> Option<()> {
    use GgmlDType as T;
    let (_, size) = block_bytes(dtype)?;
    for b in bytes.chunks_exact(size) {
        match dtype {
            T::Q8_0 => qs.extend(b[2..].iter().map(|q| (*q as i8).max(-127))),
            T::Q4_0 => {
                let nib = &b[2..];
                qs.extend(nib.iter().map(|q| (q & 0x0f) as i8 - 8));
                qs.extend(nib.iter().map(|q| (q >> 4) as i8 - 8));
            }
            T::Q5_0 => qs.extend(five_bits(&b[2..6], &b[6..]).iter().map(|q| *q as i8 - 16)),
            T::Q4_1
            | T::Q5_1
            | T::Q4K
            | T::Q5K
            | T::Q6K
            | T::F32
            | T::F16
            | T::BF16
            | T::Q8_1
            | T::Q2K
            | T::Q3K
            | T::Q8K => return None,
        }
        scales.push(half(b, 0));
    }
    Some(())
}

#[cfg(test)]
// Exact bits are what these tests check.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;
    use candle_core::quantized::{ggml_file, GgmlDType};
    use candle_core::Device;

    /// Seeded bytes: every bit pattern a block can hold, scales included
    /// (half-precision scales kept finite and small).
    fn blocks(dtype: GgmlDType, n: usize, seed: u64) -> Vec<u8> {
        let (_, size) = block_bytes(dtype).expect("decoded here");
        let mut s = seed;
        let mut out: Vec<u8> = (0..n * size)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect();
        // The half-precision fields, as a file has them: finite, of either
        // sign, magnitudes from 2^-14 up to about 0.06.
        let halves: &[usize] = if matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_1 | GgmlDType::Q4K | GgmlDType::Q5K) {
            &[0, 2]
        } else if dtype == GgmlDType::Q6K {
            &[208]
        } else {
            &[0]
        };
        for (i, b) in out.chunks_exact_mut(size).enumerate() {
            for &at in halves {
                let sign = if i % 3 == 0 { 0x8000 } else { 0 };
                let bits = (0x0400 + ((i * 977 + at * 131) % 0x2400) as u16) | sign;
                b[at..at + 2].copy_from_slice(&bits.to_le_bytes());
            }
        }
        out
    }

    /// candle's dequantizer (scalar, GGML's reference code in Rust) on the
    /// same bytes.
    fn candle(dtype: GgmlDType, bytes: &[u8]) -> Vec<f32> {
        let (per, size) = block_bytes(dtype).expect("decoded here");
        let n = bytes.len() / size * per;
        let q = ggml_file::qtensor_from_ggml(dtype, bytes, vec![n], &Device::Cpu).expect("candle reads the blocks");
        q.dequantize(&Device::Cpu).and_then(|t| t.to_vec1::<f32>()).expect("candle dequantizes")
    }

    #[test]
    fn every_format_decodes_to_candles_values_bit_for_bit() {
        for dtype in [
            GgmlDType::Q8_0,
            GgmlDType::Q4_0,
            GgmlDType::Q4_1,
            GgmlDType::Q5_0,
            GgmlDType::Q5_1,
            GgmlDType::Q4K,
            GgmlDType::Q5K,
            GgmlDType::Q6K,
        ] {
            let bytes = blocks(dtype, 24, dtype.type_size() as u64);
            let mut ours = Vec::new();
            decode(dtype, &bytes, &mut ours).expect("decoded here");
            let theirs = candle(dtype, &bytes);
            assert_eq!(ours.len(), theirs.len(), "{dtype:?}");
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{dtype:?} value {i}: {a} vs candle's {b}");
            }
        }
    }

    /// The layouts written out by hand, one block each, from GGML's
    /// definitions: where each value's bits and scales are.
    #[test]
    fn the_block_layouts_are_ggmls() {
        // Q5_0: d = 1, value 0's nibble 3 and fifth bit set (3 + 16 - 16 =
        // 3); value 16's nibble 5, fifth bit (bit 16 of qh) clear: 5 - 16.
        let mut b = vec![0u8; 22];
        b[0..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        b[2] = 1;
        b[6] = 0x53;
        let mut v = Vec::new();
        decode(GgmlDType::Q5_0, &b, &mut v).unwrap();
        assert_eq!((v[0], v[16], v[1]), (3.0, -11.0, -16.0));
        let (mut qs, mut d) = (Vec::new(), Vec::new());
        exact_q8(GgmlDType::Q5_0, &b, &mut qs, &mut d).unwrap();
        assert_eq!((qs[0], qs[16], d[0]), (3, -11, 1.0));

        // Q4_K: d = 1, dmin = 0.5; group 0's scale 2 and minimum 4; group 5
        // takes its scale's low bits from byte 9 and its top bits from
        // byte 1's spare bits.
        let mut b = vec![0u8; 144];
        b[0..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        b[2..4].copy_from_slice(&0x3800u16.to_le_bytes());
        b[4] = 2;
        b[8] = 4;
        b[4 + 9] = 0x31; // group 5: scale low nibble 1, minimum low nibble 3
        b[4 + 1] = 0b0100_0000; // group 5's scale: top bits 01 -> +16
        b[4 + 5] = 0b1000_0000; // group 5's minimum: top bits 10 -> +32
        b[16] = 0x07; // group 0 value 0: 7; group 1 value 0: 0
        b[16 + 64] = 0x90; // group 4 value 0: 0; group 5 value 0: 9
        let mut v = Vec::new();
        decode(GgmlDType::Q4K, &b, &mut v).unwrap();
        assert_eq!(scale_min(5, &b[4..16]), (17, 35));
        assert_eq!(v[0], 2.0 * 7.0 - 0.5 * 4.0);
        assert_eq!(v[5 * 32], 17.0 * 9.0 - 0.5 * 35.0);

        // Q6_K: d = 1 at the end; value 0 = (low nibble 5 | high bits 2 << 4)
        // - 32 = 5, times scale 3; value 96 takes byte 32's high nibble and
        // bits 6-7 of qh[0], with scale 6 (index 6).
        let mut b = vec![0u8; 210];
        b[208..210].copy_from_slice(&0x3c00u16.to_le_bytes());
        b[0] = 0x05;
        b[32] = 0xf0;
        b[128] = 0b1100_0010;
        b[192] = 3;
        b[198] = 0xfe; // -2
        let mut v = Vec::new();
        decode(GgmlDType::Q6K, &b, &mut v).unwrap();
        assert_eq!(v[0], 3.0 * f32::from((5 | (2 << 4)) as i8 - 32));
        assert_eq!(v[96], -2.0 * f32::from((15 | (3 << 4)) as i8 - 32));
    }

    /// `Q4_0` and `Q5_0` as `Q8_0` blocks are the decoded values exactly.
    #[test]
    fn small_integer_formats_become_q8_blocks_exactly() {
        for dtype in [GgmlDType::Q4_0, GgmlDType::Q5_0, GgmlDType::Q8_0] {
            let bytes = blocks(dtype, 8, 7);
            let (mut qs, mut d) = (Vec::new(), Vec::new());
            exact_q8(dtype, &bytes, &mut qs, &mut d).unwrap();
            let mut values = Vec::new();
            decode(dtype, &bytes, &mut values).unwrap();
            for (i, v) in values.iter().enumerate() {
                if dtype == GgmlDType::Q8_0 && bytes[(i / QK) * 34 + 2 + i % QK] == 0x80 {
                    continue; // -128, clamped to -127 for the kernels
                }
                assert_eq!(d[i / QK] * f32::from(qs[i]), *v, "{dtype:?} value {i}");
            }
        }
    }

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
