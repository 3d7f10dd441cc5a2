//! What a trace holds.

use crate::digest::{Digest, DigestWriter};
use crate::embed::{EmbedCall, EmbedKey, EmbedRole};
use crate::persona::{MemoryId, MemoryKind};
use crate::turn::{Outcome, TickDigests};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The current trace format version.
/// Version 2: a failed embedding invocation records its physical requests
/// (each with its texts and bill), not one total. Version 3 (engine 0.3.0):
/// an outcome records its semantic similarity rating. Version 4 (engine
/// 0.4.0): a tick too large for one frame is written as [`TickPart`]
/// frames closed by a [`TickCommit`]; everything else is as in version 3.
/// Version 5 (engine 0.5.0): every frame's payload is LZ4-compressed
/// ([`COMPRESSED_FROM`]); the records are as in version 4. Version 6
/// (engine 0.6.0): every [`crate::cost::Spend`] holds the cached prompt
/// tokens as a fourth field ([`CACHED_FROM`]). Version 7 (engine 0.7.0):
/// a shard's trace, and a merge of shards, say so in a [`Split`] record
/// after the header; a merged tick is preceded by its split by shard.
/// Traces of a whole panel are as in version 6. This engine reads
/// versions 3 to 7, and appends to an older trace in its own format.
pub const FORMAT_VERSION: u32 = 7;

/// From this format on, a [`crate::cost::Spend`] has four fields; before
/// it, three (read and written through [`crate::cost::with_layout`]).
pub const CACHED_FROM: u32 = 6;

/// The layout of [`crate::cost::Spend`] in a trace of format `version`.
pub fn spend_layout(version: u32) -> crate::cost::Layout {
    match version >= CACHED_FROM {
        true => crate::cost::Layout::Current,
        false => crate::cost::Layout::BeforeCached,
    }
}

/// From this format on, every frame's payload is LZ4-compressed (block
/// format, uncompressed size prepended); see [`crate::store::trace::file`].
pub const COMPRESSED_FROM: u32 = 5;

/// The oldest trace format this engine reads.
pub const OLDEST_READABLE: u32 = 3;

/// The first frame: everything needed to re-run the simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct Header {
    /// Trace format version.
    pub format_version: u32,
    /// Engine crate version that wrote the trace.
    pub engine_version: String,
    /// The resolved configuration, as canonical TOML.
    pub config_toml: String,
    /// Its hash.
    pub config_hash: Digest,
    /// Run seed.
    pub seed: u64,
    /// Panel size.
    pub personas: u32,
    /// Ticks asked for.
    pub ticks: u32,
    /// Budget in nano-USD, if any.
    pub budget_nano_usd: Option<u64>,
    /// `batched` or `per-consumer`.
    pub strategy: crate::embed::Strategy,
    /// Where the scenario came from (a file name or a built-in name).
    pub scenario_origin: String,
    /// The scenario's full source text.
    pub scenario_source: String,
    /// BLAKE3 hex of the scenario source.
    pub scenario_hash: String,
    /// The persona trait table's full source text.
    pub traits_source: String,
    /// BLAKE3 hex of the trait table.
    pub traits_hash: String,
}

/// The version of the engine crate, written into every trace header.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The BLAKE3 hex of a fixture's source text, as headers record it.
pub fn fixture_hash(source: &str) -> String {
    blake3::hash(source.as_bytes()).to_hex().to_string()
}

impl Header {
    /// The header of a run of `config` recorded by this engine, with the
    /// built-in scenario and trait table until [`Header::with_scenario`] and
    /// [`Header::with_traits`] say otherwise, and no budget.
    pub fn new(config: &crate::config::Config, seed: u64, personas: u32, ticks: u32) -> Header {
        let scenario = crate::scenario::BUILTIN[0].1;
        Header {
            format_version: FORMAT_VERSION,
            engine_version: ENGINE_VERSION.to_string(),
            config_toml: config.to_toml(),
            config_hash: config.hash(),
            seed,
            personas,
            ticks,
            budget_nano_usd: None,
            strategy: crate::embed::Strategy::Batched,
            scenario_origin: "default".into(),
            scenario_hash: fixture_hash(scenario),
            scenario_source: scenario.to_string(),
            traits_hash: fixture_hash(crate::persona::profile::DEFAULT_TRAITS),
            traits_source: crate::persona::profile::DEFAULT_TRAITS.to_string(),
        }
    }

