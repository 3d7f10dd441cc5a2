//! A provider modelled on a hosted API, for benches and tests: latency per
//! request plus per token, a cap on requests in flight, and seeded faults.
//! Whether a fault fires is decided from (seed, request digest, attempt),
//! never from call order, so the same run fails the same way every time.
//! Vectors are the local embedder's.

use super::provider::{EmbedProvider, ProviderReply, ProviderRequest};
use crate::clock::{Sleeper, TokioSleeper};
use crate::upstream::{fault, FailureKind, ProviderError};
use engine::cost::estimate_tokens;
use engine::embed::local::embed_text;
use engine::embed::upstream::ModelledSettings;
use engine::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// The modelled provider.
pub struct ModelledProvider {
    settings: ModelledSettings,
    slots: tokio::sync::Semaphore,
    /// Where the latency is spent: real time by default.
    clock: Arc<dyn Sleeper>,
}

impl ModelledProvider {
    /// A provider with these settings.
    pub fn new(settings: ModelledSettings) -> Self {
        let slots = tokio::sync::Semaphore::new(settings.concurrency.max(1));
        ModelledProvider { settings, slots, clock: Arc::new(TokioSleeper::new()) }
    }

    /// The same provider spending its latency on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Sleeper>) -> Self {
        self.clock = clock;
        self
    }

    /// The fault (if any) of this attempt of this request.
    pub fn fault(&self, digest: &[u8; 32], attempt: u32) -> Option<FailureKind> {
        fault(&self.settings, digest, attempt)
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
            self.clock.sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
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
