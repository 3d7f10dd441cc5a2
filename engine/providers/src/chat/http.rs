//! An OpenAI-compatible `/chat/completions` upstream ([`HttpChat`]): one
//! endpoint or a fleet, structured replies under the purpose's JSON Schema,
//! the answer token's logprobs weighed as options, asked again with the
//! options' tokens raised by `logit_bias` when the top alternatives leave
//! them out.

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
    /// `[answers] min_option_mass`: below it, the options are weighed again
    /// with their tokens raised.
    min_option_mass: f64,
    /// Each option label's token on this server, as its `/tokenize` gave
    /// it (`None`: the label is not one token), asked once per label (the
    /// lock is held while asking).
    label_tokens: tokio::sync::Mutex<std::collections::HashMap<String, Option<u64>>>,
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
            min_option_mass: engine::config::DEFAULT_MIN_OPTION_MASS,
            label_tokens: tokio::sync::Mutex::default(),
        })
    }

    /// The same upstream weighing the options again, tokens raised, when
    /// they hold less than `share` of the answer token's top alternatives
    /// (`[answers] min_option_mass`).
    pub fn with_min_option_mass(mut self, share: f64) -> HttpChat {
        self.min_option_mass = share;
        self
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
    /// llama.cpp's server, asked for `post_sampling_probs`, lists
    /// probabilities here instead.
    #[serde(default)]
    top_probs: Vec<TopProb>,
}

#[derive(Deserialize)]
struct TopLogprob {
    token: String,
    logprob: f64,
}

#[derive(Deserialize)]
struct TopProb {
    token: String,
    prob: f64,
}

impl Completion {
    /// The answer token's listed alternatives with their probabilities, in
    /// either form; `None` when the reply lists none.
    fn top_alternatives(&self) -> Option<Vec<(&str, f64)>> {
        let token = self.choices.first()?.logprobs.as_ref()?.content.as_ref()?.first()?;
        let listed: Vec<(&str, f64)> = match token.top_logprobs.is_empty() {
            false => token.top_logprobs.iter().map(|t| (t.token.as_str(), t.logprob.exp())).collect(),
            true => token.top_probs.iter().map(|t| (t.token.as_str(), t.prob)).collect(),
        };
        (!listed.is_empty()).then_some(listed)
    }
}

/// The most alternatives OpenAI's `top_logprobs` returns.
const TOP_LOGPROBS: u32 = 20;

