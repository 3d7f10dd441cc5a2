//! The embedding port.

use crate::cost::Spend;
use crate::error::Result;
use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which stage an embedding serves. Part of the key: a retrieval text and an
/// equal memory description are never merged across stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, bincode::Encode)]
pub enum EmbedRole {
    /// Query texts for memory retrieval.
    Retrieval,
    /// Descriptions of new memories.
    Memory,
}

impl EmbedRole {
    /// The code this value has in a digest. Explicit, so that reordering or
    /// adding variants never moves an existing digest.
    pub fn digest_code(self) -> u8 {
        match self {
            EmbedRole::Retrieval => 0,
            EmbedRole::Memory => 1,
        }
    }
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

/// One physical request upstream, as billed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub struct EmbedCall {
    /// Indices, in the submitted list, of the texts it carried.
    pub texts: Vec<u32>,
    /// Attempts made (1 when the first try succeeded).
    pub attempts: u32,
    /// What the provider billed, failed attempts that returned usage
    /// included.
    pub spend: Spend,
}

/// A complete, ordered embedding result.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedBatch {
    /// One vector per submitted text, in order.
    pub vectors: Vec<Arc<[f32]>>,
    /// The physical requests that produced them (texts served from a cache
    /// belong to none, and cost nothing).
    pub calls: Vec<EmbedCall>,
    /// Texts served from the cache.
    pub cache_hits: u64,
}

/// Why an embedding invocation failed. The port owns it, so that what the
/// failed invocation was billed stays with the port's own types;
/// [`crate::Error`] takes only its cause.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The provider failed after its retries. `calls` are the invocation's
    /// physical requests as billed, each with the texts it carried, so that
    /// what failed is charged to the texts it was for.
    #[error("embedding provider failed: {cause}")]
    Provider {
        /// The provider's message.
        cause: String,
        /// Every physical request of the failed invocation, as billed.
        calls: Vec<EmbedCall>,
    },
    /// Any other failure, as the engine names it (a replay's cassette
    /// miss, a model file that could not be read).
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

impl EmbedError {
    /// The failed invocation's physical requests, as billed (none for an
    /// engine failure).
    pub fn calls(&self) -> &[EmbedCall] {
        match self {
            EmbedError::Provider { calls, .. } => calls,
            EmbedError::Engine(_) => &[],
        }
    }

    /// What the failed invocation had already cost.
    pub fn incurred(&self) -> Spend {
        let mut total = Spend::default();
        for c in self.calls() {
            total.add(&c.spend);
        }
        total
    }
}

impl From<EmbedError> for crate::Error {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Provider { cause, .. } => crate::Error::Embedding { cause },
            EmbedError::Engine(e) => e,
        }
    }
}

/// An embedding port's result.
pub type EmbedResult<T> = std::result::Result<T, EmbedError>;

/// Embeds an ordered list of texts under one key. Returns a complete ordered
/// result or an [`EmbedError`] that carries what the failed invocation had
/// already cost.
pub trait EmbeddingPort: Send + Sync {
    /// Embeds `texts` under `key`.
    fn embed<'a>(&'a self, key: &'a EmbedKey, texts: &'a [String]) -> BoxFuture<'a, EmbedResult<EmbedBatch>>;

    /// Embeds several lists, one invocation each, and returns their results
    /// in list order. The default runs them one after another; an adapter
    /// that can wait (the inference client) runs them concurrently, and
    /// must decide anything order-dependent (cache hits) in list order.
    fn embed_each<'a>(
        &'a self,
        key: &'a EmbedKey,
        lists: &'a [Vec<String>],
    ) -> BoxFuture<'a, Vec<EmbedResult<EmbedBatch>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(lists.len());
            for texts in lists {
                out.push(self.embed(key, texts).await);
            }
            out
        })
    }

    /// Texts the model behind this port truncated at its length limit so
    /// far (counted when embedded, not when served from a cache).
    fn truncated_texts(&self) -> u64 {
        0
    }

    /// Called once at the end of a run, e.g. to save a cache file.
    fn finish(&self) -> Result<()> {
        Ok(())
    }

    /// Offers vectors obtained elsewhere (a trace being resumed) to this
    /// port's cache, so that the ticks after them see the cache they would
    /// have seen in an uninterrupted run.
    fn warm(&self, _key: &EmbedKey, _texts: &[String], _vectors: &[Arc<[f32]>]) {}
}