    /// The scenario, by origin (a file or a built-in name) and source text.
    pub fn with_scenario(mut self, origin: &str, source: &str) -> Header {
        self.scenario_origin = origin.to_string();
        self.scenario_hash = fixture_hash(source);
        self.scenario_source = source.to_string();
        self
    }

    /// The persona trait table's source text.
    pub fn with_traits(mut self, source: &str) -> Header {
        self.traits_hash = fixture_hash(source);
        self.traits_source = source.to_string();
        self
    }

    /// The budget, in nano-USD.
    pub fn with_budget(mut self, budget_nano_usd: Option<u64>) -> Header {
        self.budget_nano_usd = budget_nano_usd;
        self
    }

    /// The embedding strategy.
    pub fn with_strategy(mut self, strategy: crate::embed::Strategy) -> Header {
        self.strategy = strategy;
        self
    }

    /// What makes `other` a different run from this one, by name
    /// (configuration, scenario, trait table, seed, panel size, ticks,
    /// budget, embedding strategy); empty when they record the same run.
    pub fn differences(&self, other: &Header) -> Vec<&'static str> {
        let (a, b) = (self, other);
        [
            (a.config_hash != b.config_hash, "configuration"),
            (a.scenario_hash != b.scenario_hash, "scenario"),
            (a.traits_hash != b.traits_hash, "trait table"),
            (a.seed != b.seed, "seed"),
            (a.personas != b.personas, "panel size"),
            (a.ticks != b.ticks, "ticks"),
            (a.budget_nano_usd != b.budget_nano_usd, "budget"),
            (a.strategy != b.strategy, "embedding strategy"),
        ]
        .into_iter()
        .filter_map(|(differs, what)| differs.then_some(what))
        .collect()
    }

    /// The recorded configuration, resolved by this engine. When it no
    /// longer resolves to the recorded hash (new settings, changed
    /// defaults, another digest encoding since it was recorded), the error
    /// says which engine recorded it, so that the user replays it with that
    /// version. `file` names the trace.
    pub fn config(&self, file: &str) -> crate::Result<crate::config::Config> {
        let name = format!("{file} (header configuration)");
        let config = crate::config::RawConfig::from_toml(&self.config_toml, &name)?.resolve(&name)?;
        let current = config.hash();
        if current != self.config_hash {
            let why = format!(
                "with an older configuration (its recorded hash {} is {} under engine {ENGINE_VERSION})",
                &self.config_hash.hex()[..16],
                &current.hex()[..16]
            );
            return Err(crate::Error::RecordedByOlder {
                file: file.to_string(),
                recorded_by: self.engine_version.clone(),
                why,
            });
        }
        Ok(config)
    }
}

/// The vectors of one answer, encoded as one little-endian byte block
/// (`count u32, dim u32, count * dim f32`) rather than float by float:
/// vectors are most of a trace's bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vectors(pub Vec<Arc<[f32]>>);

