//! `[chat]`: the chat model, its provider and the guardrails around it.

use super::{bad, Bad, BatchSettings, ChatMode, KernelLevel, RawConfig};
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
    /// `[chat.gguf]`: the local model of the `gguf` provider.
    #[serde(skip_serializing_if = "GgufSettings::is_unset")]
    pub gguf: GgufSettings,
}

/// How the `gguf` provider lays out a reply that has free text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GgufLayout {
    /// The whole reply is decoded under its JSON Schema, first token to last.
    Schema,
    /// The free text (a reaction, a reason, an insight, a point) is written
    /// first, as plain text in answer to the prompt; the JSON object is then
    /// decoded under its schema with that text in place, so only the
    /// numbers are chosen under the constraint.
    #[default]
    FreeText,
}

/// `[chat.gguf] batch` unless a config says otherwise.
pub const DEFAULT_GGUF_BATCH: usize = 8;

fn is_default_batch(batch: &usize) -> bool {
    *batch == DEFAULT_GGUF_BATCH
}

/// Settings of the `gguf` provider: a chat model in a GGUF file, run on the
/// CPU on the project's own kernels, every reply decoded under its
/// purpose's JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GgufSettings {
    /// The `.gguf` file (`bash scripts/fetch-model NAME` fetches one). In a
    /// config file, a relative path is relative to the file's directory.
    /// Stays out of [`crate::config::Config::hash`]: the SHA-256 names the
    /// model.
    pub model_file: String,
    /// SHA-256 of the file, in hex. When given, another file is refused;
    /// when empty it is filled at load and recorded in the trace header.
    pub sha256: String,
    /// Nucleus sampling: the smallest set of tokens whose probabilities
    /// reach this mass is sampled from. Default 0.95; 1 samples from all.
    /// `[chat] temperature = 0` is greedy whatever this says.
    pub top_p: f64,
    /// How a reply with free text is decoded. Default
    /// [`GgufLayout::FreeText`].
    pub layout: GgufLayout,
    /// Memory for the key/value caches of prompt prefixes (a persona's
    /// header and instructions), in MiB; 0 turns the cache off. Default
    /// 512. Replies are the same bytes with or without it.
    pub prefix_cache_mib: u64,
    /// The retired `workers` key (replaced by `batch`): a config file that
    /// writes it is refused by name. Kept so that a trace header recorded
    /// before reads back, and written in the canonical form at its old
    /// default so that digests recorded before still verify.
    #[doc(hidden)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Requests decoded at once, whose rows share each forward pass
    /// (continuous batching; each has its own key/value cache, the weights
    /// are shared). Default 8. Operational: the batch changes no bit of a
    /// reply.
    #[serde(skip_serializing_if = "is_default_batch")]
    pub batch: usize,
    /// Which compiled form of the kernels runs. Default
    /// [`KernelLevel::Auto`]. Operational: every level gives the same bits.
    #[serde(skip_serializing_if = "KernelLevel::is_auto")]
    pub kernel: KernelLevel,
}

impl Default for GgufSettings {
    fn default() -> Self {
        GgufSettings {
            model_file: String::new(),
            sha256: String::new(),
            top_p: 0.95,
            layout: GgufLayout::FreeText,
            prefix_cache_mib: 512,
            workers: None,
            batch: DEFAULT_GGUF_BATCH,
            kernel: KernelLevel::Auto,
        }
    }
}

impl GgufSettings {
    /// Whether nothing differs from the defaults (the section is then left
    /// out of the canonical form, so configs without it hash as before).
    pub fn is_unset(&self) -> bool {
        *self == GgufSettings::default()
    }

    /// The error for a config file that writes the retired `workers` key,
    /// naming `batch`, the key that replaced it; `None` when it does not.
    pub fn retired_key(&self) -> Option<(&'static str, String)> {
        let workers = self.workers?;
        Some((
            "chat.gguf.workers",
            format!(
                "`workers = {workers}` was replaced by `batch` (requests decoded at once, sharing each forward \
                 pass; default {DEFAULT_GGUF_BATCH}): write `batch = {}` instead",
                workers.max(1)
            ),
        ))
    }
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
    /// A chat model in a local GGUF file, run on the CPU; see `[chat.gguf]`.
    Gguf,
}

impl ChatProvider {
    /// Whether replies come from a real model (a server or a local file),
    /// not from the scripted models.
    pub fn is_real(self) -> bool {
        match self {
            ChatProvider::Openai | ChatProvider::Gguf => true,
            ChatProvider::Scripted | ChatProvider::Modelled => false,
        }
    }
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

impl GgufSettings {
    /// The first setting that is out of range, and why.
    fn problem(&self) -> Option<(&'static str, String)> {
        if self.model_file.trim().is_empty() {
            let cause = "the gguf provider needs the model's file; `bash scripts/fetch-model smollm2` fetches SmolLM2-135M-Instruct into models/ (`qwen2.5-coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct)";
            return Some(("chat.gguf.model_file", cause.into()));
        }
        if !(self.top_p.is_finite() && self.top_p > 0.0 && self.top_p <= 1.0) {
            return Some(("chat.gguf.top_p", format!("must be in (0, 1], got {}", self.top_p)));
        }
        if !(self.sha256.is_empty() || (self.sha256.len() == 64 && self.sha256.bytes().all(|b| b.is_ascii_hexdigit())))
        {
            return Some(("chat.gguf.sha256", format!("must be 64 hex digits, got {:?}", self.sha256)));
        }
        if !(1..=64).contains(&self.batch) {
            return Some(("chat.gguf.batch", format!("must be between 1 and 64, got {}", self.batch)));
        }
        None
    }
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
            gguf: GgufSettings::default(),
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
            (ChatProvider::Openai | ChatProvider::Gguf, true) => {
                let cause = format!(
                    "{:?} is a scripted model; the {} provider needs a real model name",
                    c.model,
                    if c.provider == ChatProvider::Gguf { "gguf" } else { "openai" }
                );
                return Err(bad("chat.model", cause));
            }
            (ChatProvider::Scripted | ChatProvider::Modelled, false) => {
                let cause = format!(
                    "{:?} is not a scripted model: set chat.provider = \"openai\" (and [chat.http]) to call it",
                    c.model
                );
                return Err(bad("chat.model", cause));
            }
            (ChatProvider::Openai | ChatProvider::Gguf, false)
            | (ChatProvider::Scripted | ChatProvider::Modelled, true) => {}
        }
        if c.provider == ChatProvider::Gguf {
            if let Some((field, cause)) = c.gguf.problem() {
                return Err(bad(field, cause));
            }
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
