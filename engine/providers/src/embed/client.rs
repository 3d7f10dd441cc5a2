//! The inference client: the one layer between the embedding port and a
//! provider. It serves cached texts, splits the rest into physical requests
//! (by batch size and by tokens per request), runs them with capped
//! concurrency under a rate limiter, retries transient failures with
//! exponential backoff and jitter (honouring a retry-after), never retries
//! a permanent one, and bills each request. There is no other retry layer.

use super::cache::TextCache;
use super::provider::{EmbedProvider, ProviderRequest};
use crate::clock::{Sleeper, TokioSleeper};
use crate::upstream::{Backoff, RateLimiter};
use engine::config::EmbeddingSection;
use engine::cost::{estimate_tokens, Price, Spend};
use engine::digest::{Digest, DigestWriter};
use engine::embed::upstream::{cache_key, split_requests};
use engine::embed::{EmbedBatch, EmbedCall, EmbedError, EmbedKey, EmbeddingPort};
use engine::error::Result;
use engine::rng::Stream;
use engine::BoxFuture;
use futures::StreamExt;
use std::borrow::Cow;
use std::sync::Arc;

/// The inference client over one provider.
pub struct InferenceClient {
    provider: Arc<dyn EmbedProvider>,
    settings: EmbeddingSection,
    price: Price,
    cache: Option<TextCache>,
    limiter: RateLimiter,
    seed: u64,
    /// Real time by default; tests give a simulated clock.
    clock: Arc<dyn Sleeper>,
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
        settings: EmbeddingSection,
        price: Price,
        cache: Option<TextCache>,
        seed: u64,
    ) -> Self {
        let limiter = RateLimiter::new(settings.requests_per_minute, settings.tokens_per_minute);
        InferenceClient { provider, settings, price, cache, limiter, seed, clock: Arc::new(TokioSleeper::new()) }
    }

    /// The same client waiting on `clock` (rate limits and backoff) instead
    /// of tokio's real clock.
    pub fn with_clock(mut self, clock: Arc<dyn Sleeper>) -> Self {
        self.clock = clock;
        self
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
            self.limiter.acquire(estimate, self.clock.as_ref()).await;
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
                    let jitter_key =
                        DigestWriter::new("backoff jitter v1").u64(self.seed).bytes(&digest).u32(attempt).finish();
                    let s = &self.settings;
                    let backoff =
                        Backoff { max_retries: s.max_retries, base_ms: s.backoff_base_ms, max_ms: s.backoff_max_ms };
                    match e.retry_wait(attempt, backoff, Stream::from_key(jitter_key.0).unit()) {
                        Ok(wait) => self.clock.sleep(wait).await,
                        Err(give_up) => {
                            let call = EmbedCall { texts: indices, attempts: attempt + 1, spend };
                            return Sent { call, result: Err(give_up.to_string()) };
                        }
                    }
                    attempt += 1;
                }
            }
        }
    }
}

impl EmbeddingPort for InferenceClient {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, engine::embed::EmbedResult<EmbedBatch>> {
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
                return Err(EmbedError::Provider { cause, calls });
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

    /// The invocations concurrently, at most `concurrency` at a time, with
    /// cache hits decided in list order: the first list holding a text (by
    /// cache key) goes in the first wave; a later list with a text already
    /// asked for waits for the second wave, when that text is cached. So the
    /// same lists always hit, miss and cost the same, whatever finishes
    /// first.
    fn embed_each<'a>(
        &'a self,
        key: &'a EmbedKey,
        lists: &'a [Vec<String>],
    ) -> BoxFuture<'a, Vec<engine::embed::EmbedResult<EmbedBatch>>> {
        Box::pin(async move {
            let mut seen = std::collections::HashSet::new();
            let (mut first, mut later) = (Vec::new(), Vec::new());
            for (i, texts) in lists.iter().enumerate() {
                let keys: Vec<Digest> = texts.iter().map(|t| cache_key(&key.model, key.dim, t)).collect();
                let repeats = keys.iter().any(|k| seen.contains(k));
                seen.extend(keys);
                if repeats {
                    later.push(i)
                } else {
                    first.push(i)
                }
            }
            let mut results: Vec<Option<engine::embed::EmbedResult<EmbedBatch>>> =
                (0..lists.len()).map(|_| None).collect();
            for wave in [first, later] {
                let done: Vec<(usize, engine::embed::EmbedResult<EmbedBatch>)> = futures::stream::iter(
                    wave.into_iter().map(|i| async move { (i, self.embed(key, &lists[i]).await) }),
                )
                .buffer_unordered(self.settings.concurrency.max(1))
                .collect()
                .await;
                for (i, r) in done {
                    results[i] = Some(r);
                }
            }
            results.into_iter().map(|r| r.expect("every list is in one wave; this is a bug")).collect()
        })
    }

    fn finish(&self) -> Result<()> {
        self.cache.as_ref().map_or(Ok(()), TextCache::save)
    }

    fn truncated_texts(&self) -> u64 {
        self.provider.truncated_texts()
    }

    fn warm(&self, key: &EmbedKey, texts: &[String], vectors: &[Arc<[f32]>]) {
        if let Some(c) = &self.cache {
            c.put_all(texts.iter().zip(vectors).map(|(t, v)| (cache_key(&key.model, key.dim, t), v.clone())));
        }
    }
}