impl Serialize for Vectors {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let dim = self.0.first().map_or(0, |v| v.len());
        if self.0.iter().any(|v| v.len() != dim) {
            return Err(serde::ser::Error::custom("vectors of one answer must share a dimension"));
        }
        let mut bytes = Vec::with_capacity(8 + self.0.len() * dim * 4);
        bytes.extend_from_slice(&(self.0.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(dim as u32).to_le_bytes());
        for v in &self.0 {
            for x in v.iter() {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        s.serialize_bytes(&bytes)
    }
}

/// The trace's encoder: the same bytes as the serde path (a byte block's
/// length, then the block), written without building the block first.
impl bincode::Encode for Vectors {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> Result<(), bincode::error::EncodeError> {
        use bincode::enc::write::Writer;
        let dim = self.0.first().map_or(0, |v| v.len());
        if self.0.iter().any(|v| v.len() != dim) {
            return Err(bincode::error::EncodeError::Other("vectors of one answer must share a dimension"));
        }
        ((8 + self.0.len() * dim * 4) as u64).encode(e)?;
        e.writer().write(&(self.0.len() as u32).to_le_bytes())?;
        e.writer().write(&(dim as u32).to_le_bytes())?;
        let mut block = [0u8; 256];
        for v in &self.0 {
            for floats in v.chunks(block.len() / 4) {
                for (to, x) in block.chunks_exact_mut(4).zip(floats) {
                    to.copy_from_slice(&x.to_le_bytes());
                }
                e.writer().write(&block[..floats.len() * 4])?;
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Vectors {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes: Bytes = Deserialize::deserialize(d)?;
        let b = bytes.0;
        let bad = |m: &str| serde::de::Error::custom(format!("vector block: {m}"));
        if b.len() < 8 {
            return Err(bad("shorter than its header"));
        }
        let count = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let dim = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
        let need = count.checked_mul(dim).and_then(|n| n.checked_mul(4)).and_then(|n| n.checked_add(8));
        if need != Some(b.len()) {
            return Err(bad("length does not match count and dimension"));
        }
        let floats: Vec<f32> = b[8..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(Vectors(if dim == 0 {
            vec![Arc::from(Vec::new()); count]
        } else {
            floats.chunks(dim).map(Arc::from).collect()
        }))
    }
}

/// What an embedding invocation answered: the vectors with the physical
/// calls and the cache hits, or the error message with what it had cost.
pub type EmbedAnswer = Result<(Vectors, Vec<EmbedCall>, u64), (String, Vec<EmbedCall>)>;

/// One invocation of the embedding port, as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct EmbedExchange {
    /// Stage.
    pub role: EmbedRole,
    /// Digest of (key, texts): what the cassette is keyed by.
    pub request: Digest,
    /// Texts submitted.
    pub texts: u32,
    /// Vectors and physical calls, or the error with what it cost.
    pub result: EmbedAnswer,
}

/// The digest of an embedding invocation.
pub fn embed_request_digest(key: &EmbedKey, texts: &[String]) -> Digest {
    let mut w = DigestWriter::new("embed request v1");
    w.u8(key.role.digest_code()).str(&key.model).u64(key.dim as u64).u64(texts.len() as u64);
    for t in texts {
        w.str(t);
    }
    w.finish()
}

/// A memory created at a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct MemoryEvent {
    /// Its id.
    pub id: MemoryId,
    /// Job position that created it.
    pub position: u32,
    /// Observation or reflection.
    pub kind: MemoryKind,
    /// Text (shared with the memory itself).
    pub description: Arc<str>,
    /// Importance.
    pub importance: u8,
    /// Sentiment.
    pub sentiment: f32,
    /// Sources.
    pub sources: Vec<Arc<str>>,
}

/// One committed tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct TickFrame {
    /// Tick number.
    pub tick: u32,
    /// Ids of the stimuli shown, in first-exposure order.
    pub stimuli: Vec<String>,
    /// Outcomes in job order; their chat calls carry each request digest
    /// with its reply and billing.
    pub outcomes: Vec<Outcome>,
    /// Every embedding port invocation, in call order.
    pub embeddings: Vec<EmbedExchange>,
    /// Memories created.
    pub memories: Vec<MemoryEvent>,
    /// Per-persona state digests after the tick.
    pub persona_digests: Vec<Option<Digest>>,
    /// Tick digests.
    pub digests: TickDigests,
    /// Consolidation changes per persona: promotions, expiries, blocked
    /// promotions, session queueing, clusters.
    pub consolidation: Vec<(u32, Vec<crate::memory::Change>)>,
}

/// The last frame of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct RunEnd {
    /// Ticks committed.
    pub ticks_completed: u32,
    /// Why it stopped early, if it did.
    pub stopped: Option<Stopped>,
    /// Final digests.
    pub digests: TickDigests,
}

/// One slice of the encoding of a `Record::Tick` too large for one frame.
/// Parts are numbered from 0 and follow each other directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct TickPart {
    /// The tick they belong to.
    pub tick: u32,
    /// Its position among the tick's parts, from 0.
    pub part: u32,
    /// The slice.
    pub bytes: Bytes,
}

/// Closes the parts of a tick: the tick is committed once this frame is
/// written and synced. Parts without their commit are the tail of a run
/// stopped mid-write, cut off by resume like a torn frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub struct TickCommit {
    /// The tick.
    pub tick: u32,
    /// How many parts it has.
    pub parts: u32,
    /// Their total length in bytes.
    pub bytes: u64,
}

