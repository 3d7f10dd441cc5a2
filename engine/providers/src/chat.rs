//! Live chat: the [`ChatClient`] (the engine's [`ChatPort`] over one or more
//! upstream endpoints) and its upstreams, an OpenAI-compatible
//! `/chat/completions` server ([`HttpChat`]) and the modelled provider
//! ([`ModelledChat`]: the scripted replies behind modelled latency and
//! seeded faults).
//!
//! The client is the same machinery as the embedding client: capped
//! concurrency, per-minute limits, one retry layer with exponential backoff
//! and seeded jitter that honours a retry-after, permanent errors never
//! retried, all waiting on a [`Sleeper`]. With several endpoints each
//! request goes to the one with the fewest requests in flight (ties to the
//! one with the fewest failures in a row, so a retry tries another
//! endpoint, then to the first); an endpoint that fails three times in a
//! row is benched for 30 seconds. Billing comes from the reply's `usage`; without it the tokens
//! are estimated and the reply says so.

use crate::client::RateLimiter;
use crate::clock::{Sleeper, TokioSleeper};
use crate::provider::{Backoff, FailureKind, ProviderError};
use engine::chat::schema::{instruction, schema_for, schema_name_for};
use engine::chat::{ChatAttempt, ChatError, ChatPort, ChatReply, ChatRequest, ScriptedPersonaModel};
use engine::config::{ChatSection, StructuredOutput};
use engine::cost::{estimate_tokens, Price, Spend};
use engine::digest::DigestWriter;
use engine::embed::upstream::{HttpSettings, ModelledSettings};
use engine::error::{Error, Result};
use engine::rng::Stream;
use engine::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One upstream call.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamCall<'a> {
    /// The engine's request.
    pub request: &'a ChatRequest,
    /// Transport attempt, from 0.
    pub attempt: u32,
    /// A seed for servers that honour one: from (run seed, request digest),
    /// so a guardrail retry (another request) never resends the seed that
    /// produced the invalid reply.
    pub seed: u64,
}

/// What an upstream answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamReply {
    /// The reply text.
    pub text: String,
    /// Tokens from the reply's `usage`, if it had one.
    pub usage: Option<TokenUsage>,
    /// The model id the server reported, if it did.
    pub model: Option<String>,
}

/// What a reply's `usage` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Prompt tokens, cached ones included.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// The prompt tokens served from the server's prefix cache
    /// (`prompt_tokens_details.cached_tokens`; 0 when not reported).
    pub cached: u64,
}

/// An upstream chat service with one or more endpoints.
pub trait ChatUpstream: Send + Sync {
    /// How many endpoints it has.
    fn endpoints(&self) -> usize;
    /// Endpoint `e`'s name for reports, without credentials.
    fn label(&self, e: usize) -> String;
    /// Sends one call to endpoint `endpoint`.
    fn call<'a>(
        &'a self,
        endpoint: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>>;

    /// The probability of each of `request`'s options at its answer slot,
    /// their mass before renormalising, and the prompt tokens run; `None`
    /// for an upstream that cannot give them.
    fn option_probabilities<'a>(&'a self, _request: &'a ChatRequest) -> BoxFuture<'a, Option<UpstreamWeighed>> {
        Box::pin(std::future::ready(None))
    }
}

/// What an upstream gives for [`ChatUpstream::option_probabilities`].
#[derive(Debug, Clone, PartialEq)]
pub struct Weighing {
    /// One per option, summing to 1.
    pub probabilities: Vec<f64>,
    /// The mass the options had before renormalising.
    pub mass: f64,
    /// Tokens run as prompt.
    pub prompt_tokens: u64,
    /// Tokens generated (the answer token, for a server).
    pub completion_tokens: u64,
}

/// Why an upstream gave no probabilities.
#[derive(Debug, Clone)]
pub enum WeighError {
    /// This server cannot give them (its replies carry no `logprobs`): a
    /// setting to change, not an answer that failed.
    Unsupported(String),
    /// The call failed.
    Failed(ProviderError),
}

/// [`ChatUpstream::option_probabilities`]'s result.
pub type UpstreamWeighed = std::result::Result<Weighing, WeighError>;

/// Per-endpoint counters, for the summary.
#[derive(Debug, Default)]
pub struct EndpointStats {
    /// Calls sent.
    pub requests: AtomicU64,
    /// Calls that failed.
    pub failures: AtomicU64,
}

