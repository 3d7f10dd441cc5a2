//! The turn coordinator: owns the tick loop's job positions, sequences the
//! stages over the persona actors, maps failures to outcomes and assembles
//! the outcomes in job order.

use crate::persona::PersonaMsg;
use crate::progress::Progress;
use crate::shared::RunShared;
use engine::clock::Clock;
use engine::cost::Spend;
use engine::digest::Digest;
use engine::embed::{embed_stage, EmbedCall, EmbedKey, EmbedRole, Plan, StageResult, StageStats};
use engine::memory::Change;
use engine::persona::state::Consolidate;
use engine::persona::state::JobCommit;
use engine::persona::{PersonaCommit, PersonaState};
use engine::report::Timings;
use engine::scenario::Job;
use engine::trace::{EmbedExchange, MemoryEvent, TickFrame};
use engine::turn::{
    converse, drafts, Conversation, Outcome, Prepared, ProbeAnswer, Stage, Status, TickContext, TickDigests,
};
use futures::StreamExt;
use ractor::concurrency::oneshot;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// Everything one committed tick produced.
#[derive(Debug, Clone)]
pub struct TickReport {
    /// Tick number.
    pub tick: u32,
    /// One outcome per job, in job order.
    pub outcomes: Vec<Outcome>,
    /// Digests after this tick.
    pub digests: TickDigests,
    /// Each persona's state digest after this tick (`None`: actor gone).
    pub persona_digests: Vec<Option<Digest>>,
    /// Retrieval-stage counters, billed spend and physical calls.
    pub retrieval: (StageStats, Spend, Vec<EmbedCall>),
    /// Memory-stage counters, billed spend and physical calls.
    pub memory: (StageStats, Spend, Vec<EmbedCall>),
    /// Wall-clock stage timings in milliseconds (reporting only).
    pub timings: Timings,
    /// Every embedding port invocation of the tick, as answered.
    pub embeddings: Vec<EmbedExchange>,
    /// Memories created at the commit, in job order.
    pub memories: Vec<MemoryEvent>,
    /// Stimulus ids shown, in first-exposure order.
    pub stimuli: Vec<String>,
    /// Consolidation changes per persona (decays and accesses left out).
    pub consolidation: Vec<(u32, Vec<Change>)>,
}

impl TickReport {
    /// The trace frame of this tick.
    pub fn into_frame(self) -> TickFrame {
        TickFrame {
            tick: self.tick,
            stimuli: self.stimuli,
            outcomes: self.outcomes,
            embeddings: self.embeddings,
            memories: self.memories,
            persona_digests: self.persona_digests,
            digests: self.digests,
            consolidation: self.consolidation,
        }
    }
}

/// Messages to the coordinator.
pub enum TurnMsg {
    /// Runs one tick through all stages and commits it.
    RunTick {
        /// Tick number, from 1, in order.
        tick: u32,
        /// Reply with the committed tick.
        reply: RpcReplyPort<TickReport>,
    },
    /// A copy of one persona's state (`None` if its actor is gone).
    Snapshot {
        /// Persona index.
        persona: u32,
        /// Reply.
        reply: RpcReplyPort<Option<PersonaState>>,
    },
}

/// A persona's actor, or why it is gone.
enum Slot {
    Live(ActorRef<PersonaMsg>),
    Gone(String),
}

/// The coordinator's mutable state.
pub struct CoordinatorState {
    slots: Vec<Slot>,
    interests: Vec<Vec<String>>,
    digests: TickDigests,
    persona_digests: Vec<Option<Digest>>,
}

/// Start-up arguments.
pub struct CoordinatorArgs {
    /// Persona actors, by persona index.
    pub personas: Vec<ActorRef<PersonaMsg>>,
    /// Each persona's interests, for interest-targeted exposure.
    pub interests: Vec<Vec<String>>,
    /// Digests before the first tick.
    pub genesis: TickDigests,
}

