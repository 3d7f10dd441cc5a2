//! Content digests.
//!
//! A [`Digest`] is a BLAKE3 hash written as hex. [`DigestWriter`] feeds
//! values into it in a fixed, explicit encoding (length-prefixed strings,
//! little-endian numbers, float bit patterns), so a digest never depends on
//! a serializer's choices or on hash-map order.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 32-byte BLAKE3 digest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// Lower-case hex.
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push_str(&format!("{b:02x}"));
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
pub struct DigestWriter(blake3::Hasher);

impl DigestWriter {
    /// A writer whose output is separated from other domains by `domain`.
    pub fn new(domain: &str) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(&(domain.len() as u64).to_le_bytes());
        h.update(domain.as_bytes());
        DigestWriter(h)
    }

    /// Adds a `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.update(&v.to_le_bytes());
        self
    }

    /// Adds a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.update(&v.to_le_bytes());
        self
    }

    /// Adds a byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.update(&[v]);
        self
    }

    /// Adds a float by its bit pattern.
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.0.update(&v.to_bits().to_le_bytes());
        self
    }

    /// Adds a float by its bit pattern.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.0.update(&v.to_bits().to_le_bytes());
        self
    }

    /// Adds a length-prefixed string.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.0.update(&(s.len() as u64).to_le_bytes());
        self.0.update(s.as_bytes());
        self
    }

    /// Adds a length-prefixed float vector.
    pub fn floats(&mut self, v: &[f32]) -> &mut Self {
        self.0.update(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.0.update(&x.to_bits().to_le_bytes());
        }
        self
    }

    /// Adds another digest.
    pub fn digest(&mut self, d: &Digest) -> &mut Self {
        self.0.update(&d.0);
        self
    }

    /// Finishes the digest.
    pub fn finish(&self) -> Digest {
        Digest(*self.0.finalize().as_bytes())
    }
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
    }
}
