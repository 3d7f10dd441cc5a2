//! The batch plan of one embedding stage: exact-text dedup, consumer
//! mappings, vector association and cost allocation, behind one function,
//! [`embed_stage`].

use super::port::{EmbedBatch, EmbedCall, EmbedKey, EmbeddingPort};
use crate::cost::{estimate_tokens, split_proportional, Spend};
use crate::digest::{Digest, DigestWriter};
use crate::error::Error;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How a stage submits its texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// One invocation with the stage's unique texts in first-occurrence
    /// order. The default.
    #[default]
    Batched,
    /// One invocation per request, no dedup, awaited one after another: the
    /// source's own "before" (its calls blocked each loop).
    PerConsumer,
    /// One invocation per request, no dedup, issued concurrently through
    /// [`EmbeddingPort::embed_each`]: a user's real alternative to batching.
    /// The inference client bounds them by its concurrency and rate limits
    /// and decides cache hits in request order.
    PerConsumerConcurrent,
}

/// A stage's requests, deduplicated by exact text (no normalisation).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The unique texts, in first-occurrence order: what a batched stage
    /// submits, as is.
    texts: Vec<String>,
    /// Per request: its consumer and the unique text it maps to.
    requests: Vec<(u32, usize)>,
    consumers: Vec<Vec<u32>>,
}

impl Plan {
    /// Builds the plan from `(consumer, text)` requests. Requests must come
    /// grouped by consumer (in job order); several requests of one consumer
    /// with the same text make it one consumer of that text.
    /// Texts may be shared (`Arc<str>`): only the unique ones are copied.
    pub fn new<T: AsRef<str>>(requests: Vec<(u32, T)>) -> Plan {
        let mut index: HashMap<&str, usize, crate::scan::TextHasher> =
            HashMap::with_capacity_and_hasher(requests.len(), crate::scan::TextHasher::default());
        let mut first = Vec::new();
        let mut consumers: Vec<Vec<u32>> = Vec::new();
        let mut slots = Vec::with_capacity(requests.len());
        for (i, (consumer, text)) in requests.iter().enumerate() {
            let u = *index.entry(text.as_ref()).or_insert_with(|| {
                first.push(i);
                consumers.push(Vec::new());
                first.len() - 1
            });
            if consumers[u].last() != Some(consumer) {
                debug_assert!(!consumers[u].contains(consumer), "requests must be grouped by consumer; this is a bug");
                consumers[u].push(*consumer);
            }
            slots.push((*consumer, u));
        }
        drop(index);
        let texts = first.iter().map(|i| requests[*i].1.as_ref().to_string()).collect();
        Plan { texts, requests: slots, consumers }
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// True when nothing was requested.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The unique texts, in first-occurrence order.
    pub fn unique_texts(&self) -> &[String] {
        &self.texts
    }

    /// The consumers of unique text `u`, in request order.
    pub fn consumers_of(&self, u: usize) -> &[u32] {
        &self.consumers[u]
    }

    /// The unique-text index that request `r` maps to.
    pub fn slot_of(&self, r: usize) -> usize {
        self.requests[r].1
    }
}

/// Counters of one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StageStats {
    /// Calls made to the port.
    pub port_invocations: u64,
    /// Physical requests made upstream.
    pub upstream_requests: u64,
    /// Texts the stage's consumers asked for.
    pub texts_requested: u64,
    /// Texts submitted to the port (after dedup, when batched).
    pub unique_texts_submitted: u64,
    /// Texts served from a cache without an upstream request.
    pub cache_hits: u64,
}

impl StageStats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, o: &StageStats) {
        self.port_invocations += o.port_invocations;
        self.upstream_requests += o.upstream_requests;
        self.texts_requested += o.texts_requested;
        self.unique_texts_submitted += o.unique_texts_submitted;
        self.cache_hits += o.cache_hits;
    }
}

/// A vector with the digest of its values, computed once per unique text so
/// that every state digest covering it hashes 32 bytes, not the vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// The values, shared by every consumer of the text.
    pub vector: Arc<[f32]>,
    /// Digest of the values.
    pub digest: Digest,
}

impl Embedding {
    /// Wraps a vector, hashing its values.
    pub fn new(vector: Arc<[f32]>) -> Embedding {
        let digest = DigestWriter::new("vector v1").floats(&vector).finish();
        Embedding { vector, digest }
    }
}

