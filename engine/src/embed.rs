//! Embeddings: the port, the embedded local embedder, and the batch plan
//! that deduplicates a stage's texts and allocates what they cost.
//!
//! A stage (retrieval or memory) gathers `(consumer, text)` requests, builds
//! a [`Plan`], submits the plan's unique texts through an
//! [`EmbeddingPort`] in one invocation ([`Strategy::Batched`]) and maps the
//! vectors back. [`Strategy::PerConsumer`] is the baseline: one invocation
//! per request, no dedup, awaited in turn.

pub mod cache;
pub mod client;
pub mod http;
pub mod local;
pub mod modelled;
pub mod plan;
pub mod port;
pub mod provider;

pub use cache::TextCache;
pub use client::{ClientSettings, InferenceClient};
pub use http::{HttpProvider, HttpSettings};
pub use local::LocalProvider;
pub use modelled::{ModelledProvider, ModelledSettings};
pub use plan::{embed_stage, Embedding, Plan, StageResult, StageStats, Strategy};
pub use port::{EmbedBatch, EmbedCall, EmbedKey, EmbedRole, EmbeddingPort};
pub use provider::EmbedProvider;
