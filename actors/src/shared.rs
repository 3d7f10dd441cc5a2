//! Read-only inputs shared by every actor of a run.

use engine::chat::ChatPort;
use engine::config::Config;
use engine::embed::{EmbeddingPort, Strategy};
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::store::trace::EmbedRecorder;
use std::sync::Arc;

/// What every actor of a run reads and nobody writes.
pub struct RunShared {
    /// Resolved configuration.
    pub config: Config,
    /// The scenario.
    pub scenario: Scenario,
    /// The trait table personas are drawn from.
    pub traits: Traits,
    /// Run seed.
    pub seed: u64,
    /// Panel size.
    pub personas: u32,
    /// The personas this run holds: the whole panel, or a shard's range.
    pub range: std::ops::Range<u32>,
    /// The tick that ends the session (consolidation queues working
    /// memories for promotion there).
    pub session_end_tick: u32,
    /// The embedding port; `None` runs without embeddings (relevance is
    /// then zero and both embedding stages are skipped).
    pub embedder: Option<Arc<dyn EmbeddingPort>>,
    /// The recorder wrapped around the embedding port; each tick takes its
    /// invocations for the trace.
    pub recorder: Option<Arc<EmbedRecorder>>,
    /// The chat port.
    pub chat: Arc<dyn ChatPort>,
    /// How embedding stages submit texts.
    pub strategy: Strategy,
}
