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
pub use port::{EmbedBatch, EmbedCall, EmbedError, EmbedKey, EmbedResult, EmbedRole, EmbeddingPort};

/// Cosine of two vectors; zero when either is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