/// What a stage produced.
#[derive(Debug, Clone, Default)]
pub struct StageResult {
    /// Per request, its embedding; `None` if its invocation failed.
    pub vectors: Vec<Option<Embedding>>,
    /// Estimated share of the billed spend per consumer. Sums exactly to
    /// `provider_spend` (money and input tokens).
    pub allocation: BTreeMap<u32, Spend>,
    /// Consumers whose invocation failed, with the reason.
    pub failed: BTreeMap<u32, String>,
    /// Physical calls, in submission order, as billed.
    pub calls: Vec<EmbedCall>,
    /// Total billed by the provider.
    pub provider_spend: Spend,
    /// Counters.
    pub stats: StageStats,
}

/// Spreads each call's spend over the texts it carried (by estimated
/// tokens, at least 1 each), then each text's share equally over its
/// consumers.
fn allocate(texts: &[&str], consumers: &[&[u32]], calls: &[EmbedCall], out: &mut BTreeMap<u32, Spend>) {
    for call in calls {
        let carried: Vec<usize> = call.texts.iter().map(|t| *t as usize).filter(|t| *t < texts.len()).collect();
        let weights: Vec<u64> = carried.iter().map(|t| estimate_tokens(texts[*t]).max(1)).collect();
        let money = split_proportional(call.spend.nano_usd, &weights);
        let tokens = split_proportional(call.spend.input_tokens, &weights);
        for (j, t) in carried.into_iter().enumerate() {
            let who = consumers[t];
            let ones = vec![1u64; who.len()];
            let m = split_proportional(money[j], &ones);
            let k = split_proportional(tokens[j], &ones);
            for (c, consumer) in who.iter().enumerate() {
                let e = out.entry(*consumer).or_default();
                e.nano_usd += m[c];
                e.input_tokens += k[c];
            }
        }
    }
}

/// Validates a result's cardinality and dimensions.
fn validate(expected: usize, dim: usize, vectors: &[Arc<[f32]>]) -> Result<(), Error> {
    if vectors.len() != expected {
        return Err(Error::WrongCardinality { expected, got: vectors.len() });
    }
    if let Some((index, v)) = vectors.iter().enumerate().find(|(_, v)| v.len() != dim) {
        return Err(Error::WrongDimension { index, expected: dim, got: v.len() });
    }
    Ok(())
}

/// Submits one list of texts and records its result into `out`.
async fn submit(
    port: &dyn EmbeddingPort,
    key: &EmbedKey,
    texts: &[String],
    consumers: Vec<&[u32]>,
    requests_of: &[Vec<usize>],
    out: &mut StageResult,
) {
    let result = port.embed(key, texts).await;
    record(key, texts, consumers, requests_of, result, out);
}

/// Records one invocation's result into `out`.
fn record(
    key: &EmbedKey,
    texts: &[String],
    consumers: Vec<&[u32]>,
    requests_of: &[Vec<usize>],
    result: super::EmbedResult<EmbedBatch>,
    out: &mut StageResult,
) {
    out.stats.port_invocations += 1;
    out.stats.unique_texts_submitted += texts.len() as u64;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let fail = |out: &mut StageResult, reason: String| {
        for who in &consumers {
            for c in who.iter() {
                out.failed.entry(*c).or_insert_with(|| reason.clone());
            }
        }
    };
    match result {
        Ok(batch) => {
            out.stats.upstream_requests += batch.calls.iter().map(|c| u64::from(c.attempts)).sum::<u64>();
            out.stats.cache_hits += batch.cache_hits;
            for c in &batch.calls {
                out.provider_spend.add(&c.spend);
            }
            allocate(&refs, &consumers, &batch.calls, &mut out.allocation);
            out.calls.extend(batch.calls.iter().cloned());
            match validate(texts.len(), key.dim, &batch.vectors) {
                Ok(()) => {
                    for (u, v) in batch.vectors.into_iter().enumerate() {
                        let e = Embedding::new(v);
                        for r in &requests_of[u] {
                            out.vectors[*r] = Some(e.clone());
                        }
                    }
                }
                Err(e) => fail(out, e.to_string()),
            }
        }
        Err(e) => {
            // Each physical request's bill goes to the texts it carried, as
            // on success: no chunk pays for another.
            if let super::EmbedError::Provider { calls, .. } = &e {
                out.stats.upstream_requests += calls.iter().map(|c| u64::from(c.attempts)).sum::<u64>();
                for c in calls {
                    out.provider_spend.add(&c.spend);
                }
                allocate(&refs, &consumers, calls, &mut out.allocation);
                out.calls.extend(calls.iter().cloned());
            }
            fail(out, e.to_string());
        }
    }
}

