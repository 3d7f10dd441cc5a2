//! The turn coordinator: owns the tick loop's job positions and the store
//! of resting personas, sequences the stages over the persona hosts
//! (activating personas a window at a time), maps failures to outcomes and
//! assembles the outcomes in job order.

use crate::persona::{Activation, Hosted, PersonaMsg};
use crate::progress::Progress;
use crate::shared::RunShared;
use engine::clock::Clock;
use engine::cost::Spend;
use engine::digest::Digest;
use engine::embed::{embed_stage, EmbedCall, EmbedKey, EmbedRole, Plan, StageResult, StageStats};
use engine::intent::stage::SsrPlan;
use engine::memory::Change;
use engine::persona::state::Consolidate;
use engine::persona::state::JobCommit;
use engine::persona::{PersonaCommit, PersonaState};
use engine::report::Timings;
use engine::scenario::Job;
use engine::store::trace::{EmbedExchange, MemoryEvent, TickFrame};
use engine::turn::{drafts, Conversation, Outcome, Prepared, ProbeAnswer, Stage, Status, TickContext, TickDigests};
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

/// Where a persona is: at rest in the store, activated on a host for the
/// stage in progress, or gone (refused for the rest of the run, and why).
enum Slot {
    Resting(Activation),
    Active,
    Gone(String),
}

/// The coordinator's mutable state.
pub struct CoordinatorState {
    /// Every persona, by index: the compact store.
    slots: Vec<Slot>,
    /// The pool of hosts personas are activated on.
    hosts: Vec<ActorRef<PersonaMsg>>,
    /// The most personas active at once.
    window: usize,
    interests: Vec<Vec<Arc<str>>>,
    digests: TickDigests,
    persona_digests: Vec<Option<Digest>>,
    /// The SSR anchor statements' vectors, once a memory stage has
    /// embedded them (all sets, in order).
    anchors: Option<Vec<engine::embed::Embedding>>,
}

