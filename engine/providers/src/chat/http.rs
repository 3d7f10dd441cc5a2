//! An OpenAI-compatible `/chat/completions` upstream ([`HttpChat`]): one
//! endpoint or a fleet, structured replies under the purpose's JSON Schema,
//! the answer token's logprobs weighed as options.

use super::upstream::{ChatUpstream, TokenUsage, UpstreamCall, UpstreamReply, UpstreamWeighed, WeighError, Weighing};
use crate::upstream::ProviderError;
use engine::chat::schema::{instruction, schema_for, schema_name_for};
use engine::chat::ChatRequest;
use engine::config::{ChatSection, StructuredOutput};
use engine::embed::upstream::HttpSettings;
use engine::error::{Error, Result};
use engine::BoxFuture;
use serde::Deserialize;
use std::time::Duration;
/// An OpenAI-compatible `/chat/completions` endpoint or fleet. The key is
/// read from the environment once, sent in the `Authorization` header, and
/// never logged, traced or reported.
pub struct HttpChat {
    pub(crate) client: reqwest::Client,
    urls: Vec<String>,
    pub(crate) key: Option<String>,
    temperature: f64,
    max_tokens: u64,
    structured: StructuredOutput,
}

impl std::fmt::Debug for HttpChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| engine::chat::redact_url(u)).collect();
        f.debug_struct("HttpChat").field("urls", &urls).field("key", &self.key.as_ref().map(|_| "<set>")).finish()
    }
}

fn config_err(field: &str, cause: String) -> Error {
    Error::Config { source_name: "configuration".into(), field: format!("chat.http.{field}"), cause }
}

/// The key named by `api_key_env`, read from the environment (none when
/// the name is empty: a local server).
pub(crate) fn api_key(settings: &HttpSettings, section: &str) -> Result<Option<String>> {
    if settings.api_key_env.is_empty() {
        return Ok(None);
    }
    match std::env::var(&settings.api_key_env) {
        Ok(k) if !k.is_empty() => Ok(Some(k)),
        _ => Err(Error::Config {
            source_name: "configuration".into(),
            field: format!("{section}.api_key_env"),
            cause: format!("the environment variable {} is not set", settings.api_key_env),
        }),
    }
}

impl HttpChat {
    /// The upstream for `[chat]`, reading the key from the environment.
    pub fn new(section: &ChatSection) -> Result<HttpChat> {
        let h = &section.http;
        let mut urls = Vec::new();
        for base in h.endpoints() {
            let base = base.trim_end_matches('/');
            if !(base.starts_with("https://") || base.starts_with("http://")) {
                return Err(config_err("base_url", format!("must be an http:// or https:// URL, got {base:?}")));
            }
            urls.push(format!("{base}/chat/completions"));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(h.connect_timeout_ms))
            .read_timeout(Duration::from_millis(h.read_timeout_ms))
            .timeout(Duration::from_millis(h.request_timeout_ms))
            .build()
            .map_err(|e| config_err("base_url", format!("cannot build an HTTP client: {e}")))?;
        Ok(HttpChat {
            client,
            urls,
            key: api_key(h, "chat.http")?,
            temperature: section.temperature,
            max_tokens: section.max_output_tokens,
            structured: section.structured_output,
        })
    }

