//! What a trace holds.

use crate::cost::Spend;
use crate::digest::{Digest, DigestWriter};
use crate::embed::{EmbedCall, EmbedKey, EmbedRole};
use crate::persona::{MemoryId, MemoryKind};
use crate::report::Stopped;
use crate::turn::{Outcome, TickDigests};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The current trace format version.
pub const FORMAT_VERSION: u32 = 1;

/// The first frame: everything needed to re-run the simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// What an embedding invocation answered: the vectors with the physical
/// calls, or the error message with what it had cost.
pub type EmbedAnswer = Result<(Vec<Arc<[f32]>>, Vec<EmbedCall>), (String, Spend)>;

/// One invocation of the embedding port, as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    w.u8(key.role as u8).str(&key.model).u64(key.dim as u64).u64(texts.len() as u64);
    for t in texts {
        w.str(t);
    }
    w.finish()
}

/// A memory created at a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEvent {
    /// Its id.
    pub id: MemoryId,
    /// Job position that created it.
    pub position: u32,
    /// Observation or reflection.
    pub kind: MemoryKind,
    /// Text.
    pub description: String,
    /// Importance.
    pub importance: u8,
    /// Sentiment.
    pub sentiment: f32,
    /// Sources.
    pub sources: Vec<String>,
}

/// One committed tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// The last frame of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// Ticks committed.
    pub ticks_completed: u32,
    /// Why it stopped early, if it did.
    pub stopped: Option<Stopped>,
    /// Final digests.
    pub digests: TickDigests,
}

/// A frame's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// The first frame.
    Header(Box<Header>),
    /// A committed tick.
    Tick(Box<TickFrame>),
    /// The run finished.
    End(RunEnd),
}
