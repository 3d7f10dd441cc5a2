//! Content digests.
//!
//! A [`Digest`] is a BLAKE3 hash written as hex. [`DigestWriter`] feeds
//! values into it in a fixed, explicit encoding (length-prefixed strings,
//! little-endian numbers, float bit patterns), so a digest never depends on
//! a serializer's choices or on hash-map order.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 32-byte BLAKE3 digest. Human-readable formats (JSON) see it as hex;
/// binary formats as 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Digest(pub [u8; 32]);

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.hex())
        } else {
            self.0.serialize(s)
        }
    }
}

/// The trace's encoder: the same 32 bytes as the serde path, in one write.
impl bincode::Encode for Digest {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> Result<(), bincode::error::EncodeError> {
        bincode::enc::write::Writer::write(e.writer(), &self.0)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            Digest::from_hex(&s).ok_or_else(|| serde::de::Error::custom(format!("not a 64-digit hex digest: {s:?}")))
        } else {
            <[u8; 32]>::deserialize(d).map(Digest)
        }
    }
}

impl Digest {
    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Option<Digest> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Digest(out))
    }

    /// Lower-case hex.
    pub fn hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(DIGITS[usize::from(b >> 4)]));
            s.push(char::from(DIGITS[usize::from(b & 15)]));
        }
        s
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", &self.hex()[..16])
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// Incremental digest with an explicit encoding.
///
/// Values are gathered in a buffer and hashed in large pieces: feeding
/// BLAKE3 a few bytes at a time costs more in copying than in hashing.
/// The incremental hasher (two kilobytes of chaining-value stack) is only
/// made once the buffer first fills; most digests are small, and hash
/// their buffer in one call.
pub struct DigestWriter {
    hasher: Option<Box<blake3::Hasher>>,
    buf: Vec<u8>,
}

/// Bytes gathered before they are hashed.
const CHUNK: usize = 16 * 1024;

impl DigestWriter {
    /// A writer whose output is separated from other domains by `domain`.
    pub fn new(domain: &str) -> Self {
        let mut w = DigestWriter { hasher: None, buf: Vec::with_capacity(1024) };
        w.put(&(domain.len() as u64).to_le_bytes());
        w.put(domain.as_bytes());
        w
    }

    // Inlined, so that the fixed-size writes of numbers copy in place.
    #[inline]
    fn put(&mut self, b: &[u8]) {
        if self.buf.len() + b.len() <= CHUNK {
            self.buf.extend_from_slice(b);
        } else {
            self.spill(b);
        }
    }

    /// Hashes the full buffer, then takes `b`.
    #[inline(never)]
    fn spill(&mut self, b: &[u8]) {
        let hasher = self.hasher.get_or_insert_with(|| Box::new(blake3::Hasher::new()));
        hasher.update(&self.buf);
        self.buf.clear();
        if b.len() > CHUNK {
            hasher.update(b);
            return;
        }
        self.buf.extend_from_slice(b);
    }

    /// Adds a `u64`.
    #[inline]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.put(&v.to_le_bytes());
        self
    }

    /// Adds a `u32`.
    #[inline]
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.put(&v.to_le_bytes());
        self
    }

    /// Adds a byte.
    #[inline]
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.put(&[v]);
        self
    }

    /// Adds a float by its bit pattern.
    #[inline]
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.put(&v.to_bits().to_le_bytes());
        self
    }

    /// Adds a float by its bit pattern.
    #[inline]
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.put(&v.to_bits().to_le_bytes());
        self
    }

    /// Adds a length-prefixed string.
    #[inline]
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.put(&(s.len() as u64).to_le_bytes());
        self.put(s.as_bytes());
        self
    }

    /// Adds a length-prefixed float vector.
    pub fn floats(&mut self, v: &[f32]) -> &mut Self {
        self.put(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.put(&x.to_bits().to_le_bytes());
        }
        self
    }

    /// Adds raw bytes (fixed-length data only; strings go through `str`).
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.put(b);
        self
    }

    /// Adds another digest.
    #[inline]
    pub fn digest(&mut self, d: &Digest) -> &mut Self {
        self.put(&d.0);
        self
    }

    /// Finishes the digest.
    pub fn finish(&self) -> Digest {
        match &self.hasher {
            None => Digest(*blake3::hash(&self.buf).as_bytes()),
            Some(hasher) => {
                let mut h = hasher.as_ref().clone();
                h.update(&self.buf);
                Digest(*h.finalize().as_bytes())
            }
        }
    }
}

/// `DigestWriter::new(domain).str(text).finish()`, for digests of one
/// long text (a prompt): the encoding is gathered into a buffer of its exact
/// size, not grown to it, and hashed in one call (which, unlike feeding an
/// incremental hasher, lets BLAKE3 hash whole chunks side by side).
pub fn of_text(domain: &str, text: &str) -> Digest {
    let mut buf = Vec::with_capacity(16 + domain.len() + text.len());
    buf.extend_from_slice(&(domain.len() as u64).to_le_bytes());
    buf.extend_from_slice(domain.as_bytes());
    buf.extend_from_slice(&(text.len() as u64).to_le_bytes());
    buf.extend_from_slice(text.as_bytes());
    Digest(*blake3::hash(&buf).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_length_prefixed() {
        let a = DigestWriter::new("t").str("ab").str("c").finish();
        let b = DigestWriter::new("t").str("a").str("bc").finish();
        assert_ne!(a, b);
        assert_eq!(a.hex().len(), 64);
        // Past the buffer the incremental hasher takes over; the digest is
        // still BLAKE3 of the whole encoding.
        let long = "x".repeat(3 * CHUNK);
        let mut bytes = Vec::new();
        for part in ["t".as_bytes(), long.as_bytes()] {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part);
        }
        assert_eq!(DigestWriter::new("t").str(&long).finish().0, *blake3::hash(&bytes).as_bytes());
        assert_eq!(Digest::from_hex(&a.hex()), Some(a));
        for n in [0, 1, 63, 64, 1000, 1024, 2500, 4096, CHUNK + 7, 3 * CHUNK] {
            let text = "y".repeat(n);
            assert_eq!(of_text("prompt v1", &text), DigestWriter::new("prompt v1").str(&text).finish(), "{n} bytes");
        }
        let json = serde_json::to_string(&a).expect("serialises");
        assert_eq!(json, format!("\"{}\"", a.hex()));
    }
}
