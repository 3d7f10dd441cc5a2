//! Memory ids (a persona's memory: owner and sequence) and ledger
//! record ids.

use super::tier::Tier;
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

/// A memory id's text, `m-{persona:05}-{seq:04}` (with its promoted node's
/// tier after a dot, `.shortTerm`), on the stack: ids are written into
/// digests and traces by the million, where the formatting machinery would
/// cost more than the rest of the write.
#[derive(Clone, Copy)]
pub struct MemoryIdText {
    buf: [u8; 33],
    len: u8,
}

impl MemoryIdText {
    fn new(id: MemoryId) -> Self {
        let mut t = MemoryIdText { buf: [0; 33], len: 0 };
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

    /// The id of its promoted node in `tier`: a dot and the tier's name.
    fn node(mut self, tier: Tier) -> Self {
        self.push(b'.');
        for b in tier.as_str().bytes() {
            self.push(b);
        }
        self
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
        // Only ASCII digits, letters, `-` and `.` are ever pushed.
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

/// A ledger record's id: one of a persona's memories, a record named by
/// hand (test memories), or the node promotion made from one of them.
/// Compared, ordered and hashed as a value, so the ledger never formats or
/// parses an id to look one up. It reads and writes as text
/// (`m-00007-0003`, `test-gradual-decay-1`, `m-00007-0003.shortTerm`) in
/// every format.
///
/// The consolidation plan's promotion creates a new node with a fresh id
/// (`randomUUID()`) and links the old one to it (`PROMOTED_TO`). Here the
/// new node's id is its origin's with the tier it was promoted into
/// ([`RecordId::promoted`]): as unique, since a lineage enters each tier at
/// most once, and the same on every run, which a random id would not be.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordId {
    /// A persona's memory.
    Memory(MemoryId),
    /// A record named by hand; a promoted node of one is named
    /// `{origin}.{tier}`.
    Named(String),
    /// The node that promotion into the tier made from a persona's memory.
    Promoted(MemoryId, Tier),
}

/// The tiers a record can be promoted into, whose names end a promoted
/// node's id.
const PROMOTED_INTO: [Tier; 2] = [Tier::ShortTerm, Tier::LongTerm];

impl RecordId {
    /// The id `text` stands for: a memory when it is exactly a memory id as
    /// [`MemoryId`] writes it (a promoted node when a dot and a tier it can
    /// be promoted into follow), otherwise a named record.
    pub fn parse(text: &str) -> RecordId {
        let (memory, tier) = match text.split_once('.') {
            Some((m, t)) => (m, PROMOTED_INTO.into_iter().find(|x| x.as_str() == t).map(Some)),
            None => (text, Some(None)),
        };
        match (MemoryId::parse(memory), tier) {
            (Some(id), Some(tier)) if id.to_string() == memory => match tier {
                None => RecordId::Memory(id),
                Some(t) => RecordId::Promoted(id, t),
            },
            _ => RecordId::Named(text.to_string()),
        }
    }

    /// Calls `f` with the id's text, without allocating.
    pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self {
            RecordId::Memory(id) => f(id.text().as_str()),
            RecordId::Named(name) => f(name),
            RecordId::Promoted(id, tier) => f(id.text().node(*tier).as_str()),
        }
    }

    /// The memory whose content the record carries: a persona's memory, or
    /// a node promoted from one.
    pub fn memory(&self) -> Option<MemoryId> {
        match self {
            RecordId::Memory(id) | RecordId::Promoted(id, _) => Some(*id),
            RecordId::Named(_) => None,
        }
    }

    /// The record its lineage began with: itself, unless it is a promoted
    /// node.
    pub fn origin(&self) -> RecordId {
        match self {
            RecordId::Memory(id) | RecordId::Promoted(id, _) => RecordId::Memory(*id),
            RecordId::Named(name) => RecordId::Named(Self::named_origin(name).to_string()),
        }
    }

    fn named_origin(name: &str) -> &str {
        PROMOTED_INTO
            .into_iter()
            .find_map(|t| name.strip_suffix(t.as_str())?.strip_suffix('.'))
            .filter(|origin| !origin.is_empty())
            .unwrap_or(name)
    }

    /// The id of the node that promoting this record's lineage into `tier`
    /// creates: its origin's id, a dot and the tier's name.
    pub fn promoted(&self, tier: Tier) -> RecordId {
        debug_assert!(PROMOTED_INTO.contains(&tier), "no record is promoted into {tier:?}; this is a bug");
        match self {
            RecordId::Memory(id) | RecordId::Promoted(id, _) => RecordId::Promoted(*id, tier),
            RecordId::Named(name) => RecordId::Named(format!("{}.{}", Self::named_origin(name), tier.as_str())),
        }
    }

    /// The ids its lineage can hold: its origin, then the nodes promotion
    /// into each tier makes.
    pub fn lineage(&self) -> [RecordId; 3] {
        let origin = self.origin();
        let (short, long) = (origin.promoted(Tier::ShortTerm), origin.promoted(Tier::LongTerm));
        [origin, short, long]
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
        self.with_text(|text| f.write_str(text))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id reads back from the text it writes, the widest memory
    /// node's included; a tier that promotion never enters, or a dot after
    /// something that is not a memory id, makes a named record.
    #[test]
    fn ids_read_back_from_their_text() {
        let widest = MemoryId { persona: u32::MAX, seq: u32::MAX };
        for id in [
            RecordId::Memory(MemoryId { persona: 7, seq: 3 }),
            RecordId::Promoted(MemoryId { persona: 7, seq: 3 }, Tier::ShortTerm),
            RecordId::Promoted(widest, Tier::ShortTerm),
            RecordId::Promoted(widest, Tier::LongTerm),
            RecordId::Named("test-high-access-1.shortTerm".into()),
            RecordId::Named("m-00007-0003.archived".into()),
            RecordId::Named("x.shortTerm".into()),
        ] {
            let text = id.to_string();
            assert_eq!(RecordId::parse(&text), id, "{text}");
            assert_eq!(serde_json::from_str::<RecordId>(&serde_json::to_string(&id).expect("json")).ok(), Some(id));
        }
        assert_eq!(RecordId::parse("m-00007-0003.shortTerm").origin().to_string(), "m-00007-0003");
        assert_eq!(RecordId::parse(".shortTerm").origin(), RecordId::parse(".shortTerm"), "no empty origin");
    }
}