/// Start-up arguments.
pub struct CoordinatorArgs {
    /// Every persona's starting state, by persona index.
    pub personas: Vec<Activation>,
    /// The persona hosts.
    pub hosts: Vec<ActorRef<PersonaMsg>>,
    /// The most personas active at once (at least 1).
    pub window: usize,
    /// Each persona's interests, for interest-targeted exposure.
    pub interests: Vec<Vec<Arc<str>>>,
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

/// Refuses persona `group.0` for the rest of the run and fails its jobs
/// still open at `stage`; `why` follows "persona actor p-…".
fn gone(
    state: &mut CoordinatorState,
    outcomes: &mut [Outcome],
    group: &(u32, Range<usize>),
    stage: Stage,
    why: String,
) {
    let (p, range) = group;
    let reason = format!("persona actor {} {why}", engine::persona::profile::label(*p));
    for o in outcomes[range.clone()].iter_mut().filter(|o| is_ok(o)) {
        fail(o, stage, reason.clone());
    }
    state.slots[*p as usize] = Slot::Gone(reason);
    state.persona_digests[*p as usize] = None;
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

    async fn stage_embed<T: AsRef<str>>(&self, role: EmbedRole, requests: Vec<(u32, T)>) -> StageResult {
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

    /// Activates every resting persona with jobs still to do (for which
    /// `build` gives an input), a window at a time: each window is split
    /// into one batch per host, the batches run concurrently, and every
    /// state comes back to the store with its answer. Answers are returned
    /// by group, in persona order. A persona whose handler failed (or whose
    /// host did) is gone: its jobs fail at `stage`.
    #[allow(clippy::too_many_arguments)]
    async fn ask<I, R: Send + 'static>(
        &self,
        state: &mut CoordinatorState,
        outcomes: &mut [Outcome],
        groups: &[(u32, Range<usize>)],
        stage: Stage,
        tick: u32,
        mut build: impl FnMut(usize, Range<usize>) -> Option<I>,
        message: impl Fn(Vec<(Activation, I)>, RpcReplyPort<Vec<Hosted<R>>>) -> PersonaMsg,
    ) -> Vec<Option<R>> {
        let mut replies: Vec<Option<R>> = groups.iter().map(|_| None).collect();
        let mut due = Vec::with_capacity(groups.len());
        for (g, (p, range)) in groups.iter().enumerate() {
            if !matches!(state.slots[*p as usize], Slot::Resting(_)) || !outcomes[range.clone()].iter().any(is_ok) {
                continue;
            }
            if let Some(input) = build(g, range.clone()) {
                due.push((g, input));
            }
        }
        let mut due = due.into_iter().peekable();
        while due.peek().is_some() {
            let window: Vec<(usize, I)> = due.by_ref().take(state.window).collect();
            let hosts = state.hosts.len().min(window.len());
            if hosts == 0 {
                for (g, _) in &window {
                    gone(state, outcomes, &groups[*g], stage, "no persona host is left".into());
                }
                continue;
            }
            // Contiguous batches of near-equal size, one per host.
            let (per, extra) = (window.len() / hosts, window.len() % hosts);
            let mut window = window.into_iter();
            let mut pending = Vec::with_capacity(hosts);
            for h in 0..hosts {
                let take = per + usize::from(h < extra);
                let mut members = Vec::with_capacity(take);
                let mut batch = Vec::with_capacity(take);
                for (g, input) in window.by_ref().take(take) {
                    let p = groups[g].0 as usize;
                    if let Slot::Resting(activation) = std::mem::replace(&mut state.slots[p], Slot::Active) {
                        members.push(g);
                        batch.push((activation, input));
                    }
                }
                let (tx, rx) = oneshot();
                let sent = state.hosts[h].cast(message(batch, tx.into())).is_ok();
                pending.push((h, members, rx, sent));
            }
            let mut dead_hosts = Vec::new();
            for (h, members, rx, sent) in pending {
                let answers = if sent { rx.await.ok() } else { None };
                let Some(answers) = answers.filter(|a| a.len() == members.len()) else {
                    dead_hosts.push(h);
                    for g in members {
                        let reason = format!("its host failed during tick {tick}");
                        gone(state, outcomes, &groups[g], stage, reason);
                    }
                    continue;
                };
                for (g, hosted) in members.into_iter().zip(answers) {
                    let p = groups[g].0 as usize;
                    match hosted {
                        Ok((activation, answer)) => {
                            state.slots[p] = Slot::Resting(activation);
                            replies[g] = Some(answer);
                        }
                        Err(panic) => {
                            tracing::warn!(persona = p, tick, %panic, "a persona's handler panicked; the rest of the panel continues");
                            gone(state, outcomes, &groups[g], stage, format!("failed during tick {tick}"));
                        }
                    }
                }
            }
            for h in dead_hosts.into_iter().rev() {
                state.hosts.remove(h);
            }
        }
        replies
    }

    /// Runs one tick as `docs/ARCHITECTURE.md` ("One tick through the
    /// code") walks it: one method per stage over the tick's [`TickWork`].
    async fn run_tick(&self, state: &mut CoordinatorState, tick: u32) -> TickReport {
        let mut work = self.begin(state, tick);
        self.validate(state, &mut work);
        self.retrieval_embedding(state, &mut work).instrument(stage_span("retrieval-embedding")).await;
        // Stages 3 and 4 run a window of personas at a time, so that only
        // one window's prompts exist at once; results stay in job order.
        work.timings.preparation = ms(work.started);
        let groups = work.groups.len();
        let mut start = 0;
        while start < groups {
            let window = start..(start + state.window).min(groups);
            start = window.end;
            let prepare_started = Instant::now();
            self.retrieve_and_prompt(state, &mut work, window).instrument(stage_span("retrieve-and-prompt")).await;
            work.timings.preparation += ms(prepare_started);
            let chat_started = Instant::now();
            self.chat(&mut work).instrument(stage_span("chat")).await;
            work.timings.chat += ms(chat_started);
        }
        let finalise_started = Instant::now();
        let mut requests = self.draft_memories(&mut work);
        let ssr = self.ssr_requests(state, &work, &mut requests);
        self.memory_embedding(&mut work, requests, ssr.as_ref()).instrument(stage_span("memory-embedding")).await;
        if let Some(plan) = ssr {
            self.rate_intent(state, &mut work, &plan);
        }
        self.commit(state, &mut work).instrument(stage_span("commit")).await;
        work.timings.memory_finalisation = ms(finalise_started);
        self.finish(state, work)
    }

    /// The tick's jobs, in job order, each with a bare outcome.
    fn begin(&self, state: &CoordinatorState, tick: u32) -> TickWork {
        let shared = &self.shared;
        let started = Instant::now();
        let now = Clock::with_hours_per_tick(shared.config.raw.run.hours_per_tick).at(tick);
        let interests = &state.interests;
        let jobs = shared.scenario.jobs(shared.seed, tick, shared.personas, |p| &interests[p as usize]);
        let outcomes = jobs
            .iter()
            .map(|j| {
                let stimulus = shared.scenario.stimuli[j.stimulus as usize].id.clone();
                Outcome::new(tick, j.position, j.persona, stimulus, j.exposure)
            })
            .collect();
        TickWork {
            tick,
            now,
            started,
            groups: groups(&jobs),
            query: vec![None; jobs.len()],
            parts: vec![None; jobs.len()],
            // Room for every job's conversation up front: a tick-long list
            // grown by doubling copies itself into fresh pages each time.
            conversed: Vec::with_capacity(jobs.len()),
            jobs,
            outcomes,
            ready: Vec::new(),
            drafted: Vec::new(),
            retrieval: StageResult::default(),
            memory: StageResult::default(),
            consolidation: Vec::new(),
            timings: Timings::default(),
        }
    }

    /// Stage 1: personas whose actor is gone are refused up front.
    fn validate(&self, state: &CoordinatorState, work: &mut TickWork) {
        self.progress.stage(work.tick, "validate", 0, work.jobs.len() as u64);
        for (p, range) in &work.groups {
            if let Slot::Gone(reason) = &state.slots[*p as usize] {
                for o in &mut work.outcomes[range.clone()] {
                    o.status = Status::Refused { reason: format!("persona is unavailable: {reason}") };
                }
            }
        }
    }

    /// Stage 2: each persona says what it needs embedded; the texts go
    /// through one deduplicated port call and the vectors back to their jobs.
    async fn retrieval_embedding(&self, state: &mut CoordinatorState, work: &mut TickWork) {
        let tick = work.tick;
        self.progress.stage(tick, "retrieval embedding", 0, work.jobs.len() as u64);
        let jobs = &work.jobs;
        let needs = self
            .ask(
                state,
                &mut work.outcomes,
                &work.groups,
                Stage::RetrievalEmbedding,
                tick,
                |_, range| Some(jobs[range].to_vec()),
                |batch, reply| PersonaMsg::RetrievalNeeds { tick, batch, reply },
            )
            .await;
        let mut requests = Vec::new();
        for ((_, range), need) in work.groups.iter().zip(needs) {
            let Some(need) = need else { continue };
            for (i, text) in range.clone().zip(need) {
                if let (Some(text), true) = (text, is_ok(&work.outcomes[i])) {
                    requests.push((i as u32, text));
                }
            }
        }
        let positions: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let retrieval = self.stage_embed(EmbedRole::Retrieval, requests).await;
        for (r, pos) in positions.iter().enumerate() {
            work.query[*pos as usize] = retrieval.vectors[r].as_ref().map(|e| e.vector.clone());
        }
        for (pos, spend) in &retrieval.allocation {
            work.outcomes[*pos as usize].spend.retrieval_embedding_estimate = *spend;
        }
        for (pos, reason) in &retrieval.failed {
            fail(&mut work.outcomes[*pos as usize], Stage::RetrievalEmbedding, reason.clone());
        }
        work.retrieval = retrieval;
    }

    /// Stage 3, for the personas of `window` (indices into the tick's
    /// groups): each ranks its own memories and builds its prompts; a
    /// context-budget refusal becomes the job's outcome.
    async fn retrieve_and_prompt(&self, state: &mut CoordinatorState, work: &mut TickWork, window: Range<usize>) {
        let (tick, now) = (work.tick, work.now);
        let groups = &work.groups[window];
        let first_job = groups.first().map_or(0, |(_, r)| r.start) as u64;
        self.progress.stage(tick, "retrieve and prompt", first_job, work.jobs.len() as u64);
        work.ready.reserve_exact(groups.iter().map(|(_, r)| r.len()).sum());
        let (jobs, query) = (&work.jobs, &work.query);
        let replies = self
            .ask(
                state,
                &mut work.outcomes,
                groups,
                Stage::Prepare,
                tick,
                |_, range| Some(range.map(|i| (jobs[i], query[i].clone())).collect()),
                |batch, reply| PersonaMsg::Prepare { tick, now, batch, reply },
            )
            .await;
        for ((_, range), reply) in groups.iter().zip(replies) {
            let Some(reply) = reply else { continue };
            for (i, prepared) in range.clone().zip(reply) {
                let o = &mut work.outcomes[i];
                if !is_ok(o) {
                    continue;
                }
                match prepared {
                    Ok(p) => {
                        o.retrieved = p.retrieved.clone();
                        o.prompt = Some(p.reaction.prompt_digest());
                        work.ready.push(p);
                    }
                    Err(refusal) => o.status = Status::Refused { reason: refusal.to_string() },
                }
            }
        }
    }

    /// Stage 4: the conversations of the jobs prepared so far, on the chat
    /// pool ([`crate::chat_pool`]); results are kept in job order whatever
    /// order they finish in. A panic in one conversation fails that job
    /// alone, with the panic's message as its reason.
    async fn chat(&self, work: &mut TickWork) {
        let ready = std::mem::take(&mut work.ready);
        let positions: Vec<u32> = ready.iter().map(|p| p.job.position).collect();
        let (before, total) = (work.conversed.len() as u64, work.jobs.len() as u64);
        let (slots, lost) =
            crate::chat_pool::converse_all(&self.shared, &self.progress, work.tick, ready, (before, total)).await;
        work.conversed.reserve(positions.len());
        for (slot, &position) in slots.into_iter().zip(&positions) {
            let o = &mut work.outcomes[position as usize];
            match slot {
                Some((p, Ok(conversation))) => work.conversed.push((p, conversation)),
                Some((_, Err(panic))) => fail(o, Stage::Chat, format!("chat panicked: {panic}")),
                // A pool task can only fail outside a conversation (those
                // are caught); the jobs it held fail with it.
                None => fail(o, Stage::Chat, format!("the chat task failed: {}", lost.as_deref().unwrap_or("?"))),
            }
        }
        tracing::debug!(jobs = positions.len(), "chat window done");
    }

    /// Stage 5: outcomes take their replies, and each successful job drafts
    /// its memories (without vectors). Returns the texts to embed, by job
    /// position.
    fn draft_memories(&self, work: &mut TickWork) -> Vec<(u32, Arc<str>)> {
        let shared = &self.shared;
        self.progress.stage(work.tick, "memory embedding", 0, work.conversed.len() as u64);
        let ctx = TickContext { cfg: &shared.config, scenario: &shared.scenario, tick: work.tick, now: work.now };
        let mut requests = Vec::new();
        // Many personas draft the same texts: each is kept once, shared.
        let mut texts: std::collections::HashSet<Arc<str>, engine::scan::TextHasher> = Default::default();
        let mut intern = |t: &mut Arc<str>| match texts.get(&**t) {
            Some(shared) => *t = Arc::clone(shared),
            None => {
                texts.insert(Arc::clone(t));
            }
        };
        for (prepared, conversation) in std::mem::take(&mut work.conversed) {
            let i = prepared.job.position as usize;
            let o = &mut work.outcomes[i];
            for c in &conversation.calls {
                o.spend.chat.add(&c.spend);
            }
            o.chat_calls = conversation.calls;
            match conversation.result {
                Err(failure) => fail(o, Stage::Chat, failure.to_string()),
                Ok(c) => {
                    let mut new = drafts(&prepared.job, &ctx, &c);
                    for m in &mut new {
                        intern(&mut m.description);
                        m.sources.iter_mut().for_each(&mut intern);
                    }
                    requests.extend(new.iter().map(|m| (i as u32, Arc::clone(&m.description))));
                    o.reaction = Some(c.reaction.clone());
                    o.reflection = c.reflection.clone();
                    o.probes =
                        c.probes.iter().map(|(id, r)| ProbeAnswer { id: id.clone(), reply: r.clone() }).collect();
                    work.parts[i] = Some(JobCommit {
                        touched: prepared.retrieved,
                        memories: new,
                        belief: Some((o.stimulus.clone(), c.reaction.intent, c.reaction.sentiment)),
                        importance: u32::from(c.reaction.importance),
                        reflected: c.reflection.is_some(),
                    });
                }
            }
        }
        requests
    }

    /// With `[intent]` asking for SSR: each reacting job's reaction text
    /// (and, until they are known, the anchor statements) join the memory
    /// stage's requests.
    fn ssr_requests(
        &self,
        state: &CoordinatorState,
        work: &TickWork,
        requests: &mut Vec<(u32, Arc<str>)>,
    ) -> Option<SsrPlan> {
        let intent = &self.shared.config.raw.intent;
        if !intent.ssr() || self.shared.embedder.is_none() {
            return None;
        }
        let reactions = work
            .outcomes
            .iter()
            .filter(|o| work.parts[o.position as usize].is_some())
            .filter_map(|o| o.reaction.as_ref().map(|r| (o.position, r.text.clone())));
        Some(SsrPlan::build(requests, work.jobs.len() as u32, reactions, intent, state.anchors.is_some()))
    }

    /// Stage 6: the drafts' texts (and SSR's) through one deduplicated port
    /// call; each draft keeps its own identity even when it shares a vector.
    async fn memory_embedding(&self, work: &mut TickWork, requests: Vec<(u32, Arc<str>)>, ssr: Option<&SsrPlan>) {
        let owners: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let memory = self.stage_embed(EmbedRole::Memory, requests).await;
        let mut next = vec![0usize; work.jobs.len()];
        let jobs = work.jobs.len() as u32;
        // SSR consumers (from `jobs` on) come after every draft.
        for (r, owner) in owners.iter().enumerate().filter(|(_, o)| **o < jobs) {
            let i = *owner as usize;
            if let Some(part) = work.parts[i].as_mut() {
                part.memories[next[i]].vector = memory.vectors[r].clone();
                next[i] += 1;
            }
        }
        let owner = |consumer: u32| ssr.map_or((consumer, false), |p| p.owner(consumer));
        for (consumer, spend) in &memory.allocation {
            work.outcomes[owner(*consumer).0 as usize].spend.memory_embedding_estimate.add(spend);
        }
        for (consumer, reason) in &memory.failed {
            let (pos, _) = owner(*consumer);
            if is_ok(&work.outcomes[pos as usize]) {
                fail(&mut work.outcomes[pos as usize], Stage::MemoryEmbedding, reason.clone());
            }
            work.parts[pos as usize] = None;
        }
        work.memory = memory;
    }

    /// SSR: the anchors' vectors are kept from the first stage that got
    /// them, and each reacting job whose stage succeeded gets its rating.
    fn rate_intent(&self, state: &mut CoordinatorState, work: &mut TickWork, plan: &SsrPlan) {
        if state.anchors.is_none() {
            state.anchors = plan.anchor_vectors(&work.memory.vectors);
        }
        let Some(anchors) = &state.anchors else { return };
        let cost: std::collections::BTreeMap<u32, Spend> = work
            .memory
            .allocation
            .iter()
            .map(|(c, s)| (plan.owner(*c), *s))
            .filter(|((_, ssr), _)| *ssr)
            .map(|((position, _), s)| (position, s))
            .collect();
        let ratings = plan.ratings(&work.memory.vectors, anchors, &self.shared.config.raw.intent, &cost);
        for (position, rating) in ratings {
            let o = &mut work.outcomes[position as usize];
            if is_ok(o) {
                o.ssr = Some(rating);
            }
        }
    }

    /// Stage 7: each persona applies its jobs' results and consolidates;
    /// the new memory ids come back to their outcomes.
    async fn commit(&self, state: &mut CoordinatorState, work: &mut TickWork) {
        let (shared, tick, now) = (&self.shared, work.tick, work.now);
        self.progress.stage(tick, "commit", 0, work.jobs.len() as u64);
        let mut committed: Vec<Vec<usize>> = vec![Vec::new(); work.groups.len()];
        let section = &shared.config.raw.consolidation;
        let consolidate = section.enabled.then(|| Consolidate {
            rules: section.rules.clone(),
            dry_run: section.dry_run,
            end_session: tick == shared.session_end_tick,
        });
        // Each draft's memory event, its id to come from the commit.
        work.drafted = work
            .parts
            .iter()
            .zip(&work.outcomes)
            .map(|(p, o)| {
                let p = p.as_ref()?;
                let event = |m: &engine::persona::state::NewMemory| MemoryEvent {
                    id: engine::persona::MemoryId { persona: o.persona, seq: 0 },
                    position: o.position,
                    kind: m.kind,
                    description: Arc::clone(&m.description),
                    importance: m.importance,
                    sentiment: m.sentiment,
                    sources: m.sources.clone(),
                };
                Some(p.memories.iter().map(event).collect())
            })
            .collect();
        let parts = &mut work.parts;
        let commits = self
            .ask(
                state,
                &mut work.outcomes,
                &work.groups,
                Stage::Commit,
                tick,
                |g, range| {
                    let ok: Vec<usize> = range.filter(|i| parts[*i].is_some()).collect();
                    if ok.is_empty() && consolidate.is_none() {
                        return None;
                    }
                    let jobs = ok.iter().filter_map(|i| parts[*i].take()).collect();
                    committed[g] = ok;
                    Some(PersonaCommit { tick, now, jobs, consolidation: consolidate.clone() })
                },
                |batch, reply| PersonaMsg::Commit { batch, reply },
            )
            .await;
        for (g, reply) in commits.into_iter().enumerate() {
            let Some(applied) = reply else { continue };
            let (p, _) = &work.groups[g];
            state.persona_digests[*p as usize] = Some(applied.digest);
            for (i, ids) in committed[g].iter().zip(applied.ids) {
                work.outcomes[*i].memories = ids;
            }
            if !applied.changes.is_empty() {
                work.consolidation.push((*p, applied.changes));
            }
        }
        for o in work.outcomes.iter_mut().filter(|o| !is_ok(o)) {
            o.memories.clear();
        }
    }

    /// The committed tick: memory events in job order, the stimuli shown,
    /// and the chained digests.
    fn finish(&self, state: &mut CoordinatorState, work: TickWork) -> TickReport {
        let TickWork { tick, outcomes, drafted, retrieval, memory, consolidation, mut timings, started, .. } = work;
        let mut memories = Vec::with_capacity(drafted.iter().flatten().map(Vec::len).sum());
        for (o, events) in outcomes.iter().zip(drafted) {
            let Some(events) = events else { continue };
            for (id, mut event) in o.memories.iter().zip(events) {
                event.id = *id;
                memories.push(event);
            }
        }
        let mut stimuli: Vec<String> = Vec::new();
        for o in &outcomes {
            if stimuli.last() != Some(&o.stimulus) && !stimuli.contains(&o.stimulus) {
                stimuli.push(o.stimulus.clone());
            }
        }
        let stages = [(retrieval.stats, &retrieval.calls[..]), (memory.stats, &memory.calls[..])];
        let digests = state.digests.chain(tick, &outcomes, &state.persona_digests, &stages);
        state.digests = digests;
        timings.total = ms(started);
        TickReport {
            tick,
            outcomes,
            digests,
            persona_digests: state.persona_digests.clone(),
            retrieval: (retrieval.stats, retrieval.provider_spend, retrieval.calls),
            memory: (memory.stats, memory.provider_spend, memory.calls),
            timings,
            embeddings: self.shared.recorder.as_ref().map(|r| r.take()).unwrap_or_default(),
            memories,
            stimuli,
            consolidation,
        }
    }
}

/// What one tick carries from stage to stage.
struct TickWork {
    tick: u32,
    now: engine::clock::SimTime,
    /// Wall clock at the start, for timings only.
    started: Instant,
    jobs: Vec<Job>,
    /// Each persona's contiguous job range.
    groups: Vec<(u32, Range<usize>)>,
    /// One per job, in job order.
    outcomes: Vec<Outcome>,
    /// Retrieval vectors, by job position.
    query: Vec<Option<Arc<[f32]>>>,
    /// Prepared jobs awaiting chat, in job order.
    ready: Vec<Prepared>,
    /// Conversations, in job order.
    conversed: Vec<(Prepared, Conversation)>,
    /// What each job will commit, by position.
    parts: Vec<Option<JobCommit>>,
    /// Each job's memory events, by position; their ids come from the commit.
    drafted: Vec<Option<Vec<MemoryEvent>>>,
    retrieval: StageResult,
    memory: StageResult,
    consolidation: Vec<(u32, Vec<Change>)>,
    timings: Timings,
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
            slots: args.personas.into_iter().map(Slot::Resting).collect(),
            hosts: args.hosts,
            window: args.window.max(1),
            interests: args.interests,
            digests: args.genesis,
            persona_digests: vec![Some(Digest::default()); n],
            anchors: None,
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
                    Some(Slot::Resting(activation)) => Some(PersonaState::clone(activation)),
                    Some(Slot::Active | Slot::Gone(_)) | None => None,
                };
                let _ = reply.send(snapshot);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
