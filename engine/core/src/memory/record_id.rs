//! Memory ids (a persona's memory: owner and sequence) and ledger
//! record ids.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A memory's identity: its owner and its sequence number in the owner's
/// stream. Ordering is by owner, then sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, bincode::Encode)]
pub struct MemoryId {
    /// Owning persona.
    pub persona: u32,
    /// Position in the owner's stream, from 0.
    pub seq: u32,
}

impl MemoryId {
    /// Parses the `m-PPPPP-SSSS` form that `Display` writes.
    pub fn parse(s: &str) -> Option<MemoryId> {
        let (p, q) = s.strip_prefix("m-")?.split_once('-')?;
        Some(MemoryId { persona: p.parse().ok()?, seq: q.parse().ok()? })
    }
}

/// A memory id's text, `m-{persona:05}-{seq:04}`, on the stack: ids are
/// written into digests and traces by the million, where the formatting
/// machinery would cost more than the rest of the write.
#[derive(Clone, Copy)]
pub struct MemoryIdText {
    buf: [u8; 23],
    len: u8,
}

impl MemoryIdText {
    fn new(id: MemoryId) -> Self {
        let mut t = MemoryIdText { buf: [0; 23], len: 0 };
        t.push(b'm');
        t.push(b'-');
        t.number(id.persona, 5);
        t.push(b'-');
        t.number(id.seq, 4);
        t
    }

    fn push(&mut self, b: u8) {
        self.buf[usize::from(self.len)] = b;
        self.len += 1;
    }

    /// `n` in decimal, zero-padded to `width` digits, copied in one piece.
    fn number(&mut self, n: u32, width: usize) {
        let (digits, start) = crate::scan::decimal(u64::from(n), width);
        let (len, count) = (usize::from(self.len), digits.len() - start);
        self.buf[len..len + count].copy_from_slice(&digits[start..]);
        self.len += count as u8;
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits, `m` and `-` are ever pushed.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl MemoryId {
    /// The id's text, as `Display` writes it, without allocating.
    pub fn text(self) -> MemoryIdText {
        MemoryIdText::new(self)
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text().as_str())
    }
}

/// A ledger record's id: one of a persona's memories, or a record named by
/// hand (test memories). Compared, ordered and hashed as a value, so the
/// ledger never formats or parses an id to look one up. It reads and
/// writes as text (`m-00007-0003`, `test-gradual-decay-1`) in every format.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordId {
    /// A persona's memory.
    Memory(MemoryId),
    /// A record named by hand.
    Named(String),
}

impl RecordId {
    /// The id `text` stands for: a memory when it is exactly a memory id as
    /// [`MemoryId`] writes it, otherwise a named record.
    pub fn parse(text: &str) -> RecordId {
        match MemoryId::parse(text) {
            Some(id) if id.to_string() == text => RecordId::Memory(id),
            _ => RecordId::Named(text.to_string()),
        }
    }

    /// Calls `f` with the id's text, without allocating.
    pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self {
            RecordId::Memory(id) => f(id.text().as_str()),
            RecordId::Named(name) => f(name),
        }
    }

    /// The memory, when this is one.
    pub fn memory(&self) -> Option<MemoryId> {
        match self {
            RecordId::Memory(id) => Some(*id),
            RecordId::Named(_) => None,
        }
    }
}

impl std::str::FromStr for RecordId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<RecordId, Self::Err> {
        Ok(RecordId::parse(s))
    }
}

impl From<&str> for RecordId {
    fn from(text: &str) -> RecordId {
        RecordId::parse(text)
    }
}

impl From<MemoryId> for RecordId {
    fn from(id: MemoryId) -> RecordId {
        RecordId::Memory(id)
    }
}

impl std::fmt::Display for RecordId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordId::Memory(id) => id.fmt(f),
            RecordId::Named(name) => f.write_str(name),
        }
    }
}

impl Serialize for RecordId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with_text(|text| s.serialize_str(text))
    }
}

/// The trace's encoder: the same bytes as the serde path (the id's text).
impl bincode::Encode for RecordId {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> Result<(), bincode::error::EncodeError> {
        self.with_text(|text| text.encode(e))
    }
}

impl<'de> Deserialize<'de> for RecordId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| RecordId::parse(&s))
    }
}