/// A byte block, encoded as one length-prefixed run of bytes, and read
/// back from any serde format (bincode gives a byte sequence).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

/// The trace's encoder: the same bytes as the serde path.
impl bincode::Encode for Bytes {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> Result<(), bincode::error::EncodeError> {
        self.0.as_slice().encode(e)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte block")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Bytes(out))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// A frame's payload. New variants go at the end: a record's encoding
/// starts with its variant's position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub enum Record {
    /// The first frame.
    Header(Box<Header>),
    /// A committed tick.
    Tick(Box<TickFrame>),
    /// The run finished.
    End(RunEnd),
    /// A slice of a tick too large for one frame (format 4).
    TickPart(TickPart),
    /// The frame that commits a tick written in parts (format 4).
    TickCommit(TickCommit),
    /// How the run's panel is split into shards (format 7).
    Split(Split),
}

/// What a trace says about a panel split into shards (format 7): a shard's
/// trace, and a merged one, has a `Shard` or `Merged` record right after
/// its header; each tick of a merged trace is preceded by its `Tick`
/// record. A whole panel's trace has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub enum Split {
    /// This run is one shard of the panel its header describes: it ran
    /// [`crate::shard::Shard::personas`] only.
    Shard(crate::shard::Shard),
    /// This run merges this many shards (`sim-cli merge`): its ticks hold
    /// every persona, in order, with the shards' own embedding
    /// invocations and costs.
    Merged {
        /// How many.
        shards: u32,
    },
    /// A merged tick's split, shard by shard in order: how many of its
    /// embedding invocations each shard made (they follow each other in
    /// the frame), and the shard's own digests after the tick.
    Tick {
        /// The tick.
        tick: u32,
        /// One entry per shard.
        shards: Vec<ShardTick>,
    },
}

/// One shard's part of a merged tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub struct ShardTick {
    /// The embedding invocations it made.
    pub embeddings: u32,
    /// Its own digests after the tick.
    pub digests: TickDigests,
}

/// Why a run stopped before its last tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// Recorded spend reached the budget at a tick boundary.
    Budget,
    /// Most of a tick's chat calls failed with the same kind of permanent
    /// error (a bad key, an unknown model): the circuit breaker stopped the
    /// run instead of failing every job one by one. Resumable.
    PermanentErrors,
    /// The user interrupted the run (Ctrl-C). Resumable.
    Interrupted,
}

impl StopReason {
    /// Whether the run ended for good (its trace gets an end frame) or can
    /// be resumed.
    pub fn is_final(self) -> bool {
        match self {
            StopReason::Budget => true,
            StopReason::PermanentErrors | StopReason::Interrupted => false,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Budget => "budget",
            StopReason::PermanentErrors => "permanent errors",
            StopReason::Interrupted => "interrupted",
        })
    }
}

/// A run that stopped before its last tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct Stopped {
    /// Why.
    pub reason: StopReason,
    /// What happened, in words.
    pub detail: String,
    /// Last committed tick.
    pub after_tick: u32,
    /// Recorded spend at the stop.
    pub spent_nano_usd: u64,
    /// The budget.
    pub budget_nano_usd: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_header_whose_config_hashes_differently_names_its_engine() {
        let mut h = Header::new(&Config::defaults(), 1, 2, 3);
        assert!(h.config("t.bin").is_ok());
        h.config_hash = crate::digest::DigestWriter::new("another engine's hash").finish();
        h.engine_version = "0.0.9".into();
        let e = h.config("t.bin").expect_err("hash mismatch").to_string();
        assert!(e.contains("t.bin was recorded by engine 0.0.9 with an older configuration"), "{e}");
        assert!(e.contains("replay it with engine 0.0.9"), "{e}");
    }
}
