//! The inference client: the one layer between the embedding port and a
//! provider. It serves cached texts, splits the rest into physical requests
//! (by batch size and by tokens per request), runs them with capped
//! concurrency under a rate limiter, retries transient failures with
//! exponential backoff and jitter (honouring a retry-after), never retries
//! a permanent one, and bills each request. There is no other retry layer.

use super::cache::{cache_key, TextCache};
use super::port::{EmbedBatch, EmbedCall, EmbedKey, EmbeddingPort};
use super::provider::{EmbedProvider, ProviderRequest};
use crate::cost::{estimate_tokens, Price, Spend};
use crate::digest::{Digest, DigestWriter};
use crate::error::{Error, Result};
use crate::rng::Stream;
use crate::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the client sends work upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientSettings {
    /// Texts per physical request.
    pub batch_size: usize,
    /// Estimated tokens per physical request; a single longer text goes alone.
    pub max_tokens_per_request: u64,
    /// Physical requests in flight at once.
    pub concurrency: usize,
    /// Requests per minute; 0 is unlimited.
    pub requests_per_minute: u32,
    /// Tokens per minute; 0 is unlimited.
    pub tokens_per_minute: u64,
    /// Retries of a transient failure.
    pub max_retries: u32,
    /// First backoff, in milliseconds.
    pub backoff_base_ms: u64,
    /// Longest backoff, in milliseconds.
    pub backoff_max_ms: u64,
}

/// The wait before retry `attempt + 1`: exponential in `attempt`, capped,
/// with "equal jitter" (half fixed, half drawn from `jitter` in [0, 1)), and
/// never shorter than the provider's retry-after.
pub fn backoff_ms(attempt: u32, base_ms: u64, max_ms: u64, retry_after_ms: Option<u64>, jitter: f64) -> u64 {
    let exp = base_ms.saturating_mul(1u64 << attempt.min(30)).min(max_ms);
    let jittered = exp / 2 + (jitter.clamp(0.0, 1.0) * (exp - exp / 2) as f64) as u64;
    jittered.max(retry_after_ms.unwrap_or(0))
}

/// Splits texts (by index, in order) into physical requests of at most
/// `batch` texts and `max_tokens` estimated tokens.
pub fn split_requests(texts: &[&str], batch: usize, max_tokens: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut tokens = 0u64;
    for (i, t) in texts.iter().enumerate() {
        let need = estimate_tokens(t).max(1);
        let start_new = match out.last() {
            None => true,
            Some(cur) => cur.len() >= batch.max(1) || tokens + need > max_tokens,
        };
        if start_new {
            out.push(Vec::new());
            tokens = 0;
        }
        tokens += need;
        if let Some(cur) = out.last_mut() {
            cur.push(i);
        }
    }
    out
}

/// Token buckets for requests and tokens per minute.
#[derive(Debug)]
struct RateLimiter {
    rpm: f64,
    tpm: f64,
    state: Mutex<(f64, f64, Option<tokio::time::Instant>)>,
}

impl RateLimiter {
    fn new(rpm: u32, tpm: u64) -> Self {
        RateLimiter { rpm: f64::from(rpm), tpm: tpm as f64, state: Mutex::new((f64::from(rpm), tpm as f64, None)) }
    }

    /// Waits until one request of `tokens` may go.
    async fn acquire(&self, tokens: u64) {
        if self.rpm <= 0.0 && self.tpm <= 0.0 {
            return;
        }
        loop {
            let wait = {
                let Ok(mut s) = self.state.lock() else { return };
                let now = tokio::time::Instant::now();
                let elapsed = s.2.map_or(0.0, |t| now.duration_since(t).as_secs_f64());
                s.2 = Some(now);
                s.0 = (s.0 + elapsed * self.rpm / 60.0).min(self.rpm);
                // A request larger than a minute's tokens waits for a full bucket.
                let need = (tokens as f64).min(self.tpm);
                s.1 = (s.1 + elapsed * self.tpm / 60.0).min(self.tpm);
                let req_ok = self.rpm <= 0.0 || s.0 >= 1.0;
                let tok_ok = self.tpm <= 0.0 || s.1 >= need;
                if req_ok && tok_ok {
                    if self.rpm > 0.0 {
                        s.0 -= 1.0;
                    }
                    if self.tpm > 0.0 {
                        s.1 -= need;
                    }
                    return;
                }
                let req_wait = if req_ok { 0.0 } else { (1.0 - s.0) * 60.0 / self.rpm };
                let tok_wait = if tok_ok { 0.0 } else { (need - s.1) * 60.0 / self.tpm };
                req_wait.max(tok_wait)
            };
            tokio::time::sleep(Duration::from_secs_f64(wait.max(0.001))).await;
        }
    }
}

