//! Job outcomes and the digests of a tick.

use super::converse::ChatCallRecord;
use super::stage::ReflectionResult;
use crate::cost::Spend;
use crate::digest::{Digest, DigestWriter};
use crate::embed::{EmbedCall, StageStats};
use crate::persona::memory::MemoryId;
use crate::persona::reply::{ProbeReply, Reaction};
use serde::{Deserialize, Serialize};

/// The stage at which a job failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Validation, before any work.
    Validate,
    /// The retrieval-embedding stage.
    RetrievalEmbedding,
    /// Retrieval and prompt building.
    Prepare,
    /// Chat.
    Chat,
    /// The memory-embedding stage.
    MemoryEmbedding,
    /// Applying the commit.
    Commit,
}

impl Stage {
    /// The code this value has in a digest. Explicit, so that reordering or
    /// adding variants never moves an existing digest.
    pub fn digest_code(self) -> u8 {
        match self {
            Stage::Validate => 0,
            Stage::RetrievalEmbedding => 1,
            Stage::Prepare => 2,
            Stage::Chat => 3,
            Stage::MemoryEmbedding => 4,
            Stage::Commit => 5,
        }
    }
}

/// How a job ended. In JSON: `"ok"`, `{"failed": {"stage", "reason"}}` or
/// `{"refused": {"reason"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Reacted and remembered.
    Ok,
    /// Attempted and failed; costs incurred so far are kept.
    Failed {
        /// Where.
        stage: Stage,
        /// Why.
        reason: String,
    },
    /// Declined before any model call for it.
    Refused {
        /// Why.
        reason: String,
    },
}

/// A probe's answer in an outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct ProbeAnswer {
    /// Probe id.
    pub id: String,
    /// The parsed answer, `None` when no reply parsed.
    pub reply: Option<ProbeReply>,
}

/// What one job cost, by source. Chat costs are the job's own calls;
/// embedding costs are allocated estimates of shared physical calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode)]
pub struct JobSpend {
    /// The job's chat calls, as billed.
    pub chat: Spend,
    /// Estimated share of the retrieval-embedding stage.
    pub retrieval_embedding_estimate: Spend,
    /// Estimated share of the memory-embedding stage.
    pub memory_embedding_estimate: Spend,
}

impl JobSpend {
    /// Everything, summed.
    pub fn total(&self) -> Spend {
        let mut t = self.chat;
        t.add(&self.retrieval_embedding_estimate);
        t.add(&self.memory_embedding_estimate);
        t
    }
}

/// One job's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct Outcome {
    /// Tick.
    pub tick: u32,
    /// Position in the tick.
    pub position: u32,
    /// Persona index.
    pub persona: u32,
    /// Stimulus id.
    pub stimulus: String,
    /// Exposure number within the tick, from 0.
    pub exposure: u32,
    /// How it ended.
    pub status: Status,
    /// Memories retrieved, best first.
    pub retrieved: Vec<MemoryId>,
    /// Digest of the reaction prompt.
    pub prompt: Option<Digest>,
    /// The parsed reaction.
    pub reaction: Option<Reaction>,
    /// The reflection, if one ran.
    pub reflection: Option<ReflectionResult>,
    /// Probe answers.
    pub probes: Vec<ProbeAnswer>,
    /// Ids of the memories the job created.
    pub memories: Vec<MemoryId>,
    /// Every chat call of the job.
    pub chat_calls: Vec<ChatCallRecord>,
    /// Costs.
    pub spend: JobSpend,
    /// The semantic similarity rating of the reaction, when `[intent]`
    /// asks for it (`ssr` or `both`) and the job reacted.
    #[serde(default)]
    pub ssr: Option<crate::intent::SsrRating>,
}

impl Outcome {
    /// A bare outcome for a job that has not produced anything yet.
    pub fn new(tick: u32, position: u32, persona: u32, stimulus: String, exposure: u32) -> Outcome {
        Outcome {
            tick,
            position,
            persona,
            stimulus,
            exposure,
            status: Status::Ok,
            retrieved: Vec::new(),
            prompt: None,
            reaction: None,
            reflection: None,
            probes: Vec::new(),
            memories: Vec::new(),
            chat_calls: Vec::new(),
            spend: JobSpend::default(),
            ssr: None,
        }
    }

