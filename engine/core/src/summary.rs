//! The run summary: counts, intent distributions, embedding work, tokens and
//! costs, accumulated tick by tick from outcomes. Its JSON form is a stable
//! interface for scripts. [`crate::analysis`] builds the HTML report's figures
//! from a trace (intent by trait, segments, failures, memory tiers).

mod distribution;

pub use crate::store::trace::record::{StopReason, Stopped};
pub use distribution::{Distribution, SsrDistribution};

use crate::cost::{Spend, NANO_PER_USD};
use crate::embed::{StageStats, Strategy};
use crate::turn::{Outcome, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Job counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCounts {
    /// All jobs.
    pub total: u64,
    /// Reacted and remembered.
    pub ok: u64,
    /// Failed after starting.
    pub failed: u64,
    /// Declined before any model call.
    pub refused: u64,
}

/// Embedding counters for the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingTotals {
    /// Port calls, both stages.
    pub port_invocations: u64,
    /// Texts the model truncated at its length limit (MiniLM: 256 word
    /// pieces), counted when embedded: a text served from a cache or a
    /// trace is not counted again.
    #[serde(default)]
    pub truncated_texts: u64,
    /// Physical upstream requests, both stages.
    pub upstream_requests: u64,
    /// Texts asked for by jobs.
    pub texts_requested: u64,
    /// Texts submitted after dedup.
    pub unique_texts_submitted: u64,
    /// Texts served by a cache.
    pub cache_hits: u64,
    /// Port calls of the retrieval stage.
    pub retrieval_port_invocations: u64,
    /// Port calls of the memory stage.
    pub memory_port_invocations: u64,
    /// How texts were submitted.
    pub strategy: Strategy,
}

/// Chat counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatTotals {
    /// Chat requests the engine made (a guardrail retry is a new request).
    pub requests: u64,
    /// Reaction and probe retries after unparseable replies.
    pub guardrail_retries: u64,
    /// Reflections run.
    pub reflections: u64,
    /// Reflections whose reply did not parse.
    pub reflection_fallbacks: u64,
    /// Calls that failed after the transport's retries.
    pub failures: u64,
    /// Calls whose tokens are estimated (scripted models, servers without
    /// `usage`): their cost is an estimate too.
    pub estimated_usage: u64,
    /// Requests the transport sent, retries included (live and modelled
    /// providers), from the recorded attempts.
    pub attempts: u64,
    /// Transport retries (429, 5xx, timeouts): attempts after a request's
    /// first.
    pub retries: u64,
    /// Per endpoint of a live provider (URLs without credentials or query).
    pub endpoints: Vec<EndpointCount>,
    /// The share of chat prompt tokens served from the providers' prompt
    /// caches: `tokens.chat_input_cached / tokens.chat_input` (0 with no
    /// prompt tokens).
    #[serde(default)]
    pub cached_share: f64,
    /// What the response cache across runs did (`[cache]`): answers served,
    /// calls sent, and the bill against what would have been billed. Absent
    /// when the run had none (a scripted or modelled provider, `--no-cache`,
    /// a replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_cache: Option<crate::chat::CacheReport>,
}

pub use crate::chat::EndpointCount;

/// Tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTotals {
    /// Chat prompt tokens.
    pub chat_input: u64,
    /// The part of them the providers served from their prompt caches
    /// (reported by OpenAI, vLLM and llama.cpp's server; 0 otherwise).
    #[serde(default)]
    pub chat_input_cached: u64,
    /// Chat completion tokens.
    pub chat_output: u64,
    /// Embedding input tokens.
    pub embedding: u64,
    /// The part of them SSR's texts took.
    #[serde(default)]
    pub ssr_embedding: u64,
    /// All of them.
    pub total: u64,
}