    /// The `/chat/completions` request body of `call`.
    pub(crate) fn body(&self, call: &UpstreamCall<'_>) -> serde_json::Value {
        let r = call.request;
        let prompt = match self.structured {
            StructuredOutput::JsonSchema => r.prompt.to_string(),
            StructuredOutput::JsonObject | StructuredOutput::None => {
                format!("{}\n\n{}", r.prompt, instruction(r))
            }
        };
        let mut body = serde_json::json!({
            "model": r.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": call.seed,
        });
        let format = match self.structured {
            StructuredOutput::JsonSchema => Some(serde_json::json!({
                "type": "json_schema",
                "json_schema": {"name": schema_name_for(r), "schema": schema_for(r)},
            })),
            StructuredOutput::JsonObject => Some(serde_json::json!({"type": "json_object"})),
            StructuredOutput::None => None,
        };
        if let Some(f) = format {
            body["response_format"] = f;
        }
        body
    }
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

impl Completion {
    fn into_reply(self) -> UpstreamReply {
        let usage = self.usage.as_ref().and_then(Usage::tokens);
        let text = self.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
        UpstreamReply { text, usage, model: self.model }
    }
}

/// A `/chat/completions` answer as a Batch API output line carries it.
pub(crate) fn parse_completion(body: serde_json::Value) -> std::result::Result<UpstreamReply, String> {
    serde_json::from_value::<Completion>(body).map(Completion::into_reply).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    logprobs: Option<ChoiceLogprobs>,
}

#[derive(Deserialize)]
struct ChoiceLogprobs {
    #[serde(default)]
    content: Option<Vec<TokenLogprob>>,
}

#[derive(Deserialize)]
struct TokenLogprob {
    #[serde(default)]
    top_logprobs: Vec<TopLogprob>,
}

#[derive(Deserialize)]
struct TopLogprob {
    token: String,
    logprob: f64,
}

/// The most alternatives OpenAI's `top_logprobs` returns.
const TOP_LOGPROBS: u32 = 20;

/// The options' probabilities from the answer token's `top_logprobs`: a
/// token is an option when, leading whitespace trimmed, it is that
/// option's number (` 4` and `4` both count for 4). Options missing from
/// the list share the mass the list leaves unseen evenly; then the options
/// are renormalised. Also the mass the listed options had.
fn options_from_top(top: &[TopLogprob], k: usize) -> (Vec<f64>, f64) {
    let mut p = vec![0.0; k];
    let mut listed = 0.0;
    for t in top {
        let share = t.logprob.exp();
        listed += share;
        if let Ok(n) = t.token.trim_start().parse::<usize>() {
            if (1..=k).contains(&n) && !t.token.trim_start().starts_with('0') {
                p[n - 1] += share;
            }
        }
    }
    let mass: f64 = p.iter().sum();
    let missing = p.iter().filter(|x| **x == 0.0).count();
    if missing > 0 {
        let each = (1.0 - listed).max(0.0) / missing as f64;
        p.iter_mut().filter(|x| **x == 0.0).for_each(|x| *x = each);
    }
    let total: f64 = p.iter().sum();
    if total > 0.0 {
        p.iter_mut().for_each(|x| *x /= total);
    }
    (p, mass)
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// OpenAI, vLLM and llama.cpp's server put the cached part here.
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Usage {
    /// The counts, when both prompt and completion tokens are given.
    fn tokens(&self) -> Option<TokenUsage> {
        let cached = self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
        Some(TokenUsage { prompt: self.prompt_tokens?, completion: self.completion_tokens?, cached })
    }
}

/// Advice for a server that rejects structured replies.
fn response_format_hint(status: u16, body: &str) -> Option<&'static str> {
    (status == 400 && body.contains("response_format"))
        .then_some(" (the server rejects response_format: try chat.structured_output = \"none\")")
}

impl HttpChat {
    /// The request asking for the answer token alone, with its
    /// alternatives' log-probabilities.
    fn weigh_body(&self, request: &ChatRequest) -> serde_json::Value {
        // A slot other than the survey's answer label (a reaction's lines up
        // to `INTENT:`) is shown as the reply begun.
        let begun = match request.slot.as_deref() {
            Some(slot) if slot != engine::chat::ANSWER_SLOT => format!("\nYour reply so far:\n{slot}\n"),
            Some(_) | None => String::new(),
        };
        let prompt = format!(
            "{}\n{begun}Reply with the number of your option only, from 1 to {}.",
            request.prompt.trim_end(),
            request.options
        );
        serde_json::json!({
            "model": request.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": 1,
            "logprobs": true,
            "top_logprobs": TOP_LOGPROBS,
        })
    }
}

impl ChatUpstream for HttpChat {
    fn option_probabilities<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Option<UpstreamWeighed>> {
        Box::pin(async move {
            let url = &self.urls[0];
            let body = self.weigh_body(request);
            let reply: Completion =
                match crate::http::post_json(&self.client, url, self.key.as_deref(), &body, |_, _| None).await {
                    Ok(r) => r,
                    Err(e) => return Some(Err(WeighError::Failed(e))),
                };
            let usage = reply.usage.as_ref().and_then(Usage::tokens);
            let top = reply
                .choices
                .first()
                .and_then(|c| c.logprobs.as_ref())
                .and_then(|l| l.content.as_ref())
                .and_then(|c| c.first())
                .map(|t| &t.top_logprobs)
                .filter(|t| !t.is_empty());
            let Some(top) = top else {
                return Some(Err(WeighError::Unsupported(format!(
                    "the server at {} returned no logprobs for the answer token, which mode \"probabilities\" \
                     reads; use mode \"verbalized\" (the persona states its shares) or \"sample\" \
                     (--answer-mode verbalized|sample) with this server",
                    engine::chat::redact_url(url)
                ))));
            };
            let (probabilities, mass) = options_from_top(top, usize::from(request.options));
            Some(Ok(Weighing {
                probabilities,
                mass,
                prompt_tokens: usage.map_or(0, |u| u.prompt),
                completion_tokens: usage.map_or(1, |u| u.completion),
            }))
        })
    }

    fn endpoints(&self) -> usize {
        self.urls.len()
    }

    fn label(&self, e: usize) -> String {
        self.urls.get(e).map(|u| engine::chat::redact_url(u)).unwrap_or_default()
    }

    fn call<'a>(
        &'a self,
        endpoint: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>> {
        Box::pin(async move {
            let url = &self.urls[endpoint.min(self.urls.len() - 1)];
            let reply: Completion =
                crate::http::post_json(&self.client, url, self.key.as_deref(), &self.body(&call), response_format_hint)
                    .await?;
            Ok(reply.into_reply())
        })
    }
}