    /// In `probabilities` mode: the model's probabilities of purchase
    /// intent 1 to 5 where its reaction put it, as its last reaction call
    /// (the weighing after the reply) recorded them; in `verbalized` mode
    /// the shares that call's reply gave.
    pub fn intent_probabilities(&self) -> Option<Vec<f64>> {
        self.reaction.as_ref()?;
        let call = self.chat_calls.iter().rev().find(|c| c.purpose == crate::chat::ChatPurpose::Reaction)?;
        crate::chat::OptionProbabilities::parse_text(&call.reply)
            .map(|(p, _)| p)
            .or_else(|| crate::persona::reply::parse_shares(&crate::chat::schema::to_lines(&call.reply), 5).ok())
    }

    /// Feeds the content of the outcome (not its costs) into `w`.
    fn write_content(&self, w: &mut DigestWriter) {
        OutcomePart::CONTENT.iter().for_each(|f| self.write_part(*f, w));
    }

    /// Feeds the costs of the outcome into `w`.
    fn write_costs(&self, w: &mut DigestWriter) {
        OutcomePart::COSTS.iter().for_each(|f| self.write_part(*f, w));
    }

    /// The parts in which `self` and `other` differ, as the digests see
    /// them (content first, then costs): empty exactly when both digests
    /// would take the same bytes from the two. Replay names a divergence
    /// by them, so a part the digests cover is never left unnamed.
    pub fn differences(&self, other: &Outcome) -> Vec<OutcomePart> {
        let bytes = |o: &Outcome, f: OutcomePart| {
            let mut w = DigestWriter::new("outcome field");
            o.write_part(f, &mut w);
            w.finish()
        };
        OutcomePart::CONTENT
            .iter()
            .chain(&OutcomePart::COSTS)
            .copied()
            .filter(|f| bytes(self, *f) != bytes(other, *f))
            .collect()
    }

    /// Whether the digests take the same bytes from `self` and `other`
    /// (one hash of each; [`Outcome::differences`] says where they differ).
    pub fn digests_as(&self, other: &Outcome) -> bool {
        let all = |o: &Outcome| {
            let mut w = DigestWriter::new("outcome");
            o.write_content(&mut w);
            o.write_costs(&mut w);
            w.finish()
        };
        all(self) == all(other)
    }

    /// Feeds one part into `w`. The content digest takes
    /// [`OutcomePart::CONTENT`] in order, the full digest [`OutcomePart::COSTS`].
    fn write_part(&self, field: OutcomePart, w: &mut DigestWriter) {
        match field {
            OutcomePart::Job => {
                w.u32(self.position).u32(self.persona);
            }
            OutcomePart::Stimulus => {
                w.str(&self.stimulus).u32(self.exposure);
            }
            OutcomePart::Status => {
                match &self.status {
                    Status::Ok => w.u8(0),
                    Status::Failed { stage, reason } => w.u8(1).u8(stage.digest_code()).str(reason),
                    Status::Refused { reason } => w.u8(2).str(reason),
                };
            }
            OutcomePart::Retrieved => {
                w.u32(self.retrieved.len() as u32);
                for id in &self.retrieved {
                    w.u32(id.persona).u32(id.seq);
                }
            }
            OutcomePart::Prompt => {
                match &self.prompt {
                    Some(d) => w.u8(1).digest(d),
                    None => w.u8(0),
                };
            }
            OutcomePart::Reaction => {
                if let Some(r) = &self.reaction {
                    w.u8(1).str(&r.text).f32(r.sentiment).u8(r.intent).u8(r.importance);
                } else {
                    w.u8(0);
                }
            }
            OutcomePart::Reflection => {
                if let Some(r) = &self.reflection {
                    w.u8(1).u8(u8::from(r.fallback)).u32(r.insights.len() as u32);
                    for (text, imp) in &r.insights {
                        w.str(text).u8(*imp);
                    }
                } else {
                    w.u8(0);
                }
            }
            OutcomePart::Probes => {
                w.u32(self.probes.len() as u32);
                for p in &self.probes {
                    w.str(&p.id);
                    match &p.reply {
                        Some(r) => w.u8(1).u8(r.answer).str(&r.why),
                        None => w.u8(0),
                    };
                }
            }
            OutcomePart::Memories => {
                w.u32(self.memories.len() as u32);
                for id in &self.memories {
                    w.u32(id.seq);
                }
            }
            OutcomePart::ChatCalls => {
                w.u32(self.chat_calls.len() as u32);
                for c in &self.chat_calls {
                    w.u8(c.purpose.digest_code()).u32(c.attempt).digest(&c.request).str(&c.reply);
                    match &c.failed {
                        Some(why) => w.u8(1).str(why),
                        None => w.u8(0),
                    };
                }
            }
            OutcomePart::Ssr => {
                // Only runs that measure SSR (a content setting, in the
                // genesis digest) write it, so the digests of runs without
                // it stay put.
                if let Some(r) = &self.ssr {
                    w.u8(1);
                    r.pmf.iter().for_each(|p| {
                        w.f64(*p);
                    });
                    w.f64(r.expected);
                }
            }
            OutcomePart::Spend => {
                for s in
                    [self.spend.chat, self.spend.retrieval_embedding_estimate, self.spend.memory_embedding_estimate]
                {
                    w.u64(s.input_tokens).u64(s.output_tokens).u64(s.nano_usd);
                }
            }
            OutcomePart::Attempts => {
                // Transport attempts: a call that succeeded only on a retry
                // differs here and not in `digest`. Endpoint, model id and
                // latency depend on routing and the wall clock and stay out.
                for c in &self.chat_calls {
                    w.u32(c.attempts.len() as u32);
                    for a in &c.attempts {
                        w.u32(a.attempt);
                        match &a.error {
                            Some((class, message)) => w.u8(class.digest_code()).str(message),
                            None => w.u8(0),
                        };
                        w.u64(a.spend.input_tokens).u64(a.spend.output_tokens).u64(a.spend.nano_usd);
                    }
                }
            }
        }
    }
}

