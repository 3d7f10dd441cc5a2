//! Ledger record ids.

use crate::persona::memory::MemoryId;
use serde::{Deserialize, Serialize};

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