/// The inference client over one provider.
pub struct InferenceClient {
    provider: Arc<dyn EmbedProvider>,
    settings: ClientSettings,
    price: Price,
    cache: Option<TextCache>,
    limiter: RateLimiter,
    seed: u64,
}

struct Sent {
    call: EmbedCall,
    result: std::result::Result<Vec<Vec<f32>>, String>,
}

impl InferenceClient {
    /// A client; `cache` of `None` disables caching. `seed` seeds the
    /// backoff jitter.
    pub fn new(
        provider: Arc<dyn EmbedProvider>,
        settings: ClientSettings,
        price: Price,
        cache: Option<TextCache>,
        seed: u64,
    ) -> Self {
        let limiter = RateLimiter::new(settings.requests_per_minute, settings.tokens_per_minute);
        InferenceClient { provider, settings, price, cache, limiter, seed }
    }

    /// Sends one physical request. `keys` are the texts' cache keys, which
    /// already cover model, dimension and text: the request digest is taken
    /// over them rather than over the texts again.
    async fn send(&self, key: &EmbedKey, texts: Cow<'_, [String]>, keys: &[Digest], indices: Vec<u32>) -> Sent {
        let mut w = DigestWriter::new("embed physical request v1");
        w.u64(keys.len() as u64);
        for k in keys {
            w.digest(k);
        }
        let digest = w.finish().0;
        let estimate: u64 = texts.iter().map(|t| estimate_tokens(t)).sum();
        let mut spend = Spend::default();
        let mut attempt = 0u32;
        loop {
            self.limiter.acquire(estimate).await;
            let req = ProviderRequest { model: &key.model, dim: key.dim, texts: &texts, attempt, digest };
            match self.provider.request(req).await {
                Ok(reply) => {
                    spend.add(&self.price.bill(reply.billed_tokens.unwrap_or(estimate), 0));
                    let call = EmbedCall { texts: indices, attempts: attempt + 1, spend };
                    return Sent { call, result: Ok(reply.vectors) };
                }
                Err(e) => {
                    if let Some(t) = e.billed_tokens {
                        spend.add(&self.price.bill(t, 0));
                    }
                    if !e.kind.transient() || attempt >= self.settings.max_retries {
                        let call = EmbedCall { texts: indices, attempts: attempt + 1, spend };
                        let why = if e.kind.transient() { "retries exhausted" } else { "not retried" };
                        let msg = format!("{} after {} attempt(s), {why}", e.message, attempt + 1);
                        return Sent { call, result: Err(msg) };
                    }
                    let retry_after = match e.kind {
                        super::provider::FailureKind::RateLimited { retry_after_ms } => retry_after_ms,
                        super::provider::FailureKind::Server
                        | super::provider::FailureKind::Timeout
                        | super::provider::FailureKind::Permanent => None,
                    };
                    let jitter_key =
                        DigestWriter::new("backoff jitter v1").u64(self.seed).bytes(&digest).u32(attempt).finish();
                    let jitter = Stream::from_key(jitter_key.0).unit();
                    let s = &self.settings;
                    let ms = backoff_ms(attempt, s.backoff_base_ms, s.backoff_max_ms, retry_after, jitter);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    attempt += 1;
                }
            }
        }
    }
}