/// Money.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostTotals {
    /// What providers billed, counted once.
    pub provider_total_nano_usd: u64,
    /// The same in USD, for reading.
    pub provider_total_usd: f64,
    /// Sum of per-job allocations (chat billed directly, embedding shares
    /// estimated). Equals the provider total when allocation conserves.
    pub allocated_total_nano_usd: u64,
    /// Chat part of the provider total.
    pub chat_nano_usd: u64,
    /// Embedding part of the provider total.
    pub embedding_nano_usd: u64,
    /// The price table's label.
    pub price_label: String,
    /// What the embedding model's price is: `nominal`, `configured` or
    /// `local`.
    #[serde(default)]
    pub embedding_price_label: String,
    /// What the chat model's price is, likewise.
    #[serde(default)]
    pub chat_price_label: String,
    /// What a chat prompt token served from the provider's cache costs:
    /// the model's `cached_input_usd_per_mtok`, or the input price.
    #[serde(default)]
    pub chat_cached_input_price: String,
    /// Per-persona embedding shares are estimates, not provider charges.
    pub allocations_are_estimates: bool,
    /// What SSR cost on top of direct rating: the shares of the reaction
    /// and anchor texts in the memory-embedding stage (part of the
    /// embedding total, shown apart).
    #[serde(default)]
    pub ssr_nano_usd: u64,
}

/// Memory consolidation over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsolidationTotals {
    /// The automatic pass changed memory at each commit (`[consolidation]
    /// enabled`, not a dry run). Off by default: the plan runs
    /// consolidation by hand first (`sim-cli memory consolidate`).
    #[serde(default)]
    pub automatic: bool,
    /// The pass was played on a copy at each commit and only reported
    /// (`[consolidation] dry_run`): the counts are what it would have done.
    #[serde(default)]
    pub dry_run: bool,
    /// Records promoted (working to short-term, short-term to long-term).
    pub promoted: u64,
    /// Records expired.
    pub expired: u64,
    /// Promotions held back by the batch size.
    pub blocked: u64,
    /// Working records queued at the session boundary.
    pub queued: u64,
    /// Cluster links formed.
    pub clustered: u64,
}

/// The circuit breaker's rule: at least half of a tick's chat calls, and at
/// least `min(10, all calls)`, failed permanently (their last transport
/// attempt met a [`crate::chat::FailureClass::Permanent`] error). Returns
/// the share and the most common cause when it trips.
pub fn breaker(outcomes: &[crate::turn::Outcome]) -> Option<String> {
    let calls: Vec<&crate::turn::ChatCallRecord> = outcomes.iter().flat_map(|o| &o.chat_calls).collect();
    let permanent: Vec<&str> = calls
        .iter()
        .filter(|c| c.failed.is_some())
        .filter_map(|c| match &c.attempts.last()?.error {
            Some((crate::chat::FailureClass::Permanent, message)) => Some(message.as_str()),
            _ => None,
        })
        .collect();
    if permanent.is_empty() || permanent.len() * 2 < calls.len() || permanent.len() < calls.len().min(10) {
        return None;
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &permanent {
        *counts.entry(f).or_default() += 1;
    }
    let (cause, _) = counts.iter().max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))?;
    Some(format!("{} of {} chat calls failed permanently, e.g. {cause}", permanent.len(), calls.len()))
}

/// Wall-clock timings (reporting only; never state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Whole run, including spawning actors.
    pub total: f64,
    /// Validation, retrieval embedding, retrieval and prompts.
    pub preparation: f64,
    /// Chat.
    pub chat: f64,
    /// Drafting, memory embedding and commit.
    pub memory_finalisation: f64,
}