/// A part of an [`Outcome`] as the tick digests cover it. Replay names a
/// divergence by these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomePart {
    /// The job's position and persona.
    Job,
    /// The stimulus and its exposure number.
    Stimulus,
    /// How the job ended.
    Status,
    /// The memories retrieved.
    Retrieved,
    /// The reaction prompt's digest.
    Prompt,
    /// The parsed reaction.
    Reaction,
    /// The reflection.
    Reflection,
    /// The probe answers.
    Probes,
    /// The memories the job created.
    Memories,
    /// The chat calls' requests, replies and failures.
    ChatCalls,
    /// The semantic similarity rating.
    Ssr,
    /// The job's costs.
    Spend,
    /// The chat calls' transport attempts.
    Attempts,
}

impl OutcomePart {
    /// What the content digest covers, in the order it takes them.
    pub const CONTENT: [OutcomePart; 11] = [
        OutcomePart::Job,
        OutcomePart::Stimulus,
        OutcomePart::Status,
        OutcomePart::Retrieved,
        OutcomePart::Prompt,
        OutcomePart::Reaction,
        OutcomePart::Reflection,
        OutcomePart::Probes,
        OutcomePart::Memories,
        OutcomePart::ChatCalls,
        OutcomePart::Ssr,
    ];

    /// What only the full digest covers, in its order.
    pub const COSTS: [OutcomePart; 2] = [OutcomePart::Spend, OutcomePart::Attempts];

    /// The part's name in a message.
    pub fn name(self) -> &'static str {
        match self {
            OutcomePart::Job => "job position or persona",
            OutcomePart::Stimulus => "stimulus",
            OutcomePart::Status => "status",
            OutcomePart::Retrieved => "retrieved memory ids",
            OutcomePart::Prompt => "prompt",
            OutcomePart::Reaction => "reaction",
            OutcomePart::Reflection => "reflection",
            OutcomePart::Probes => "probe answers",
            OutcomePart::Memories => "new memory ids",
            OutcomePart::ChatCalls => "chat calls",
            OutcomePart::Ssr => "SSR rating",
            OutcomePart::Spend => "costs",
            OutcomePart::Attempts => "transport attempts",
        }
    }
}

impl std::fmt::Display for OutcomePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The two digests, chained over ticks.
///
/// `digest` covers persona state and outcome content: what must not change
/// when only the grouping of requests changes. `full_digest` also covers
/// costs and the physical embedding calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode)]
pub struct TickDigests {
    /// Content digest.
    pub digest: Digest,
    /// Everything recorded.
    pub full_digest: Digest,
}

impl TickDigests {
    /// The digests before the first tick. `digest` starts from what decides
    /// content (the config's content hash, scenario, seed, panel size);
    /// `full_digest` from the whole config as well, so operational settings
    /// (batching, concurrency, limits, cache, prices) reach only
    /// `full_digest`.
    pub fn genesis(config: &crate::config::Config, scenario_hash: &str, seed: u64, personas: u32) -> TickDigests {
        let digest = DigestWriter::new("run v1")
            .digest(&config.content_hash())
            .str(scenario_hash)
            .u64(seed)
            .u32(personas)
            .finish();
        let full_digest = DigestWriter::new("run full v1").digest(&digest).digest(&config.hash()).finish();
        TickDigests { digest, full_digest }
    }

