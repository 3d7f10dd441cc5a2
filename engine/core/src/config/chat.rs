//! `[chat]`: the chat model, its provider and the guardrails around it.

use super::{bad, Bad, BatchSettings, ChatMode, RawConfig};
use crate::embed::upstream::{HttpSettings, ModelledSettings};
use serde::{Deserialize, Serialize};

/// The chat model and the guardrails around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatSection {
    /// Who answers. Default [`ChatProvider::Scripted`]: nothing is live
    /// unless this says so.
    pub provider: ChatProvider,
    /// Model name. Default `scripted-persona-v1`, the embedded scripted
    /// model; a scripted name needs a scripted or modelled provider, any
    /// other name the `openai` provider.
    pub model: String,
    /// Chat requests in flight at once. Default 64.
    pub concurrency: usize,
    /// Probability that the scripted model returns an unparseable reply, to
    /// exercise guardrail retries. Default 0.03.
    pub malformed_rate: f64,
    /// Retries after an unparseable reply before the job fails. Default 2.
    pub max_guardrail_retries: u32,
    /// Prompt tokens above which a job is refused before any chat call.
    /// Default 2048.
    pub context_budget_tokens: u64,
    /// Sampling temperature sent to a live model. Default 0.7.
    pub temperature: f64,
    /// Most tokens a live model may generate per reply. Default 400.
    pub max_output_tokens: u64,
    /// How a live model is asked for the reply's fields. Default
    /// [`StructuredOutput::JsonSchema`].
    pub structured_output: StructuredOutput,
    /// Requests per minute to the chat endpoint(s), 0 for unlimited. Default 0.
    pub requests_per_minute: u32,
    /// Tokens per minute (prompt estimate plus `max_output_tokens`), 0 for
    /// unlimited. Default 0.
    pub tokens_per_minute: u64,
    /// Transport retries of a transient failure (429, 5xx, timeout).
    /// Default 3. Permanent errors (400, 401, 403, 404) are never retried.
    pub max_retries: u32,
    /// First retry backoff in milliseconds; doubles per retry. Default 500.
    pub backoff_base_ms: u64,
    /// Longest backoff in milliseconds. Default 20000.
    pub backoff_max_ms: u64,
    /// The OpenAI-compatible endpoint(s); see [`HttpSettings::chat`] for
    /// the defaults that differ from embeddings. They hold whether the
    /// section is left out or written in part.
    #[serde(default = "HttpSettings::chat", deserialize_with = "HttpSettings::deserialize_chat")]
    pub http: HttpSettings,
    /// Settings of the `modelled` provider.
    pub modelled: ModelledSettings,
    /// Online (default) or through the provider's Batch API.
    #[serde(skip_serializing_if = "ChatMode::is_online")]
    pub mode: ChatMode,
    /// `[chat.batch]`: how batches are submitted and polled.
    #[serde(skip_serializing_if = "BatchSettings::is_default")]
    pub batch: BatchSettings,
}

/// Who answers chat requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatProvider {
    /// The embedded scripted persona and agent models: no network, no key.
    #[default]
    Scripted,
    /// The scripted replies behind modelled latency, concurrency and seeded
    /// faults, for tests and benches.
    Modelled,
    /// An OpenAI-compatible `/chat/completions` endpoint (OpenAI, vLLM,
    /// llama.cpp's server, Ollama) or a fleet of them; see `[chat.http]`.
    Openai,
}

/// How a live model is asked for structured replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `response_format` with a JSON Schema of the reply (fields, types,
    /// ranges).
    #[default]
    JsonSchema,
    /// `response_format: {"type": "json_object"}`; the prompt names the fields.
    JsonObject,
    /// No `response_format`: the prompt asks for the JSON object in words and
    /// the first JSON object in the reply is parsed (for servers that
    /// reject `response_format`).
    None,
}

/// Whether a chat model name is one of the embedded scripted models.
pub fn is_scripted_model(name: &str) -> bool {
    name.starts_with("scripted-")
}

impl Default for ChatSection {
    fn default() -> Self {
        ChatSection {
            model: "scripted-persona-v1".into(),
            concurrency: 64,
            malformed_rate: 0.03,
            max_guardrail_retries: 2,
            context_budget_tokens: 2048,
            provider: ChatProvider::Scripted,
            temperature: 0.7,
            max_output_tokens: 400,
            structured_output: StructuredOutput::JsonSchema,
            requests_per_minute: 0,
            tokens_per_minute: 0,
            max_retries: 3,
            backoff_base_ms: 500,
            backoff_max_ms: 20_000,
            http: HttpSettings::chat(),
            modelled: ModelledSettings::default(),
            mode: ChatMode::Online,
            batch: BatchSettings::default(),
        }
    }
}

impl RawConfig {
    /// `[chat]`.
    pub(super) fn check_chat(&self) -> std::result::Result<(), Bad> {
        let c = &self.chat;
        if c.concurrency == 0 {
            return Err(bad("chat.concurrency", "must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&c.malformed_rate) {
            return Err(bad("chat.malformed_rate", format!("must be in [0, 1], got {}", c.malformed_rate)));
        }
        if c.model.trim().is_empty() {
            return Err(bad("chat.model", "must not be empty".into()));
        }
        match (c.provider, is_scripted_model(&c.model)) {
            (ChatProvider::Openai, true) => {
                let cause = format!("{:?} is a scripted model; the openai provider needs a real model name", c.model);
                return Err(bad("chat.model", cause));
            }
            (ChatProvider::Scripted | ChatProvider::Modelled, false) => {
                let cause = format!(
                    "{:?} is not a scripted model: set chat.provider = \"openai\" (and [chat.http]) to call it",
                    c.model
                );
                return Err(bad("chat.model", cause));
            }
            (ChatProvider::Openai, false) | (ChatProvider::Scripted | ChatProvider::Modelled, true) => {}
        }
        if c.provider == ChatProvider::Openai && c.http.endpoints().iter().all(|u| u.trim().is_empty()) {
            return Err(bad("chat.http.base_url", "the openai provider needs a base URL (or base_urls)".into()));
        }
        if !(c.temperature.is_finite() && (0.0..=2.0).contains(&c.temperature)) {
            return Err(bad("chat.temperature", format!("must be between 0 and 2, got {}", c.temperature)));
        }
        if c.max_output_tokens == 0 {
            return Err(bad("chat.max_output_tokens", "must be at least 1".into()));
        }
        if c.backoff_base_ms > c.backoff_max_ms {
            return Err(bad("chat.backoff_base_ms", "must not exceed chat.backoff_max_ms".into()));
        }
        if c.mode == ChatMode::Batch {
            if c.provider != ChatProvider::Openai {
                return Err(bad("chat.mode", "batch mode needs chat.provider = \"openai\" (a Batch API)".into()));
            }
            if c.http.endpoints().len() > 1 {
                let cause = "batch mode submits to one server: give chat.http.base_url, not several".into();
                return Err(bad("chat.http.base_urls", cause));
            }
        }
        if let Some((field, cause)) = c.batch.problem() {
            return Err(bad(field, cause));
        }
        Ok(())
    }
}