/// The coordinator. `self` is read-only.
pub struct TurnCoordinator {
    /// Shared run inputs.
    pub shared: Arc<RunShared>,
    /// Where live progress goes.
    pub progress: Arc<dyn Progress>,
}

/// Contiguous job ranges per persona (jobs are ordered by persona).
fn groups(jobs: &[Job]) -> Vec<(u32, Range<usize>)> {
    let mut out: Vec<(u32, Range<usize>)> = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        match out.last_mut() {
            Some((p, r)) if *p == j.persona => r.end = i + 1,
            _ => out.push((j.persona, i..i + 1)),
        }
    }
    out
}

fn fail(o: &mut Outcome, stage: Stage, reason: impl Into<String>) {
    o.status = Status::Failed { stage, reason: reason.into() };
}

fn is_ok(o: &Outcome) -> bool {
    matches!(o.status, Status::Ok)
}

fn stage_span(name: &'static str) -> tracing::Span {
    tracing::debug_span!("stage", name)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl TurnCoordinator {
    fn key(&self, role: EmbedRole) -> EmbedKey {
        let e = &self.shared.config.raw.embedding;
        EmbedKey { role, model: e.model.clone(), dim: e.dim }
    }

    async fn stage_embed(&self, role: EmbedRole, requests: Vec<(u32, String)>) -> StageResult {
        let result = match &self.shared.embedder {
            Some(port) => embed_stage(&**port, &self.key(role), &Plan::new(requests), self.shared.strategy).await,
            None => StageResult { vectors: vec![None; requests.len()], ..Default::default() },
        };
        let s = &result.stats;
        tracing::debug!(
            texts = s.texts_requested,
            unique = s.unique_texts_submitted,
            invocations = s.port_invocations,
            upstream = s.upstream_requests,
            failed = result.failed.len(),
            "embedding stage done"
        );
        result
    }

    /// Sends one message per live persona with jobs, then collects the
    /// replies in persona order. A dropped reply (the actor failed) marks
    /// the persona gone and fails its jobs at `stage`.
    async fn ask<R: Send + 'static>(
        &self,
        state: &mut CoordinatorState,
        outcomes: &mut [Outcome],
        groups: &[(u32, Range<usize>)],
        stage: Stage,
        tick: u32,
        mut build: impl FnMut(usize, Range<usize>, RpcReplyPort<R>) -> Option<PersonaMsg>,
    ) -> Vec<Option<R>> {
        let mut pending = Vec::with_capacity(groups.len());
        for (g, (p, range)) in groups.iter().enumerate() {
            let Slot::Live(actor) = &state.slots[*p as usize] else {
                pending.push(None);
                continue;
            };
            if !outcomes[range.clone()].iter().any(is_ok) {
                pending.push(None);
                continue;
            }
            let (tx, rx) = oneshot();
            match build(g, range.clone(), tx.into()) {
                Some(msg) => {
                    let sent = actor.cast(msg).is_ok();
                    pending.push(Some((rx, sent)));
                }
                None => pending.push(None),
            }
        }
        let mut replies = Vec::with_capacity(groups.len());
        for ((p, range), pend) in groups.iter().zip(pending) {
            let Some((rx, sent)) = pend else {
                replies.push(None);
                continue;
            };
            let got = if sent { rx.await.ok() } else { None };
            if got.is_none() {
                let reason = format!("persona actor {} failed during tick {tick}", engine::persona::profile::label(*p));
                for o in outcomes[range.clone()].iter_mut().filter(|o| is_ok(o)) {
                    fail(o, stage, reason.clone());
                }
                state.slots[*p as usize] = Slot::Gone(reason);
                state.persona_digests[*p as usize] = None;
            }
            replies.push(got);
        }
        replies
    }

    async fn run_tick(&self, state: &mut CoordinatorState, tick: u32) -> TickReport {
        let shared = &self.shared;
        let started = Instant::now();
        let now = Clock::with_hours_per_tick(shared.config.raw.run.hours_per_tick).at(tick);
        let interests = &state.interests;
        let jobs = shared.scenario.jobs(shared.seed, tick, shared.personas, |p| &interests[p as usize]);
        let groups = groups(&jobs);
        let mut outcomes: Vec<Outcome> = jobs
            .iter()
            .map(|j| {
                Outcome::new(
                    tick,
                    j.position,
                    j.persona,
                    shared.scenario.stimuli[j.stimulus as usize].id.clone(),
                    j.exposure,
                )
            })
            .collect();

        // 1. Validate: personas whose actor is gone are refused up front.
        self.progress.stage(tick, "validate", 0, jobs.len() as u64);
        for (p, range) in &groups {
            if let Slot::Gone(reason) = &state.slots[*p as usize] {
                for o in &mut outcomes[range.clone()] {
                    o.status = Status::Refused { reason: format!("persona is unavailable: {reason}") };
                }
            }
        }

        // 2. Retrieval embedding.
        self.progress.stage(tick, "retrieval embedding", 0, jobs.len() as u64);
        let needs = self
            .ask(state, &mut outcomes, &groups, Stage::RetrievalEmbedding, tick, |_, range, reply| {
                Some(PersonaMsg::RetrievalNeeds { tick, jobs: jobs[range].to_vec(), reply })
            })
            .instrument(stage_span("retrieval-needs"))
            .await;
        let mut requests = Vec::new();
        for ((_, range), need) in groups.iter().zip(&needs) {
            let Some(need) = need else { continue };
            for (i, text) in range.clone().zip(need) {
                if let (Some(text), true) = (text, is_ok(&outcomes[i])) {
                    requests.push((i as u32, text.clone()));
                }
            }
        }
        let positions: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let retrieval =
            self.stage_embed(EmbedRole::Retrieval, requests).instrument(stage_span("retrieval-embedding")).await;
        let mut query: Vec<Option<Arc<[f32]>>> = vec![None; jobs.len()];
        for (r, pos) in positions.iter().enumerate() {
            query[*pos as usize] = retrieval.vectors[r].as_ref().map(|e| e.vector.clone());
        }
        for (pos, spend) in &retrieval.allocation {
            outcomes[*pos as usize].spend.retrieval_embedding_estimate = *spend;
        }
        for (pos, reason) in &retrieval.failed {
            fail(&mut outcomes[*pos as usize], Stage::RetrievalEmbedding, reason.clone());
        }

        // 3. Retrieve and prompt, each persona over its own memories.
        self.progress.stage(tick, "retrieve and prompt", 0, jobs.len() as u64);
        let prepared_replies = self
            .ask(state, &mut outcomes, &groups, Stage::Prepare, tick, |_, range, reply| {
                let batch = range.map(|i| (jobs[i], query[i].clone())).collect();
                Some(PersonaMsg::Prepare { tick, now, jobs: batch, reply })
            })
            .instrument(stage_span("retrieve-and-prompt"))
            .await;
        let mut ready: Vec<Prepared> = Vec::with_capacity(jobs.len());
        for ((_, range), reply) in groups.iter().zip(prepared_replies) {
            let Some(reply) = reply else { continue };
            for (i, prepared) in range.clone().zip(reply) {
                if !is_ok(&outcomes[i]) {
                    continue;
                }
                match prepared {
                    Ok(p) => {
                        outcomes[i].retrieved = p.retrieved.clone();
                        outcomes[i].prompt = Some(p.reaction.prompt_digest());
                        ready.push(p);
                    }
                    Err(reason) => outcomes[i].status = Status::Refused { reason },
                }
            }
        }
        let preparation_ms = ms(started);

        // 4. Chat, concurrently and bounded; results are placed by position.
        let chat_started = Instant::now();
        let total = ready.len() as u64;
        self.progress.stage(tick, "chat", 0, total);
        let concurrency = shared.config.raw.chat.concurrency;
        let mut conversed: Vec<(Prepared, Conversation)> = Vec::with_capacity(ready.len());
        let mut stream = futures::stream::iter(ready.into_iter().map(|p| {
            let shared = Arc::clone(shared);
            let position = p.job.position;
            let task = tokio::spawn(async move {
                let c = converse(&*shared.chat, &p, &shared.config, &shared.scenario, tick).await;
                (p, c)
            });
            async move { (position, task.await) }
        }))
        .buffered(concurrency);
        let mut done = 0u64;
        let chat_span = stage_span("chat");
        while let Some((position, joined)) = stream.next().instrument(chat_span.clone()).await {
            done += 1;
            if done % 1024 == 0 || done == total {
                self.progress.stage(tick, "chat", done, total);
            }
            match joined {
                Ok(pair) => conversed.push(pair),
                Err(e) => fail(&mut outcomes[position as usize], Stage::Chat, format!("chat task failed: {e}")),
            }
        }
        drop(stream);
        let chat_ms = ms(chat_started);
        chat_span.in_scope(|| tracing::debug!(jobs = total, "chat stage done"));

        // 5. Draft memories.
        let finalise_started = Instant::now();
        self.progress.stage(tick, "memory embedding", 0, conversed.len() as u64);
        let ctx = TickContext { cfg: &shared.config, scenario: &shared.scenario, tick, now };
        let mut parts: Vec<Option<JobCommit>> = vec![None; jobs.len()];
        let mut requests = Vec::new();
        for (prepared, conversation) in conversed {
            let i = prepared.job.position as usize;
            let o = &mut outcomes[i];
            for c in &conversation.calls {
                o.spend.chat.add(&c.spend);
            }
            o.chat_calls = conversation.calls;
            match conversation.result {
                Err(reason) => fail(o, Stage::Chat, reason),
                Ok(c) => {
                    let new = drafts(&prepared.job, &ctx, &c);
                    for m in &new {
                        requests.push((i as u32, m.description.clone()));
                    }
                    o.reaction = Some(c.reaction.clone());
                    o.reflection = c.reflection.clone();
                    o.probes =
                        c.probes.iter().map(|(id, r)| ProbeAnswer { id: id.clone(), reply: r.clone() }).collect();
                    parts[i] = Some(JobCommit {
                        touched: prepared.retrieved,
                        memories: new,
                        belief: Some((o.stimulus.clone(), c.reaction.intent, c.reaction.sentiment)),
                        importance: u32::from(c.reaction.importance),
                        reflected: c.reflection.is_some(),
                    });
                }
            }
        }

        // 6. Memory embedding.
        let owners: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let memory = self.stage_embed(EmbedRole::Memory, requests).instrument(stage_span("memory-embedding")).await;
        let mut next = vec![0usize; jobs.len()];
        for (r, owner) in owners.iter().enumerate() {
            let i = *owner as usize;
            if let Some(part) = parts[i].as_mut() {
                part.memories[next[i]].vector = memory.vectors[r].clone();
                next[i] += 1;
            }
        }
        for (pos, spend) in &memory.allocation {
            outcomes[*pos as usize].spend.memory_embedding_estimate = *spend;
        }
        for (pos, reason) in &memory.failed {
            fail(&mut outcomes[*pos as usize], Stage::MemoryEmbedding, reason.clone());
            parts[*pos as usize] = None;
        }

        // 7. Commit at the tick boundary, persona by persona.
        self.progress.stage(tick, "commit", 0, jobs.len() as u64);
        let mut committed: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
        let section = &shared.config.raw.consolidation;
        let consolidate = section.enabled.then(|| Consolidate {
            rules: section.rules.clone(),
            dry_run: section.dry_run,
            end_session: tick == shared.session_end_tick,
        });
        let drafted: Vec<Option<Vec<engine::persona::state::NewMemory>>> =
            parts.iter().map(|p| p.as_ref().map(|p| p.memories.clone())).collect();
        let commits = self
            .ask(state, &mut outcomes, &groups, Stage::Commit, tick, |g, range, reply| {
                let ok: Vec<usize> = range.filter(|i| parts[*i].is_some()).collect();
                if ok.is_empty() && consolidate.is_none() {
                    return None;
                }
                let jobs_commit = ok.iter().filter_map(|i| parts[*i].take()).collect();
                committed[g] = ok;
                Some(PersonaMsg::Commit {
                    commit: PersonaCommit { tick, now, jobs: jobs_commit, consolidation: consolidate.clone() },
                    reply,
                })
            })
            .instrument(stage_span("commit"))
            .await;
        let mut consolidation = Vec::new();
        for (g, reply) in commits.into_iter().enumerate() {
            let Some(applied) = reply else { continue };
            let (p, _) = &groups[g];
            state.persona_digests[*p as usize] = Some(applied.digest);
            for (i, ids) in committed[g].iter().zip(applied.ids) {
                outcomes[*i].memories = ids;
            }
            if !applied.changes.is_empty() {
                consolidation.push((*p, applied.changes));
            }
        }
        for o in outcomes.iter_mut().filter(|o| !is_ok(o)) {
            o.memories.clear();
        }
        let mut memories = Vec::new();
        for (o, drafts) in outcomes.iter().zip(&drafted) {
            let Some(drafts) = drafts else { continue };
            for (id, m) in o.memories.iter().zip(drafts) {
                memories.push(MemoryEvent {
                    id: *id,
                    position: o.position,
                    kind: m.kind,
                    description: m.description.clone(),
                    importance: m.importance,
                    sentiment: m.sentiment,
                    sources: m.sources.clone(),
                });
            }
        }
        let mut stimuli: Vec<String> = Vec::new();
        for o in &outcomes {
            if stimuli.last() != Some(&o.stimulus) && !stimuli.contains(&o.stimulus) {
                stimuli.push(o.stimulus.clone());
            }
        }
        let tick_digests = state.digests.chain(
            tick,
            &outcomes,
            &state.persona_digests,
            &[(retrieval.stats, &retrieval.calls), (memory.stats, &memory.calls)],
        );
        state.digests = tick_digests;
        let finalise_ms = ms(finalise_started);
        TickReport {
            tick,
            outcomes,
            digests: tick_digests,
            persona_digests: state.persona_digests.clone(),
            retrieval: (retrieval.stats, retrieval.provider_spend, retrieval.calls),
            memory: (memory.stats, memory.provider_spend, memory.calls),
            timings: Timings {
                total: ms(started),
                preparation: preparation_ms,
                chat: chat_ms,
                memory_finalisation: finalise_ms,
            },
            embeddings: shared.recorder.as_ref().map(|r| r.take()).unwrap_or_default(),
            memories,
            stimuli,
            consolidation,
        }
    }
}