/// The run summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Content digest after the last committed tick (hex in JSON).
    pub digest: crate::digest::Digest,
    /// How purchase intent was measured: `direct`, `ssr` or `both`.
    #[serde(default)]
    pub intent_method: crate::config::IntentMethod,
    /// The kernel level a `gguf` chat model computed at (`avx2`,
    /// `portable`); every level gives the same bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf_kernel: Option<String>,
    /// The kernel level the `minilm` embedder computed at (`avx2`,
    /// `portable`); every level gives the same bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minilm_kernel: Option<String>,
    /// One-line suggestions about the run's settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Full digest after the last committed tick (hex in JSON).
    pub full_digest: crate::digest::Digest,
    /// Seed.
    pub seed: u64,
    /// Scenario name.
    pub scenario: String,
    /// Panel size (a shard's: the personas it ran).
    pub personas: u32,
    /// Which shard of a split panel this run is (`run --shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
    /// How many shards were merged into this run (`sim-cli merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<u32>,
    /// Ticks asked for.
    pub ticks: u32,
    /// Ticks committed.
    pub ticks_completed: u32,
    /// Job counts.
    pub jobs: JobCounts,
    /// Set when the run stopped early.
    pub stopped: Option<Stopped>,
    /// Purchase intent per stimulus id.
    pub intent: BTreeMap<String, Distribution>,
    /// Probe answers per probe id. A probe on its own scale is listed from
    /// the start (over its options); a 1-5 probe once it is asked.
    pub probes: BTreeMap<String, Distribution>,
    /// Embedding work.
    pub embedding: EmbeddingTotals,
    /// Chat work.
    pub chat: ChatTotals,
    /// Memory consolidation.
    pub consolidation: ConsolidationTotals,
    /// Tokens.
    pub tokens: TokenTotals,
    /// Money.
    pub cost: CostTotals,
    /// Milliseconds.
    pub timings_ms: Timings,
    /// Where the run was written.
    pub out_dir: String,
    /// The pre-flight estimate of a live run, made before it started
    /// (outside the digests; absent for a scripted model, a resume or a
    /// replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::estimate::Estimate>,
}

impl RunSummary {
    /// Counts one tick's consolidation changes.
    pub fn add_consolidation(&mut self, changes: &[(u32, Vec<crate::memory::Change>)]) {
        use crate::memory::Change;
        for c in changes.iter().flat_map(|(_, c)| c) {
            let t = &mut self.consolidation;
            match c {
                Change::Promoted { .. } => t.promoted += 1,
                Change::Expired { .. } => t.expired += 1,
                Change::PromotionBlocked { .. } => t.blocked += 1,
                Change::Queued { .. } => t.queued += 1,
                Change::Clustered { .. } => t.clustered += 1,
                Change::Created { .. }
                | Change::Decayed { .. }
                | Change::Accessed { .. }
                | Change::Reset { .. }
                | Change::Closed { .. } => {}
            }
        }
    }

