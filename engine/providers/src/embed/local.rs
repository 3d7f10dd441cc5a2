//! The local provider: the engine's hashed embedder
//! ([`engine::embed::local::embed_text`]) behind the provider trait. It
//! answers at once, with no network and no key.

use super::provider::{EmbedProvider, ProviderReply, ProviderRequest};
use crate::upstream::ProviderError;
use engine::embed::local::embed_text;
use engine::BoxFuture;

/// The local embedding provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProvider;

impl EmbedProvider for LocalProvider {
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        let vectors = req.texts.iter().map(|t| embed_text(t, req.dim)).collect();
        Box::pin(std::future::ready(Ok(ProviderReply { vectors, billed_tokens: None })))
    }
}