impl Actor for TurnCoordinator {
    type Msg = TurnMsg;
    type State = CoordinatorState;
    type Arguments = CoordinatorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: CoordinatorArgs,
    ) -> Result<CoordinatorState, ActorProcessingErr> {
        let n = args.personas.len();
        Ok(CoordinatorState {
            slots: args.personas.into_iter().map(Slot::Live).collect(),
            interests: args.interests,
            digests: args.genesis,
            persona_digests: vec![Some(Digest::default()); n],
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: TurnMsg,
        state: &mut CoordinatorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TurnMsg::RunTick { tick, reply } => {
                let report = self.run_tick(state, tick).instrument(tracing::info_span!("tick", tick)).await;
                tracing::info!(tick, jobs = report.outcomes.len(), digest = %report.digests.digest, "tick committed");
                let _ = reply.send(report);
            }
            TurnMsg::Snapshot { persona, reply } => {
                let snapshot = match state.slots.get(persona as usize) {
                    Some(Slot::Live(actor)) => {
                        let (tx, rx) = oneshot();
                        match actor.cast(PersonaMsg::Snapshot { reply: tx.into() }) {
                            Ok(()) => rx.await.ok(),
                            Err(_) => None,
                        }
                    }
                    Some(Slot::Gone(_)) | None => None,
                };
                let _ = reply.send(snapshot);
            }
        }
        Ok(())
    }
}