    /// Chains one committed tick onto `self`. `personas` holds each
    /// persona's state digest in persona order (`None` for a persona whose
    /// actor is gone).
    pub fn chain(
        &self,
        tick: u32,
        outcomes: &[Outcome],
        personas: &[Option<Digest>],
        embedding: &[(StageStats, &[EmbedCall])],
    ) -> TickDigests {
        let f = self.content(tick, outcomes, personas);
        TickDigests { digest: f.1, full_digest: f.0.stages(embedding) }
    }

    /// Chains a merged tick (`sim-cli merge`): its content as
    /// [`TickDigests::chain`] hashes it, then `shards`, each shard's own
    /// full digest after the tick, in shard order.
    pub fn chain_merged(
        &self,
        tick: u32,
        outcomes: &[Outcome],
        personas: &[Option<Digest>],
        shards: impl IntoIterator<Item = Digest>,
    ) -> TickDigests {
        let f = self.content(tick, outcomes, personas);
        TickDigests { digest: f.1, full_digest: f.0.shards(shards) }
    }

    /// The content digest of a tick, and its full digest fed up to the
    /// embedding stages (or the shards).
    fn content(&self, tick: u32, outcomes: &[Outcome], personas: &[Option<Digest>]) -> (FullChain, Digest) {
        let mut c = ContentChain::new(self, tick, outcomes.len() as u32);
        outcomes.iter().for_each(|o| c.outcome(o));
        c.personas(personas.len() as u32);
        personas.iter().for_each(|p| c.persona(p.as_ref()));
        let digest = c.finish();
        let mut f = FullChain::new(self, &digest);
        outcomes.iter().for_each(|o| f.outcome(o));
        (f, digest)
    }
}

/// A tick's content digest ([`TickDigests::digest`]), fed a value at a
/// time: the outcomes in job order, then every persona's state digest in
/// persona order. A merge of shards feeds it from the shards in turn, and
/// gets the digest the whole panel's run chains.
pub struct ContentChain(DigestWriter);

impl ContentChain {
    /// The content digest of tick `tick`, with `outcomes` outcomes, after
    /// `prev`.
    pub fn new(prev: &TickDigests, tick: u32, outcomes: u32) -> ContentChain {
        let mut w = DigestWriter::new("tick v1");
        w.digest(&prev.digest).u32(tick).u32(outcomes);
        ContentChain(w)
    }

    /// The next outcome.
    pub fn outcome(&mut self, o: &Outcome) {
        o.write_content(&mut self.0);
    }

    /// After the outcomes: how many personas follow.
    pub fn personas(&mut self, n: u32) {
        self.0.u32(n);
    }

    /// The next persona's state digest (`None`: it is gone).
    pub fn persona(&mut self, d: Option<&Digest>) {
        match d {
            Some(d) => self.0.u8(1).digest(d),
            None => self.0.u8(0),
        };
    }

    /// The digest.
    pub fn finish(self) -> Digest {
        self.0.finish()
    }
}

/// A tick's full digest ([`TickDigests::full_digest`]): the content
/// digest, every outcome's costs in job order, then the embedding stages
/// (a run) or the shards' own full digests (a merge).
pub struct FullChain(DigestWriter);

impl FullChain {
    /// The full digest of the tick whose content digest is `digest`, after
    /// `prev`.
    pub fn new(prev: &TickDigests, digest: &Digest) -> FullChain {
        let mut f = DigestWriter::new("tick full v1");
        f.digest(&prev.full_digest).digest(digest);
        FullChain(f)
    }

    /// The next outcome's costs.
    pub fn outcome(&mut self, o: &Outcome) {
        o.write_costs(&mut self.0);
    }

    /// A run's tick ends with its embedding stages: their counters and
    /// physical calls.
    pub fn stages(mut self, embedding: &[(StageStats, &[EmbedCall])]) -> Digest {
        let f = &mut self.0;
        f.u32(embedding.len() as u32);
        for (stats, calls) in embedding {
            f.u64(stats.port_invocations).u64(stats.upstream_requests).u64(stats.texts_requested);
            f.u64(stats.unique_texts_submitted).u64(stats.cache_hits).u64(calls.len() as u64);
            for c in *calls {
                f.u64(c.texts.len() as u64);
                for t in &c.texts {
                    f.u32(*t);
                }
                f.u32(c.attempts);
                f.u64(c.spend.input_tokens).u64(c.spend.output_tokens).u64(c.spend.nano_usd);
            }
        }
        self.0.finish()
    }

