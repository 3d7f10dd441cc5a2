//! Embeddings: the port, the embedded local embedder, the batch plan that
//! deduplicates a stage's texts and allocates what they cost, and
//! ([`upstream`]) the settings and decisions of the clients that send texts
//! upstream.
//!
//! A stage (retrieval or memory) gathers `(consumer, text)` requests, builds
//! a [`Plan`], submits the plan's unique texts through an
//! [`EmbeddingPort`] in one invocation ([`Strategy::Batched`]) and maps the
//! vectors back. [`Strategy::PerConsumer`] is the baseline: one invocation
//! per request, no dedup, awaited in turn. The adapters behind the port
//! (the inference client and its providers) live in the `providers` crate.

pub mod check;
pub mod local;
pub mod plan;
pub mod port;
pub mod upstream;

pub use plan::{embed_stage, Embedding, Plan, StageResult, StageStats, Strategy};
pub use port::{EmbedBatch, EmbedCall, EmbedKey, EmbedRole, EmbeddingPort};