/// The chat client.
pub struct ChatClient {
    upstream: Arc<dyn ChatUpstream>,
    section: ChatSection,
    price: Price,
    seed: u64,
    limiter: RateLimiter,
    slots: tokio::sync::Semaphore,
    in_flight: Vec<AtomicUsize>,
    /// Per endpoint: consecutive failures, and until when it is benched.
    health: Vec<Mutex<(u32, Duration)>>,
    /// Per endpoint: requests and failures.
    pub stats: Vec<EndpointStats>,
    /// Per endpoint: its name without credentials (computed once).
    labels: Vec<String>,
    /// Requests on the wire now, transport retries so far and what has
    /// been billed so far (nano-USD), for progress lines.
    pending: AtomicUsize,
    retries: AtomicU64,
    billed: AtomicU64,
    clock: Arc<dyn Sleeper>,
}

/// The seed sent to servers that honour one, from (run seed, request
/// digest), so that a guardrail retry (another request) never resends the
/// seed that produced the invalid reply. 53 bits: JSON numbers stay exact.
pub(crate) fn server_seed(run_seed: u64, request: &engine::digest::Digest) -> u64 {
    let seed = DigestWriter::new("chat server seed v1").u64(run_seed).digest(request).finish();
    u64::from_le_bytes(seed.0[..8].try_into().unwrap_or_default()) >> 11
}

/// Consecutive failures that bench an endpoint, and for how long.
const BENCH_AFTER: u32 = 3;
const BENCH_FOR: Duration = Duration::from_secs(30);

impl ChatClient {
    /// A client over `upstream` with the `[chat]` settings, billing at
    /// `price`; `seed` seeds the servers' sampling and the backoff jitter.
    pub fn new(upstream: Arc<dyn ChatUpstream>, section: &ChatSection, price: Price, seed: u64) -> ChatClient {
        let n = upstream.endpoints().max(1);
        ChatClient {
            limiter: RateLimiter::new(section.requests_per_minute, section.tokens_per_minute),
            slots: tokio::sync::Semaphore::new(section.concurrency.max(1)),
            in_flight: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            health: (0..n).map(|_| Mutex::new((0, Duration::ZERO))).collect(),
            stats: (0..n).map(|_| EndpointStats::default()).collect(),
            labels: (0..n).map(|e| upstream.label(e)).collect(),
            pending: AtomicUsize::new(0),
            retries: AtomicU64::new(0),
            billed: AtomicU64::new(0),
            upstream,
            section: section.clone(),
            price,
            seed,
            clock: Arc::new(TokioSleeper::new()),
        }
    }

    /// The same client waiting on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Sleeper>) -> Self {
        self.clock = clock;
        self
    }

    /// The endpoint with the fewest requests in flight among those not
    /// benched, then the fewest failures in a row (a retry goes elsewhere
    /// when it can), then the first; when all are benched, the one whose
    /// bench ends first.
    fn pick(&self) -> usize {
        let now = self.clock.now();
        let benched_until = |e: usize| self.health[e].lock().1;
        let failing = |e: usize| self.health[e].lock().0;
        let open: Vec<usize> = (0..self.in_flight.len()).filter(|e| benched_until(*e) <= now).collect();
        match open.iter().min_by_key(|e| (self.in_flight[**e].load(Ordering::Relaxed), failing(**e), **e)) {
            Some(e) => *e,
            None => (0..self.in_flight.len()).min_by_key(|e| (benched_until(*e), *e)).unwrap_or(0),
        }
    }

    fn record(&self, endpoint: usize, ok: bool) {
        self.stats[endpoint].requests.fetch_add(1, Ordering::Relaxed);
        let mut h = self.health[endpoint].lock();
        if ok {
            h.0 = 0;
            return;
        }
        self.stats[endpoint].failures.fetch_add(1, Ordering::Relaxed);
        h.0 += 1;
        if h.0 >= BENCH_AFTER {
            h.0 = 0;
            h.1 = self.clock.now() + BENCH_FOR;
        }
    }

    /// One call through the retry layer.
    async fn send(&self, request: &ChatRequest) -> engine::chat::ChatResult<ChatReply> {
        let digest = request.digest();
        let seed = server_seed(self.seed, &digest);
        let estimate = estimate_tokens(&request.prompt) + self.section.max_output_tokens;
        let mut spend = Spend::default();
        let mut attempts = Vec::new();
        let mut attempt = 0u32;
        loop {
            self.limiter.acquire(estimate, self.clock.as_ref()).await;
            let endpoint = self.pick();
            self.in_flight[endpoint].fetch_add(1, Ordering::Relaxed);
            self.pending.fetch_add(1, Ordering::Relaxed);
            let started = self.clock.now();
            let result = self.upstream.call(endpoint, UpstreamCall { request, attempt, seed }).await;
            let latency_ms = self.clock.now().saturating_sub(started).as_millis() as u64;
            self.pending.fetch_sub(1, Ordering::Relaxed);
            self.in_flight[endpoint].fetch_sub(1, Ordering::Relaxed);
            self.record(endpoint, result.is_ok());
            let mut record =
                ChatAttempt { attempt, endpoint: self.labels[endpoint].clone(), latency_ms, ..Default::default() };
            match result {
                Ok(reply) => {
                    let (usage, estimated) = match reply.usage {
                        Some(u) => (u, false),
                        None => {
                            let prompt = estimate_tokens(&request.prompt);
                            (TokenUsage { prompt, completion: estimate_tokens(&reply.text), cached: 0 }, true)
                        }
                    };
                    record.spend = self.price.bill_cached(usage.prompt, usage.cached, usage.completion);
                    record.model = reply.model;
                    spend.add(&record.spend);
                    self.billed.fetch_add(record.spend.nano_usd, Ordering::Relaxed);
                    attempts.push(record);
                    return Ok(ChatReply { text: reply.text, spend, estimated, attempts });
                }
                Err(e) => {
                    if let Some(t) = e.billed_tokens {
                        record.spend = self.price.bill(t, 0);
                        spend.add(&record.spend);
                        self.billed.fetch_add(record.spend.nano_usd, Ordering::Relaxed);
                    }
                    record.error = Some((e.kind.class(), e.message.clone()));
                    attempts.push(record);
                    let key = DigestWriter::new("chat backoff jitter v1")
                        .u64(self.seed)
                        .digest(&digest)
                        .u32(attempt)
                        .finish();
                    let s = &self.section;
                    let backoff =
                        Backoff { max_retries: s.max_retries, base_ms: s.backoff_base_ms, max_ms: s.backoff_max_ms };
                    match e.retry_wait(attempt, backoff, Stream::from_key(key.0).unit()) {
                        Ok(wait) => {
                            self.retries.fetch_add(1, Ordering::Relaxed);
                            self.clock.sleep(wait).await;
                        }
                        Err(give_up) => {
                            return Err(ChatError::Provider { cause: give_up.to_string(), spend, attempts })
                        }
                    }
                    attempt += 1;
                }
            }
        }
    }
}

