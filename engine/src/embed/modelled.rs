//! A provider modelled on a hosted API, for benches and tests: latency per
//! request plus per token, a cap on requests in flight, and seeded faults.
//! Whether a fault fires is decided from (seed, request digest, attempt),
//! never from call order, so the same run fails the same way every time.
//! Vectors are the local embedder's.

use super::local::embed_text;
use super::provider::{EmbedProvider, FailureKind, ProviderError, ProviderReply, ProviderRequest};
use crate::cost::estimate_tokens;
use crate::digest::DigestWriter;
use crate::rng::Stream;
use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Settings of the modelled provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelledSettings {
    /// Latency of every request, in milliseconds. Default 40.
    pub latency_ms: f64,
    /// Extra latency per input token, in microseconds. Default 2.
    pub latency_per_token_us: f64,
    /// Requests the provider serves at once; more wait. Default 4.
    pub concurrency: usize,
    /// Probability that an attempt gets a 429. Default 0.
    pub rate_limited: f64,
    /// Probability of a 5xx. Default 0.
    pub server_error: f64,
    /// Probability of a timeout. Default 0.
    pub timeout: f64,
    /// Probability of a permanent error (never retried). Default 0.
    pub permanent: f64,
    /// Retry-after sent with a 429, in milliseconds. Default 50.
    pub retry_after_ms: u64,
    /// Seed of the fault draws. Default 0.
    pub seed: u64,
}

impl Default for ModelledSettings {
    fn default() -> Self {
        ModelledSettings {
            latency_ms: 40.0,
            latency_per_token_us: 2.0,
            concurrency: 4,
            rate_limited: 0.0,
            server_error: 0.0,
            timeout: 0.0,
            permanent: 0.0,
            retry_after_ms: 50,
            seed: 0,
        }
    }
}

/// The modelled provider.
pub struct ModelledProvider {
    settings: ModelledSettings,
    slots: tokio::sync::Semaphore,
}

impl ModelledProvider {
    /// A provider with these settings.
    pub fn new(settings: ModelledSettings) -> Self {
        let slots = tokio::sync::Semaphore::new(settings.concurrency.max(1));
        ModelledProvider { settings, slots }
    }

    /// The fault (if any) of this attempt of this request.
    pub fn fault(&self, digest: &[u8; 32], attempt: u32) -> Option<FailureKind> {
        let key =
            DigestWriter::new("modelled provider fault v1").u64(self.settings.seed).u32(attempt).bytes(digest).finish();
        let mut s = Stream::from_key(key.0);
        let x = s.unit();
        let st = &self.settings;
        let mut edge = st.rate_limited;
        if x < edge {
            return Some(FailureKind::RateLimited { retry_after_ms: Some(st.retry_after_ms) });
        }
        edge += st.server_error;
        if x < edge {
            return Some(FailureKind::Server);
        }
        edge += st.timeout;
        if x < edge {
            return Some(FailureKind::Timeout);
        }
        edge += st.permanent;
        (x < edge).then_some(FailureKind::Permanent)
    }
}

impl EmbedProvider for ModelledProvider {
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            let _slot = self.slots.acquire().await.map_err(|_| ProviderError {
                kind: FailureKind::Permanent,
                message: "modelled provider closed".into(),
                billed_tokens: None,
            })?;
            let tokens: u64 = req.texts.iter().map(|t| estimate_tokens(t)).sum();
            let ms = self.settings.latency_ms + self.settings.latency_per_token_us * tokens as f64 / 1000.0;
            tokio::time::sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
            if let Some(kind) = self.fault(&req.digest, req.attempt) {
                // A 5xx after processing bills its tokens, as hosted APIs can.
                let billed_tokens = matches!(kind, FailureKind::Server).then_some(tokens);
                return Err(ProviderError { kind, message: format!("modelled {kind:?}"), billed_tokens });
            }
            Ok(ProviderReply {
                vectors: req.texts.iter().map(|t| embed_text(t, req.dim)).collect(),
                billed_tokens: Some(tokens),
            })
        })
    }
}
