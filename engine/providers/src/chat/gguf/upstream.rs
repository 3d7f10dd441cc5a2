//! The `gguf` chat upstream ([`GgufChat`]): requests decoded on tokio's
//! blocking pool over a loaded model, sharing forward passes through the
//! batcher and prompt prefixes through the cache.

use super::batcher::{self, Batcher};
use super::cache::PrefixCache;
use super::error::GgufError;
use super::model::GgufModel;
use super::{decode, options};
use crate::chat::upstream::{
    ChatUpstream, TokenUsage, UpstreamCall, UpstreamReply, UpstreamWeighed, WeighError, Weighing,
};
use crate::upstream::{FailureKind, ProviderError};
use engine::config::{ChatSection, GgufSettings};
use engine::BoxFuture;
use std::sync::Arc;

/// The upstream over a loaded model.
pub struct GgufChat {
    model: Arc<GgufModel>,
    cache: Arc<PrefixCache>,
    slots: Arc<tokio::sync::Semaphore>,
    batcher: Batcher,
    settings: GgufSettings,
    temperature: f64,
    max_tokens: usize,
}

impl std::fmt::Debug for GgufChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufChat").field("model", &self.model).finish_non_exhaustive()
    }
}

impl GgufChat {
    /// The upstream for `[chat]` over `model`.
    pub fn new(model: Arc<GgufModel>, section: &ChatSection) -> GgufChat {
        let s = &section.gguf;
        GgufChat {
            model,
            cache: Arc::new(PrefixCache::new(s.prefix_cache_mib.saturating_mul(1 << 20))),
            slots: Arc::new(tokio::sync::Semaphore::new(s.batch.max(1))),
            batcher: Batcher::new(s.batch),
            settings: s.clone(),
            temperature: section.temperature,
            max_tokens: section.max_output_tokens.clamp(1, 1 << 16) as usize,
        }
    }

    /// Its prefix cache (for benches and tests).
    pub fn cache(&self) -> &PrefixCache {
        &self.cache
    }

    /// Its forward passes, shared by the requests decoding at once.
    pub fn batcher(&self) -> &Batcher {
        &self.batcher
    }

    /// The reply to `request` sampled with `seed`, on this thread, its
    /// passes shared with the other requests decoding.
    pub fn decode(
        &self,
        request: &engine::chat::ChatRequest,
        seed: u64,
    ) -> std::result::Result<decode::Decoded, GgufError> {
        let member = self.batcher.join();
        self.decoder_in(Some(&member)).reply(request, seed)
    }

    /// The probability of each of `request`'s options at its answer slot,
    /// on this thread ([`options`]), its passes shared with the other
    /// requests decoding.
    pub fn option_probabilities(
        &self,
        request: &engine::chat::ChatRequest,
    ) -> std::result::Result<options::Weighed, GgufError> {
        let member = self.batcher.join();
        self.decoder_in(Some(&member)).option_probabilities(request)
    }

    /// The decoder over this model and these settings, running each pass
    /// alone.
    pub fn decoder(&self) -> decode::Decoder<'_> {
        self.decoder_in(None)
    }

    /// The decoder whose passes `member` shares ([`super::batcher`]), or runs alone.
    pub fn decoder_in<'a>(&'a self, member: Option<&'a batcher::Member<'a>>) -> decode::Decoder<'a> {
        let m = &self.model;
        decode::Decoder {
            model: &m.transformer,
            vocab: &m.vocab,
            factory: &m.factory,
            cache: &self.cache,
            model_sha256: &m.sha256,
            kv_bytes_per_token: m.kv_bytes_per_token,
            temperature: self.temperature,
            top_p: self.settings.top_p,
            max_tokens: self.max_tokens,
            layout: self.settings.layout,
            free: &m.free,
            closer: &m.closer,
            member,
        }
    }
}

impl ChatUpstream for Arc<GgufChat> {
    fn endpoints(&self) -> usize {
        1
    }

    fn option_probabilities<'a>(
        &'a self,
        request: &'a engine::chat::ChatRequest,
    ) -> BoxFuture<'a, Option<UpstreamWeighed>> {
        Box::pin(async move {
            let failed = |message: String| ProviderError { kind: FailureKind::Permanent, message, billed_tokens: None };
            let weighed = async {
                let _slot = self.slots.acquire().await.map_err(|_| failed("gguf: the model closed".into()))?;
                let (me, request) = (Arc::clone(self), request.clone());
                let w = tokio::task::spawn_blocking(move || GgufChat::option_probabilities(&me, &request))
                    .await
                    .map_err(|e| failed(format!("gguf: the weighing task failed ({e})")))?
                    .map_err(|e| failed(format!("gguf {}: {e}", self.model.name)))?;
                Ok(Weighing {
                    probabilities: w.probabilities,
                    mass: w.mass,
                    raised: None,
                    prompt_tokens: w.prompt_tokens,
                    completion_tokens: 0,
                })
            };
            Some(weighed.await.map_err(WeighError::Failed))
        })
    }

    fn label(&self, _: usize) -> String {
        format!("gguf:{}", self.model.name)
    }

    fn call<'a>(
        &'a self,
        _: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>> {
        Box::pin(async move {
            let failed = |message: String| ProviderError { kind: FailureKind::Permanent, message, billed_tokens: None };
            let _slot = self.slots.acquire().await.map_err(|_| failed("gguf: the model closed".into()))?;
            let me = Arc::clone(self);
            let request = call.request.clone();
            let seed = call.seed;
            let decoded = tokio::task::spawn_blocking(move || me.decode(&request, seed))
                .await
                .map_err(|e| failed(format!("gguf: the decoding task failed ({e})")))?
                .map_err(|e| failed(format!("gguf {}: {e}", self.model.name)))?;
            // The prefix cache's hits depend on which request came first,
            // so they are not billed as cached (the price is 0 anyway):
            // the spend, like the reply, is a function of the request.
            let usage = TokenUsage { prompt: decoded.prompt_tokens, completion: decoded.completion_tokens, cached: 0 };
            Ok(UpstreamReply { text: decoded.text, usage: Some(usage), model: Some(self.model.name.clone()) })
        })
    }
}