impl EmbeddingPort for InferenceClient {
    fn embed<'a>(&'a self, key: &'a EmbedKey, texts: &'a [String]) -> BoxFuture<'a, Result<EmbedBatch>> {
        Box::pin(async move {
            let mut vectors: Vec<Option<Arc<[f32]>>> = vec![None; texts.len()];
            let mut misses = Vec::new();
            let keys: Vec<_> = texts.iter().map(|t| cache_key(&key.model, key.dim, t)).collect();
            let mut cache_hits = 0u64;
            for (i, k) in keys.iter().enumerate() {
                match self.cache.as_ref().and_then(|c| c.get(k)) {
                    Some(v) => {
                        vectors[i] = Some(v);
                        cache_hits += 1;
                    }
                    None => misses.push(i),
                }
            }
            let miss_texts: Vec<&str> = misses.iter().map(|i| texts[*i].as_str()).collect();
            let requests = split_requests(&miss_texts, self.settings.batch_size, self.settings.max_tokens_per_request);
            let keys = &keys;
            let mut sent: Vec<(usize, Sent)> = futures::stream::iter(requests.into_iter().enumerate().map(|(r, members)| {
                let idx: Vec<usize> = members.iter().map(|m| misses[*m]).collect();
                // Without cache hits inside it, a request is a run of the
                // input: borrow it instead of copying the texts.
                let contiguous = idx.windows(2).all(|w| w[1] == w[0] + 1);
                let batch: Cow<'_, [String]> = match (contiguous, idx.first(), idx.last()) {
                    (true, Some(a), Some(b)) => Cow::Borrowed(&texts[*a..=*b]),
                    _ => Cow::Owned(idx.iter().map(|i| texts[*i].clone()).collect()),
                };
                let batch_keys: Vec<Digest> = idx.iter().map(|i| keys[*i]).collect();
                async move { (r, self.send(key, batch, &batch_keys, idx.iter().map(|i| *i as u32).collect()).await) }
            }))
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
            sent.sort_by_key(|(r, _)| *r);
            let mut calls = Vec::with_capacity(sent.len());
            let mut failure = None;
            let mut fresh = Vec::new();
            for (_, s) in sent {
                match s.result {
                    Ok(vs) if vs.len() != s.call.texts.len() => {
                        failure.get_or_insert(format!(
                            "provider returned {} vectors for {} texts",
                            vs.len(),
                            s.call.texts.len()
                        ));
                    }
                    Ok(vs) => match vs.iter().find(|v| v.len() != key.dim) {
                        Some(v) => {
                            failure.get_or_insert(format!(
                                "provider returned a vector of dimension {}, expected {}",
                                v.len(),
                                key.dim
                            ));
                        }
                        None => {
                            for (i, v) in s.call.texts.iter().zip(vs) {
                                let v: Arc<[f32]> = Arc::from(v);
                                fresh.push((keys[*i as usize], v.clone()));
                                vectors[*i as usize] = Some(v);
                            }
                        }
                    },
                    Err(msg) => {
                        failure.get_or_insert(msg);
                    }
                }
                calls.push(s.call);
            }
            if let Some(cause) = failure {
                let mut incurred = Spend::default();
                for c in &calls {
                    incurred.add(&c.spend);
                }
                return Err(Error::Embedding { cause, incurred });
            }
            if let Some(c) = &self.cache {
                c.put_all(fresh);
            }
            let vectors = vectors
                .into_iter()
                .map(|v| v.expect("every text is a hit or a validated miss; this is a bug"))
                .collect();
            Ok(EmbedBatch { vectors, calls, cache_hits })
        })
    }

    fn finish(&self) -> Result<()> {
        self.cache.as_ref().map_or(Ok(()), TextCache::save)
    }

    fn warm(&self, key: &EmbedKey, texts: &[String], vectors: &[Arc<[f32]>]) {
        if let Some(c) = &self.cache {
            c.put_all(texts.iter().zip(vectors).map(|(t, v)| (cache_key(&key.model, key.dim, t), v.clone())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_honours_retry_after() {
        assert_eq!(backoff_ms(0, 100, 10_000, None, 0.0), 50);
        assert_eq!(backoff_ms(0, 100, 10_000, None, 0.999_999), 99);
        assert_eq!(backoff_ms(3, 100, 10_000, None, 0.0), 400);
        assert_eq!(backoff_ms(20, 100, 1_000, None, 0.0), 500);
        assert_eq!(backoff_ms(0, 100, 10_000, Some(2_000), 0.5), 2_000);
    }

    #[test]
    fn requests_split_by_count_and_tokens() {
        let t = ["aaaa"; 5];
        assert_eq!(split_requests(&t, 2, 1_000), vec![vec![0, 1], vec![2, 3], vec![4]]);
        let uneven = ["a".repeat(40), "b".repeat(8), "c".repeat(40), "d".repeat(400)];
        let refs: Vec<&str> = uneven.iter().map(String::as_str).collect();
        // 10 + 2 tokens fit under 15; 10 more would not; the 100-token text goes alone.
        assert_eq!(split_requests(&refs, 64, 15), vec![vec![0, 1], vec![2], vec![3]]);
        assert!(split_requests(&[], 4, 10).is_empty());
    }
}
