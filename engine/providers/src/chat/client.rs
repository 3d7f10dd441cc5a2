//! The [`ChatClient`]: the engine's [`ChatPort`] over one or more upstream
//! endpoints.
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

use super::upstream::{ChatUpstream, TokenUsage, UpstreamCall, WeighError};
use crate::clock::{Sleeper, TokioSleeper};
use crate::upstream::{Backoff, RateLimiter};
use engine::chat::{ChatAttempt, ChatError, ChatPort, ChatReply, ChatRequest};
use engine::config::ChatSection;
use engine::cost::{estimate_tokens, Price, Spend};
use engine::digest::DigestWriter;
use engine::rng::Stream;
use engine::BoxFuture;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
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
                    raised: w.raised,
                    spend: self.price.bill(w.prompt_tokens, w.completion_tokens),
                    estimated: false,
                }),
                Some(Err(WeighError::Unsupported(cause))) => Err(ChatError::Engine(engine::Error::Config {
                    source_name: "[answers]".into(),
                    field: "mode".into(),
                    cause,
                })),
                Some(Err(WeighError::Failed(e))) => {
                    // What a failed weighing was billed (a first answer
                    // before a failed second one) stays with its job.
                    let spend = e.billed_tokens.map_or_else(Spend::default, |t| self.price.bill(t, 0));
                    Err(ChatError::Provider { cause: e.message, spend, attempts: Vec::new() })
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
