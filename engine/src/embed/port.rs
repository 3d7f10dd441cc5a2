//! The embedding port.

use crate::cost::Spend;
use crate::error::Result;
use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which stage an embedding serves. Part of the key: a retrieval text and an
/// equal memory description are never merged across stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EmbedRole {
    /// Query texts for memory retrieval.
    Retrieval,
    /// Descriptions of new memories.
    Memory,
}

/// What makes two embeddings of one text interchangeable: role, model and
/// the settings that change vectors.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EmbedKey {
    /// Stage.
    pub role: EmbedRole,
    /// Model name.
    pub model: String,
    /// Vector dimension.
    pub dim: usize,
}

/// One physical request: a contiguous run of the submitted texts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedCall {
    /// Index of its first text in the submitted list.
    pub first: usize,
    /// Number of texts it carried.
    pub len: usize,
    /// Attempts billed (1 when the first try succeeded).
    pub attempts: u32,
    /// What the provider billed, all attempts included.
    pub spend: Spend,
}

/// A complete, ordered embedding result.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedBatch {
    /// One vector per submitted text, in order.
    pub vectors: Vec<Arc<[f32]>>,
    /// The physical requests that produced them.
    pub calls: Vec<EmbedCall>,
}

/// Embeds an ordered list of texts under one key. Returns a complete ordered
/// result or an error; [`crate::Error::Embedding`] carries what the failed
/// invocation had already cost.
pub trait EmbeddingPort: Send + Sync {
    /// Embeds `texts` under `key`.
    fn embed<'a>(&'a self, key: &'a EmbedKey, texts: &'a [String]) -> BoxFuture<'a, Result<EmbedBatch>>;
}
