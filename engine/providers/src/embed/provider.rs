//! Upstream embedding providers: one physical request at a time. The
//! inference client ([`super::client`]) batches, retries, caches and bills
//! around them.

use crate::upstream::ProviderError;
use engine::BoxFuture;

/// One physical request.
#[derive(Debug, Clone, Copy)]
pub struct ProviderRequest<'a> {
    /// Model name.
    pub model: &'a str,
    /// Vector dimension asked for.
    pub dim: usize,
    /// The texts, in order.
    pub texts: &'a [String],
    /// Attempt number, from 0.
    pub attempt: u32,
    /// Digest of the request's content (model, dim, texts), for seeded
    /// fault injection and jitter that never depend on call order.
    pub digest: [u8; 32],
}

/// A provider's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderReply {
    /// One vector per text.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens the provider reports having billed; `None` means the
    /// client's estimate is billed.
    pub billed_tokens: Option<u64>,
}

/// An upstream embedding service.
pub trait EmbedProvider: Send + Sync {
    /// Embeds one physical request.
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>>;

    /// Texts this provider truncated at its model's limit so far (0 for a
    /// provider that never truncates, or cannot tell).
    fn truncated_texts(&self) -> u64 {
        0
    }
}
