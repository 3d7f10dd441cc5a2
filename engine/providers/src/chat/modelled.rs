//! The modelled chat upstream ([`ModelledChat`]): the scripted replies
//! behind modelled latency and seeded faults.

use super::upstream::{ChatUpstream, TokenUsage, UpstreamCall, UpstreamReply};
use crate::clock::{Sleeper, TokioSleeper};
use crate::upstream::{FailureKind, ProviderError};
use engine::chat::{ChatPort, ScriptedPersonaModel};
use engine::cost::estimate_tokens;
use engine::embed::upstream::ModelledSettings;
use engine::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
/// The scripted persona model's replies behind modelled latency (per
/// request and per token), a cap on requests served at once, and seeded
/// 429/5xx/timeout faults decided from (request digest, attempt).
pub struct ModelledChat {
    scripted: ScriptedPersonaModel,
    settings: ModelledSettings,
    slots: tokio::sync::Semaphore,
    clock: Arc<dyn Sleeper>,
}

impl ModelledChat {
    /// The modelled upstream.
    pub fn new(scripted: ScriptedPersonaModel, settings: ModelledSettings) -> ModelledChat {
        let slots = tokio::sync::Semaphore::new(settings.concurrency.max(1));
        ModelledChat { scripted, settings, slots, clock: Arc::new(TokioSleeper::new()) }
    }

    /// The same upstream spending its latency on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Sleeper>) -> Self {
        self.clock = clock;
        self
    }
}

impl ChatUpstream for ModelledChat {
    fn endpoints(&self) -> usize {
        1
    }

    fn label(&self, _: usize) -> String {
        "modelled".into()
    }

    fn call<'a>(
        &'a self,
        _: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>> {
        Box::pin(async move {
            let closed = || ProviderError {
                kind: FailureKind::Permanent,
                message: "modelled provider closed".into(),
                billed_tokens: None,
            };
            let _slot = self.slots.acquire().await.map_err(|_| closed())?;
            let reply = self.scripted.complete(call.request).await.map_err(|_| closed())?;
            let tokens = estimate_tokens(&call.request.prompt) + estimate_tokens(&reply.text);
            let ms = self.settings.latency_ms + self.settings.latency_per_token_us * tokens as f64 / 1000.0;
            self.clock.sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
            if let Some(kind) = crate::upstream::fault(&self.settings, &call.request.digest().0, call.attempt) {
                return Err(ProviderError { kind, message: format!("modelled {kind:?}"), billed_tokens: None });
            }
            let usage =
                Some(TokenUsage { prompt: reply.spend.input_tokens, completion: reply.spend.output_tokens, cached: 0 });
            Ok(UpstreamReply { text: reply.text, usage, model: Some(call.request.model.clone()) })
        })
    }
}