/// The options' probabilities from the answer token's `top_logprobs`: a
/// token is an option when, leading whitespace trimmed, it is that
/// option's number (` 4` and `4` both count for 4). Options missing from
/// the list share the mass the list leaves unseen evenly; then the options
/// are renormalised. Also the mass the listed options had.
fn options_from_top(top: &[(&str, f64)], k: usize) -> (Vec<f64>, f64) {
    let mut p = vec![0.0; k];
    let mut listed = 0.0;
    for (token, share) in top {
        listed += share;
        if let Ok(n) = token.trim_start().parse::<usize>() {
            if (1..=k).contains(&n) && !token.trim_start().starts_with('0') {
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

/// The bias added to each option's label tokens when they are weighed
/// again: the most OpenAI accepts, enough to lift every option into the
/// top 20 while leaving their ratios, which a common shift cannot change.
const OPTION_BIAS: f64 = 100.0;

/// What `/tokenize` answers (llama.cpp's server, vLLM): the token ids.
#[derive(Deserialize)]
struct Tokenized {
    tokens: Vec<serde_json::Value>,
}

impl HttpChat {
    /// The options' probabilities at the answer; asked again with the
    /// options' tokens raised when they held less than `min_option_mass`.
    async fn weigh(&self, request: &ChatRequest) -> UpstreamWeighed {
        let url = &self.urls[0];
        let k = usize::from(request.options);
        let first: Completion =
            crate::http::post_json(&self.client, url, self.key.as_deref(), &self.weigh_body(request), |_, _| None)
                .await
                .map_err(WeighError::Failed)?;
        let Some(top) = first.top_alternatives() else {
            return Err(WeighError::Unsupported(format!(
                "the server at {} returned no logprobs for the answer token, which mode \"probabilities\" \
                 reads; use mode \"verbalized\" (the persona states its shares) or \"sample\" \
                 (--answer-mode verbalized|sample) with this server",
                engine::chat::redact_url(url)
            )));
        };
        let (probabilities, mass) = options_from_top(&top, k);
        let usage = first.usage.as_ref().and_then(Usage::tokens);
        let mut weighing = Weighing {
            probabilities,
            mass,
            raised: None,
            prompt_tokens: usage.map_or(0, |u| u.prompt),
            completion_tokens: usage.map_or(1, |u| u.completion),
        };
        if mass >= self.min_option_mass {
            return Ok(weighing);
        }
        let short = |why: String| {
            WeighError::Unsupported(format!(
                "the options held {mass:.4} of the answer token's top {TOP_LOGPROBS} alternatives at {}, below \
                 [answers] min_option_mass = {}, and {why}; use mode \"verbalized\" (--answer-mode verbalized), \
                 or set [answers] min_option_mass = 0 to keep the reading with the unseen mass spread evenly",
                engine::chat::redact_url(url),
                self.min_option_mass
            ))
        };
        let tokens = self.option_tokens(k).await.map_err(short)?;
        let raised: Completion = match crate::http::post_json(
            &self.client,
            url,
            self.key.as_deref(),
            &self.raised_body(request, &tokens),
            |_, _| None,
        )
        .await
        {
            Ok(r) => r,
            Err(e) if e.kind == crate::upstream::FailureKind::Permanent && e.message.contains("logit_bias") => {
                return Err(short(format!("the server refuses logit_bias, which raising them needs ({})", e.message)))
            }
            Err(mut e) => {
                // The first weighing was answered, and billed.
                e.billed_tokens = Some(e.billed_tokens.unwrap_or(0) + weighing.prompt_tokens);
                return Err(WeighError::Failed(e));
            }
        };
        let Some(top) = raised.top_alternatives() else {
            return Err(short("the server's answer with them raised listed no logprobs".into()));
        };
        let (probabilities, after) = options_from_top(&top, k);
        if after < self.min_option_mass {
            return Err(short(format!(
                "with their tokens raised by logit_bias they still held {after:.4}: the server reports the \
                 alternatives as they were before any bias"
            )));
        }
        let usage = raised.usage.as_ref().and_then(Usage::tokens);
        weighing.probabilities = probabilities;
        weighing.raised = Some(after);
        weighing.prompt_tokens += usage.map_or(0, |u| u.prompt);
        weighing.completion_tokens += usage.map_or(1, |u| u.completion);
        Ok(weighing)
    }

    /// The weighing request with the options' `tokens` raised by
    /// [`OPTION_BIAS`]. The options' shares survive the raise only when
    /// nothing else reshapes or cuts the distribution: temperature 1, and,
    /// for llama.cpp's server (which otherwise lists the alternatives as they
    /// were before any bias), its probabilities after its samplers, each
    /// sampler neutral. Other servers ignore those three fields.
    fn raised_body(&self, request: &ChatRequest, tokens: &[u64]) -> serde_json::Value {
        let mut body = self.weigh_body(request);
        let bias: serde_json::Map<String, serde_json::Value> =
            tokens.iter().map(|t| (t.to_string(), serde_json::json!(OPTION_BIAS))).collect();
        body["logit_bias"] = serde_json::Value::Object(bias);
        body["temperature"] = serde_json::json!(1.0);
        body["post_sampling_probs"] = serde_json::json!(true);
        body["top_k"] = serde_json::json!(0);
        body["top_p"] = serde_json::json!(1.0);
        body["min_p"] = serde_json::json!(0.0);
        body
    }

    /// The tokens of options 1 to `k`'s labels (`3` and ` 3`), each label
    /// that is one token on this server, from its `/tokenize` (at the
    /// server's root, where llama.cpp and vLLM serve it); asked once per
    /// label. Why not, when the server has no `/tokenize` or no label is
    /// one token.
    async fn option_tokens(&self, k: usize) -> std::result::Result<Vec<u64>, String> {
        let base = self.urls[0].trim_end_matches("/chat/completions");
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let url = format!("{root}/tokenize");
        let mut tokens = Vec::new();
        let mut known = self.label_tokens.lock().await;
        for n in 1..=k {
            for label in [n.to_string(), format!(" {n}")] {
                let token = match known.get(&label) {
                    Some(t) => *t,
                    None => {
                        // llama.cpp's names and vLLM's: each server reads its own.
                        let body = serde_json::json!({
                            "content": label, "add_special": false, "prompt": label, "add_special_tokens": false,
                        });
                        let reply: Tokenized =
                            crate::http::post_json(&self.client, &url, self.key.as_deref(), &body, |_, _| None)
                                .await
                                .map_err(|e| format!("finding their tokens for logit_bias failed: {}", e.message))?;
                        let one = match reply.tokens.as_slice() {
                            [t] => t.as_u64(),
                            _ => None,
                        };
                        known.insert(label, one);
                        one
                    }
                };
                tokens.extend(token);
            }
        }
        tokens.sort_unstable();
        tokens.dedup();
        match tokens.is_empty() {
            true => Err(format!("no option's number is one token at {}", engine::chat::redact_url(&url))),
            false => Ok(tokens),
        }
    }
}

impl ChatUpstream for HttpChat {
    fn option_probabilities<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Option<UpstreamWeighed>> {
        Box::pin(async move { Some(self.weigh(request).await) })
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