    /// Adds one committed tick.
    pub fn add_tick(&mut self, outcomes: &[Outcome], retrieval: (&StageStats, &Spend), memory: (&StageStats, &Spend)) {
        self.ticks_completed += 1;
        for o in outcomes {
            self.jobs.total += 1;
            match &o.status {
                Status::Ok => self.jobs.ok += 1,
                Status::Failed { .. } => self.jobs.failed += 1,
                Status::Refused { .. } => self.jobs.refused += 1,
            }
            if let (Status::Ok, Some(r)) = (&o.status, &o.reaction) {
                let d = self.intent.entry(o.stimulus.clone()).or_default();
                d.add(r.intent.clamp(1, 5));
                if let Some(p) = o.intent_probabilities() {
                    d.add_pmf(&p);
                }
                if let Some(ssr) = &o.ssr {
                    let direct = crate::intent::pmf_of_counts(&d.first_five());
                    let m = d.ssr.get_or_insert_with(Default::default);
                    m.add(ssr);
                    m.ks_similarity_to_direct = Some(crate::intent::ks_similarity(&direct, &m.pmf));
                    self.cost.ssr_nano_usd += ssr.cost.nano_usd;
                    self.tokens.ssr_embedding += ssr.cost.input_tokens;
                }
            }
            for p in &o.probes {
                let d = self.probes.entry(p.id.clone()).or_default();
                match &p.reply {
                    Some(r) => {
                        d.add(r.answer);
                        if let Some(p) = r.probabilities() {
                            d.add_pmf(&p);
                        }
                    }
                    None => d.unparsed += 1,
                }
            }
            for c in &o.chat_calls {
                self.chat.requests += 1;
                self.chat.attempts += c.attempts.len() as u64;
                self.chat.retries += c.attempts.len().saturating_sub(1) as u64;
                if c.attempt > 0 {
                    self.chat.guardrail_retries += 1;
                }
                self.chat.failures += u64::from(c.failed.is_some());
                self.chat.estimated_usage += u64::from(c.estimated);
                self.tokens.chat_input += c.spend.input_tokens;
                self.tokens.chat_input_cached += c.spend.cached_input_tokens;
                self.tokens.chat_output += c.spend.output_tokens;
                self.cost.chat_nano_usd += c.spend.nano_usd;
            }
            if let Some(r) = &o.reflection {
                self.chat.reflections += 1;
                self.chat.reflection_fallbacks += u64::from(r.fallback);
            }
            self.cost.allocated_total_nano_usd += o.spend.total().nano_usd;
        }
        for (stats, spend) in [retrieval, memory] {
            let e = &mut self.embedding;
            e.port_invocations += stats.port_invocations;
            e.upstream_requests += stats.upstream_requests;
            e.texts_requested += stats.texts_requested;
            e.unique_texts_submitted += stats.unique_texts_submitted;
            e.cache_hits += stats.cache_hits;
            self.tokens.embedding += spend.input_tokens;
            self.cost.embedding_nano_usd += spend.nano_usd;
        }
        self.embedding.retrieval_port_invocations += retrieval.0.port_invocations;
        self.embedding.memory_port_invocations += memory.0.port_invocations;
        self.totals();
    }

    /// The summary a merge of shards starts from: the run's identity, its
    /// labels and notes from its first shard's summary, nothing counted.
    /// The merge then adds each shard's part of every tick in shard order
    /// ([`RunSummary::add_tick`] at no embedding cost, and
    /// [`RunSummary::add_consolidation`]), and ends with
    /// [`RunSummary::finish_merge`].
    pub fn merge_base(first: &RunSummary, panel: u32, shards: u32, scenario: &crate::scenario::Scenario) -> RunSummary {
        let mut s = RunSummary {
            intent_method: first.intent_method,
            notes: first.notes.clone(),
            seed: first.seed,
            scenario: first.scenario.clone(),
            personas: panel,
            merged_shards: Some(shards),
            ticks: first.ticks,
            embedding: EmbeddingTotals { strategy: first.embedding.strategy, ..Default::default() },
            consolidation: ConsolidationTotals {
                automatic: first.consolidation.automatic,
                dry_run: first.consolidation.dry_run,
                ..Default::default()
            },
            ..Default::default()
        };
        for p in scenario.probes.iter().filter(|p| !p.options.is_empty()) {
            s.probes.insert(p.id.clone(), Distribution::with_points(p.points()));
        }
        let c = &first.cost;
        s.cost.price_label = c.price_label.clone();
        s.cost.embedding_price_label = c.embedding_price_label.clone();
        s.cost.chat_price_label = c.chat_price_label.clone();
        s.cost.chat_cached_input_price = c.chat_cached_input_price.clone();
        s.cost.allocations_are_estimates = c.allocations_are_estimates;
        s
    }

    /// Ends a merge of `shards` (their summaries, in shard order): `ticks`
    /// committed, the final `digests`, the shards' embedding work, and the
    /// first shard's stop, if any, with what the shards spent together
    /// against the whole `budget`.
    pub fn finish_merge(
        &mut self,
        ticks: u32,
        digests: crate::turn::TickDigests,
        shards: &[RunSummary],
        budget: Option<u64>,
    ) {
        self.ticks_completed = ticks;
        for s in shards {
            self.add_shard_embedding(s);
        }
        self.digest = digests.digest;
        self.full_digest = digests.full_digest;
        self.stopped = shards.first().and_then(|s| s.stopped.clone()).map(|mut s| {
            s.spent_nano_usd = self.cost.provider_total_nano_usd;
            s.budget_nano_usd = budget.unwrap_or(0);
            s
        });
    }