/// Runs one embedding stage: submits the plan's texts through `port` by
/// `strategy`, validates the result, maps vectors back to requests and
/// allocates the billed spend to consumers. Never fails as a whole: a failed
/// invocation marks every consumer of its texts as failed and keeps what it
/// cost.
pub async fn embed_stage(port: &dyn EmbeddingPort, key: &EmbedKey, plan: &Plan, strategy: Strategy) -> StageResult {
    let mut out = StageResult { vectors: vec![None; plan.len()], ..Default::default() };
    out.stats.texts_requested = plan.len() as u64;
    if plan.is_empty() {
        return out;
    }
    match strategy {
        Strategy::Batched => {
            let mut requests_of = vec![Vec::new(); plan.texts.len()];
            for (r, (_, u)) in plan.requests.iter().enumerate() {
                requests_of[*u].push(r);
            }
            let consumers = plan.consumers.iter().map(Vec::as_slice).collect();
            submit(port, key, &plan.texts, consumers, &requests_of, &mut out).await;
        }
        Strategy::PerConsumer => {
            for (r, (consumer, u)) in plan.requests.iter().enumerate() {
                let who = std::slice::from_ref(consumer);
                submit(port, key, std::slice::from_ref(&plan.texts[*u]), vec![who], &[vec![r]], &mut out).await;
            }
        }
        Strategy::PerConsumerConcurrent => {
            let lists: Vec<Vec<String>> = plan.requests.iter().map(|(_, u)| vec![plan.texts[*u].clone()]).collect();
            let results = port.embed_each(key, &lists).await;
            for (r, ((consumer, _), result)) in plan.requests.iter().zip(results).enumerate() {
                let who = std::slice::from_ref(consumer);
                record(key, &lists[r], vec![who], &[vec![r]], result, &mut out);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Price;
    use crate::embed::{EmbedBatch, EmbedRole};
    use crate::testing::block_on_ready as block_on;
    use crate::testing::LocalPort;

    fn key() -> EmbedKey {
        EmbedKey { role: EmbedRole::Memory, model: "local-hash-v1".into(), dim: 32 }
    }

    #[test]
    fn dedups_exact_text_in_first_occurrence_order() {
        let plan = Plan::new(vec![(0, "b"), (0, "b"), (1, "a"), (2, "b"), (3, "B"), (4, "b ")]);
        assert_eq!(plan.unique_texts(), vec!["b", "a", "B", "b "]);
        assert_eq!(plan.consumers_of(0), &[0, 2]);
        assert_eq!((plan.slot_of(1), plan.slot_of(3)), (0, 0));
    }

    #[test]
    fn batched_stage_conserves_spend_and_maps_vectors() {
        let port = LocalPort {
            batch_size: 2,
            price: Price { input_nano_per_mtok: 333_333_333, output_nano_per_mtok: 0, cached_input_nano_per_mtok: 0 },
        };
        let texts = ["the same text", "unique one", "the same text", "x", "a much longer text than the rest"];
        let plan = Plan::new(texts.iter().enumerate().map(|(i, t)| (i as u32, t.to_string())).collect());
        let r = block_on(embed_stage(&port, &key(), &plan, Strategy::Batched));
        assert_eq!(r.stats.port_invocations, 1);
        assert_eq!(r.stats.unique_texts_submitted, 4);
        assert_eq!(r.stats.upstream_requests, 2);
        assert_eq!(r.vectors[0], r.vectors[2]);
        assert!(r.vectors.iter().all(Option::is_some));
        let alloc: u64 = r.allocation.values().map(|s| s.nano_usd).sum();
        let tokens: u64 = r.allocation.values().map(|s| s.input_tokens).sum();
        assert_eq!(alloc, r.provider_spend.nano_usd);
        assert_eq!(tokens, r.provider_spend.input_tokens);
        assert!(r.failed.is_empty());
    }

    /// Conservation, as a property: random plans (shared texts, several
    /// drafts per consumer, empty texts), random physical chunks with random
    /// bills, cached texts in no chunk. Money and tokens always add up.
    #[test]
    fn allocation_conserves_money_and_tokens() {
        use crate::rng::{Purpose, Stream};
        let mut s = Stream::derive(99, 0, 0, Purpose::Testing);
        let words = ["", "a", "bb", "the same text", "a rather longer text than most", "x"];
        for case in 0..2_000 {
            let mut requests = Vec::new();
            for consumer in 0..1 + s.below(12) as u32 {
                for _ in 0..1 + s.below(3) {
                    requests.push((consumer, s.pick(&words).to_string()));
                }
            }
            let plan = Plan::new(requests);
            let texts = plan.unique_texts();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let consumers: Vec<&[u32]> = (0..texts.len()).map(|u| plan.consumers_of(u)).collect();
            let mut calls = Vec::new();
            let mut carried: Vec<u32> = (0..texts.len() as u32).filter(|_| s.below(4) > 0).collect();
            while !carried.is_empty() {
                let n = 1 + s.below(carried.len());
                let chunk: Vec<u32> = carried.drain(..n).collect();
                let spend =
                    Spend { input_tokens: s.below(500) as u64, nano_usd: s.next_u64() % 1_000_000, ..Spend::default() };
                calls.push(EmbedCall { texts: chunk, attempts: 1 + s.below(3) as u32, spend });
            }
            let mut out = BTreeMap::new();
            allocate(&refs, &consumers, &calls, &mut out);
            let billed: u64 = calls.iter().map(|c| c.spend.nano_usd).sum();
            let tokens: u64 = calls.iter().map(|c| c.spend.input_tokens).sum();
            assert_eq!(out.values().map(|v| v.nano_usd).sum::<u64>(), billed, "case {case} (seed 99)");
            assert_eq!(out.values().map(|v| v.input_tokens).sum::<u64>(), tokens, "case {case} (seed 99)");
        }
    }

    #[test]
    fn per_consumer_submits_every_request() {
        let port = LocalPort { batch_size: 64, price: Price::from_usd_per_mtok(0.02, 0.0) };
        let plan = Plan::new(vec![(0, "a"), (1, "a"), (2, "b")]);
        let r = block_on(embed_stage(&port, &key(), &plan, Strategy::PerConsumer));
        assert_eq!((r.stats.port_invocations, r.stats.unique_texts_submitted), (3, 3));
        let b = block_on(embed_stage(&port, &key(), &plan, Strategy::Batched));
        assert_eq!(r.vectors, b.vectors);
    }

    /// A port whose invocation fails after three physical requests with
    /// different bills: texts 0-1, then 2, then 3.
    struct FailsInChunks;

    impl EmbeddingPort for FailsInChunks {
        fn embed<'a>(
            &'a self,
            _: &'a EmbedKey,
            _: &'a [String],
        ) -> crate::BoxFuture<'a, crate::embed::EmbedResult<EmbedBatch>> {
            let call = |texts: Vec<u32>, attempts, nano_usd| EmbedCall {
                texts,
                attempts,
                spend: Spend { input_tokens: nano_usd / 10, nano_usd, ..Spend::default() },
            };
            let calls = vec![call(vec![0, 1], 1, 1_000), call(vec![2], 3, 30_000), call(vec![3], 1, 500)];
            Box::pin(std::future::ready(Err(super::super::EmbedError::Provider {
                cause: "third request refused".into(),
                calls,
            })))
        }
    }

    /// A failed invocation charges each job for the chunks its texts were
    /// in, and only those; its physical requests count, retries included.
    #[test]
    fn a_failure_spread_over_chunks_charges_each_job_its_own_chunks() {
        // Job 0 needs texts 0 and 2; job 1 needs text 1; job 2 text 3; job 3 text 2.
        let plan = Plan::new(vec![(0, "aaaa"), (1, "bbbb"), (0, "cccc"), (2, "dddd"), (3, "cccc")]);
        assert_eq!(plan.unique_texts(), vec!["aaaa", "bbbb", "cccc", "dddd"]);
        let r = block_on(embed_stage(&FailsInChunks, &key(), &plan, Strategy::Batched));
        let money = |job: u32| r.allocation.get(&job).map_or(0, |s| s.nano_usd);
        // Chunk 1 (1,000) splits evenly over texts 0 and 1 (same length);
        // chunk 2 (30,000) over text 2's two jobs; chunk 3 (500) to job 2.
        assert_eq!(money(0), 500 + 15_000);
        assert_eq!(money(1), 500);
        assert_eq!(money(2), 500);
        assert_eq!(money(3), 15_000);
        assert_eq!(r.provider_spend.nano_usd, 31_500);
        assert_eq!(r.stats.upstream_requests, 5, "1 + 3 attempts + 1");
        assert_eq!(r.failed.len(), 4, "every job of the invocation fails");
    }
}