    /// A merged tick ends with each shard's own full digest after it, in
    /// shard order: they cover the shards' embedding stages, which no
    /// trace records.
    pub fn shards(mut self, full: impl IntoIterator<Item = Digest>) -> Digest {
        self.0.str("merged shards v1");
        for d in full {
            self.0.digest(&d);
        }
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatAttempt, ChatPurpose, FailureClass};
    use crate::turn::ChatCallRecord;

    fn answered(attempts: Vec<ChatAttempt>) -> Outcome {
        let mut o = Outcome::new(1, 0, 0, "s".into(), 0);
        o.chat_calls.push(ChatCallRecord {
            purpose: ChatPurpose::Reaction,
            attempt: 0,
            request: Digest::default(),
            reply: "ok".into(),
            spend: Spend::default(),
            failed: None,
            estimated: false,
            attempts,
        });
        o
    }

    #[test]
    fn a_transport_retry_reaches_full_digest_only_and_latency_and_routing_reach_neither() {
        let ok = |attempt, endpoint: &str, latency_ms| ChatAttempt {
            attempt,
            endpoint: endpoint.into(),
            latency_ms,
            ..Default::default()
        };
        let failed = ChatAttempt { error: Some((FailureClass::Server, "HTTP 500".into())), ..ok(0, "a", 9) };
        let chain = |o: Outcome| TickDigests::default().chain(1, &[o], &[], &[]);
        let first_time = chain(answered(vec![ok(0, "a", 10)]));
        let on_retry = chain(answered(vec![failed, ok(1, "a", 10)]));
        assert_eq!(first_time.digest, on_retry.digest, "the content is the same");
        assert_ne!(first_time.full_digest, on_retry.full_digest, "the retry is recorded");
        assert_eq!(first_time, chain(answered(vec![ok(0, "b", 999)])), "endpoint and latency are not digested");
    }

    #[test]
    fn a_change_to_any_digested_field_is_named_and_only_that_field() {
        let base = answered(vec![ChatAttempt::default()]);
        type Change = (OutcomePart, fn(&mut Outcome));
        let changes: [Change; 13] = [
            (OutcomePart::Job, |o| o.position += 1),
            (OutcomePart::Stimulus, |o| o.exposure += 1),
            (OutcomePart::Status, |o| o.status = Status::Refused { reason: "no".into() }),
            (OutcomePart::Retrieved, |o| o.retrieved.push(MemoryId { persona: 0, seq: 3 })),
            (OutcomePart::Prompt, |o| o.prompt = Some(Digest::default())),
            (OutcomePart::Reaction, |o| {
                o.reaction = Some(Reaction { text: "t".into(), sentiment: 0.5, intent: 4, importance: 2 })
            }),
            (OutcomePart::Reflection, |o| o.reflection = Some(ReflectionResult { fallback: true, insights: vec![] })),
            (OutcomePart::Probes, |o| o.probes.push(ProbeAnswer { id: "p".into(), reply: None })),
            (OutcomePart::Memories, |o| o.memories.push(MemoryId { persona: 0, seq: 1 })),
            (OutcomePart::ChatCalls, |o| o.chat_calls[0].reply = "other".into()),
            (OutcomePart::Ssr, |o| {
                let pmf = [0.2; crate::intent::POINTS];
                o.ssr = Some(crate::intent::SsrRating { pmf, expected: 3.0, cost: Spend::default() })
            }),
            (OutcomePart::Spend, |o| o.spend.chat.output_tokens += 1),
            (OutcomePart::Attempts, |o| o.chat_calls[0].attempts[0].attempt = 2),
        ];
        let all: Vec<OutcomePart> = OutcomePart::CONTENT.iter().chain(&OutcomePart::COSTS).copied().collect();
        assert_eq!(all, changes.iter().map(|c| c.0).collect::<Vec<_>>(), "every field has a change here");
        assert!(base.digests_as(&base.clone()) && base.differences(&base.clone()).is_empty());
        for (field, change) in changes {
            let mut other = base.clone();
            change(&mut other);
            assert_eq!(base.differences(&other), vec![field], "{field}");
            assert!(!base.digests_as(&other), "{field}");
            let (a, b) = (TickDigests::default(), TickDigests::default());
            let (a, b) = (a.chain(1, std::slice::from_ref(&base), &[], &[]), b.chain(1, &[other], &[], &[]));
            let content = OutcomePart::CONTENT.contains(&field);
            assert_eq!(a.digest != b.digest, content, "{field} reaches the content digest exactly when listed there");
            assert_ne!(a.full_digest, b.full_digest, "{field} reaches the full digest");
        }
    }
}