    /// Adds a shard's embedding work (its counters, tokens and bill) and
    /// its timings. A merge of shards folds their outcomes into the merged
    /// summary with [`RunSummary::add_tick`] (in job order, at no
    /// embedding cost), and takes the embedding stages, which no trace
    /// records, from the shards' own summaries.
    pub fn add_shard_embedding(&mut self, shard: &RunSummary) {
        let (e, s) = (&mut self.embedding, &shard.embedding);
        e.port_invocations += s.port_invocations;
        e.truncated_texts += s.truncated_texts;
        e.upstream_requests += s.upstream_requests;
        e.texts_requested += s.texts_requested;
        e.unique_texts_submitted += s.unique_texts_submitted;
        e.cache_hits += s.cache_hits;
        e.retrieval_port_invocations += s.retrieval_port_invocations;
        e.memory_port_invocations += s.memory_port_invocations;
        self.tokens.embedding += shard.tokens.embedding;
        self.cost.embedding_nano_usd += shard.cost.embedding_nano_usd;
        let (t, st) = (&mut self.timings_ms, &shard.timings_ms);
        t.total += st.total;
        t.preparation += st.preparation;
        t.chat += st.chat;
        t.memory_finalisation += st.memory_finalisation;
        self.totals();
    }

    /// The totals that follow from the parts.
    fn totals(&mut self) {
        self.tokens.total = self.tokens.chat_input + self.tokens.chat_output + self.tokens.embedding;
        self.chat.cached_share = match self.tokens.chat_input {
            0 => 0.0,
            n => self.tokens.chat_input_cached as f64 / n as f64,
        };
        self.cost.provider_total_nano_usd = self.cost.chat_nano_usd + self.cost.embedding_nano_usd;
        self.cost.provider_total_usd = self.cost.provider_total_nano_usd as f64 / NANO_PER_USD as f64;
    }
}

#[cfg(test)]
mod breaker_tests {
    use super::breaker;
    use crate::chat::{ChatAttempt, FailureClass};
    use crate::turn::{ChatCallRecord, Outcome};

    /// A tick's calls: `None` answered, `Some(class)` failed with its last
    /// attempt in that class.
    fn outcome(failed: &[Option<FailureClass>]) -> Outcome {
        let mut o = Outcome::new(1, 0, 0, "s".into(), 0);
        o.chat_calls = failed
            .iter()
            .map(|f| ChatCallRecord {
                purpose: crate::chat::ChatPurpose::Reaction,
                attempt: 0,
                request: Default::default(),
                reply: String::new(),
                spend: Default::default(),
                failed: f.map(|c| format!("{c} after 1 attempt(s)")),
                estimated: false,
                attempts: vec![ChatAttempt {
                    error: f.map(|c| (c, "answered 401: bad key".into())),
                    ..Default::default()
                }],
            })
            .collect();
        o
    }

    #[test]
    fn trips_on_systematic_permanent_errors_only() {
        let key = Some(FailureClass::Permanent);
        let busy = Some(FailureClass::Server);
        assert!(breaker(&[outcome(&[key; 12])]).is_some_and(|d| d.contains("12 of 12")));
        assert!(breaker(&[outcome(&[key, key])]).is_some(), "a small tick trips when all of its calls fail");
        assert!(breaker(&[outcome(&[key, key, None])]).is_none(), "a small tick with a success does not");
        let mostly: Vec<Option<FailureClass>> = [key; 11].into_iter().chain([None; 9]).collect();
        assert!(breaker(&[outcome(&mostly)]).is_some(), "11 of 20: most calls, and at least 10");
        assert!(breaker(&[outcome(&[key, None, None])]).is_none(), "a minority is not systematic");
        assert!(breaker(&[outcome(&[busy; 12])]).is_none(), "transient failures are not the breaker's");
    }
}