impl ChatClient {
    /// One of the `[chat] concurrency` slots every call holds.
    async fn slot(&self) -> engine::chat::ChatResult<tokio::sync::SemaphorePermit<'_>> {
        self.slots.acquire().await.map_err(|_| ChatError::Provider {
            cause: "the chat client closed".into(),
            spend: Spend::default(),
            attempts: Vec::new(),
        })
    }
}

impl ChatPort for ChatClient {
    fn endpoints(&self) -> Vec<engine::chat::EndpointCount> {
        self.stats
            .iter()
            .enumerate()
            .map(|(e, s)| engine::chat::EndpointCount {
                url: self.labels[e].clone(),
                requests: s.requests.load(Ordering::Relaxed),
                failures: s.failures.load(Ordering::Relaxed),
            })
            .collect()
    }

    fn activity(&self) -> Option<engine::chat::ChatActivity> {
        Some(engine::chat::ChatActivity {
            in_flight: self.pending.load(Ordering::Relaxed) as u64,
            retries: self.retries.load(Ordering::Relaxed),
            billed_nano_usd: self.billed.load(Ordering::Relaxed),
            ..Default::default()
        })
    }

    fn option_probabilities<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, engine::chat::ChatResult<engine::chat::OptionProbabilities>> {
        Box::pin(async move {
            // The same slots and rate limits as a reply (one token out).
            let _slot = self.slot().await?;
            self.limiter.acquire(estimate_tokens(&request.prompt) + 1, self.clock.as_ref()).await;
            match self.upstream.option_probabilities(request).await {
                None => Err(engine::chat::no_probabilities(&format!("at {}", self.labels.join(", ")))),
                Some(Ok(w)) => Ok(engine::chat::OptionProbabilities {
                    probabilities: w.probabilities,
                    mass: w.mass,
                    spend: self.price.bill(w.prompt_tokens, w.completion_tokens),
                    estimated: false,
                }),
                Some(Err(WeighError::Unsupported(cause))) => Err(ChatError::Engine(engine::Error::Config {
                    source_name: "[answers]".into(),
                    field: "mode".into(),
                    cause,
                })),
                Some(Err(WeighError::Failed(e))) => {
                    Err(ChatError::Provider { cause: e.message, spend: Spend::default(), attempts: Vec::new() })
                }
            }
        })
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        Box::pin(async move {
            let _slot = self.slot().await?;
            self.send(request).await
        })
    }
}

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
            if let Some(kind) = crate::modelled::fault(&self.settings, &call.request.digest().0, call.attempt) {
                return Err(ProviderError { kind, message: format!("modelled {kind:?}"), billed_tokens: None });
            }
            let usage =
                Some(TokenUsage { prompt: reply.spend.input_tokens, completion: reply.spend.output_tokens, cached: 0 });
            Ok(UpstreamReply { text: reply.text, usage, model: Some(call.request.model.clone()) })
        })
    }
}
