//! One tick, stage by stage, without a runtime: the sequence of the seven
//! stages (see [`crate::turn`]) and all of their bookkeeping (which jobs are
//! still open, how answers and failures land on outcomes in job order, the
//! windows of stages 3 and 4, the digests a commit chains).
//!
//! [`run_tick`] does everything that decides a result. What it needs done
//! elsewhere goes through a [`Dispatch`]: asking personas for a stage
//! (wherever they are hosted), the embedding and chat ports, progress and
//! the wall clock. The `actors` crate's turn coordinator dispatches to
//! ractor persona hosts; `engine::testing::Sequential` (feature `testing`)
//! calls the persona functions in place, so that a whole tick can be tested
//! without actors. The same inputs give the same outcomes, trace frames and
//! digests through either (only the wall-clock timings differ).
//!
//! ```
//! use engine::testing::{block_on_ready, Sequential};
//! use engine::tick::{run_tick, Book, TickSpec};
//! use engine::{config::Config, persona::Traits, scenario::Scenario, turn::TickDigests};
//!
//! let (cfg, scenario) = (Config::defaults(), Scenario::builtin("default").unwrap());
//! let mut panel = Sequential::new(&cfg, &scenario, &Traits::builtin(), 7, 4);
//! let genesis = TickDigests::genesis(&cfg, &scenario.source_hash, 7, 4);
//! let mut book = Book::new(genesis, panel.interests());
//! let spec = TickSpec { cfg: &cfg, scenario: &scenario, seed: 7, window: 2, session_end_tick: 1, embeddings: true };
//! let report = block_on_ready(run_tick(&spec, &mut book, &mut panel, 1));
//! assert_eq!(report.outcomes.len(), 4);
//! assert_eq!(book.digests.digest, report.digests.digest);
//! ```

use crate::clock::{Clock, SimTime};
use crate::config::Config;
use crate::digest::Digest;
use crate::embed::{EmbedCall, EmbedRole, Embedding, StageResult, StageStats};
use crate::intent::stage::SsrPlan;
use crate::memory::{Change, MemoryId};
use crate::persona::state::{Applied, Consolidate, Energy, JobCommit, NewMemory};
use crate::persona::PersonaCommit;
use crate::scenario::{Job, Scenario};
use crate::store::trace::{EmbedExchange, MemoryEvent, TickFrame};
use crate::summary::Timings;
use crate::turn::{
    drafts, Conversation, Outcome, Prepared, ProbeAnswer, Refusal, Stage, Status, TickContext, TickDigests,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

/// Everything one committed tick produced.
#[derive(Debug, Clone)]
pub struct TickReport {
    /// Tick number.
    pub tick: u32,
    /// One outcome per job, in job order.
    pub outcomes: Vec<Outcome>,
    /// Digests after this tick.
    pub digests: TickDigests,
    /// Each persona's state digest after this tick (`None`: persona gone).
    pub persona_digests: Vec<Option<Digest>>,
    /// Retrieval-stage counters, billed spend and physical calls.
    pub retrieval: (StageStats, crate::cost::Spend, Vec<EmbedCall>),
    /// Memory-stage counters, billed spend and physical calls.
    pub memory: (StageStats, crate::cost::Spend, Vec<EmbedCall>),
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

/// Why a persona is gone: its open jobs fail at the stage that asked, and
/// it is refused for the rest of the run. The text follows "persona actor
/// p-…" in those jobs' reasons (e.g. "failed during tick 3").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Gone(pub String);

/// A persona's answer to a stage: its reply, or why it is gone.
pub type Answer<R> = Result<R, Gone>;

/// A job with its retrieval vector, if it has one.
pub type QueriedJob = (Job, Option<Arc<[f32]>>);

/// Per job: its prepared prompts, or why it was refused.
pub type Preparation = Vec<Result<Prepared, Refusal>>;

/// A job's prepared request (its prompts released) and its conversation,
/// or the message of the panic that ended the conversation.
pub type Finished = (Prepared, Result<Conversation, String>);

/// What a tick needs done outside the engine. Each persona method takes a
/// batch of `(persona, input)` in persona order and answers one
/// [`Answer`] per entry, in the same order; an entry it does not answer
/// counts as a persona gone.
pub trait Dispatch: Send {
    /// Stage 2: for each of a persona's jobs (in job order), the text it
    /// needs embedded for retrieval ([`crate::turn::retrieval_need`]).
    fn retrieval_needs(
        &mut self,
        tick: u32,
        batch: Vec<(u32, Vec<Job>)>,
    ) -> impl Future<Output = Vec<Answer<Vec<Option<String>>>>> + Send;
    /// Stage 3: each job's prompts ([`crate::turn::prepare`]).
    fn prepare(
        &mut self,
        tick: u32,
        now: SimTime,
        batch: Vec<(u32, Vec<QueriedJob>)>,
    ) -> impl Future<Output = Vec<Answer<Preparation>>> + Send;
    /// Stage 7: each persona applies its commit
    /// ([`crate::persona::PersonaState::apply`]).
    fn commit(&mut self, batch: Vec<(u32, PersonaCommit)>) -> impl Future<Output = Vec<Answer<Applied>>> + Send;
    /// An embedding stage over `requests` (consumer, text): one
    /// deduplicated port call ([`crate::embed::embed_stage`]), or no
    /// vectors when the run has no embedder.
    fn embed<T: AsRef<str> + Send + Sync>(
        &mut self,
        role: EmbedRole,
        requests: Vec<(u32, T)>,
    ) -> impl Future<Output = StageResult> + Send;
    /// Stage 4: each prepared job's conversation ([`crate::turn::converse()`]),
    /// by its place in `ready`, and why the chat machinery failed if it did
    /// (the jobs it held are then `None`). `progress` is (done, total) of
    /// the tick's jobs so far.
    fn converse(
        &mut self,
        tick: u32,
        ready: Vec<Prepared>,
        progress: (u64, u64),
    ) -> impl Future<Output = (Vec<Option<Finished>>, Option<String>)> + Send;
    /// `stage` of `tick` has processed `done` of `total` jobs.
    fn stage(&self, tick: u32, stage: &'static str, done: u64, total: u64);
    /// A monotonic wall clock in milliseconds, for the timings only.
    fn clock_ms(&self) -> f64;
    /// Every embedding port invocation since the last call, as answered
    /// (for the trace; empty when nothing records them).
    fn embeddings(&mut self) -> Vec<EmbedExchange>;
}

/// A run's read-only inputs to each tick.
pub struct TickSpec<'a> {
    /// Resolved configuration.
    pub cfg: &'a Config,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Run seed.
    pub seed: u64,
    /// The most personas asked at once in stages 3 and 4 (at least 1).
    pub window: usize,
    /// The tick that ends the session (consolidation queues working
    /// memories for promotion there).
    pub session_end_tick: u32,
    /// Whether the run has an embedder (SSR needs one).
    pub embeddings: bool,
}

/// What a run carries from tick to tick: the chained digests, each
/// persona's state digest, the personas gone and why, the SSR anchors'
/// vectors once known, and each persona's interests.
pub struct Book {
    /// Digests after the last committed tick.
    pub digests: TickDigests,
    /// Each persona's state digest (`None`: gone).
    pub persona_digests: Vec<Option<Digest>>,
    /// Gone personas, with the reason their jobs are refused.
    gone: BTreeMap<u32, String>,
    /// The SSR anchor statements' vectors, once a memory stage has
    /// embedded them (all sets, in order).
    anchors: Option<Vec<Embedding>>,
    interests: Vec<Vec<Arc<str>>>,
    /// The first persona index of the panel (of the shard) this book keeps.
    first: u32,
}

impl Book {
    /// A panel before its first tick: `interests` by persona index.
    pub fn new(genesis: TickDigests, interests: Vec<Vec<Arc<str>>>) -> Book {
        Book::of_shard(genesis, 0, interests)
    }

    /// The book of a shard: personas `first..` (as many as `interests`
    /// has entries), whose jobs alone its ticks run
    /// ([`crate::shard::Shard::personas`]). Vectors by persona are indexed
    /// from `first`; persona indices everywhere else are the panel's.
    pub fn of_shard(genesis: TickDigests, first: u32, interests: Vec<Vec<Arc<str>>>) -> Book {
        Book {
            digests: genesis,
            persona_digests: vec![Some(Digest::default()); interests.len()],
            gone: BTreeMap::new(),
            anchors: None,
            interests,
            first,
        }
    }

    /// Where persona `persona` is in the vectors by persona.
    fn slot(&self, persona: u32) -> usize {
        (persona - self.first) as usize
    }

    /// Why `persona` is gone, if it is.
    pub fn gone(&self, persona: u32) -> Option<&str> {
        self.gone.get(&persona).map(String::as_str)
    }

    /// Refuses `persona` for the rest of the run: its open jobs in
    /// `outcomes` fail at `stage`. `why` follows "persona actor p-…".
    fn mark_gone(&mut self, persona: u32, outcomes: &mut [Outcome], stage: Stage, why: &str) {
        let reason = format!("persona actor {} {why}", crate::persona::profile::label(persona));
        for o in outcomes.iter_mut().filter(|o| is_ok(o)) {
            fail(o, stage, reason.clone());
        }
        self.gone.insert(persona, reason);
        let slot = self.slot(persona);
        self.persona_digests[slot] = None;
    }
}

/// What one tick carries from stage to stage.
pub struct TickWork {
    /// Tick number.
    pub tick: u32,
    /// Its simulated time.
    pub now: SimTime,
    /// The tick's jobs, in job order (ordered by persona).
    pub jobs: Vec<Job>,
    /// Each persona's contiguous job range.
    pub groups: Vec<(u32, Range<usize>)>,
    /// One per job, in job order.
    pub outcomes: Vec<Outcome>,
    /// Retrieval vectors, by job position.
    pub query: Vec<Option<Arc<[f32]>>>,
    /// Prepared jobs awaiting chat, in job order.
    pub ready: Vec<Prepared>,
    /// Conversations, in job order.
    conversed: Vec<(Prepared, Conversation)>,
    /// What each job will commit, by position.
    parts: Vec<Option<JobCommit>>,
    /// Each job's memory events, by position; their ids come from the commit.
    drafted: Vec<Option<Vec<MemoryEvent>>>,
    /// The retrieval stage's result.
    pub retrieval: StageResult,
    /// The memory stage's result.
    pub memory: StageResult,
    consolidation: Vec<(u32, Vec<Change>)>,
    /// Wall-clock stage timings (reporting only).
    pub timings: Timings,
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

/// Runs tick `tick` through its stages on `dispatch` and commits it to
/// `book`. A persona that fails (its answer an error) loses its own jobs;
/// the rest of the panel carries on.
pub async fn run_tick<D: Dispatch>(spec: &TickSpec<'_>, book: &mut Book, dispatch: &mut D, tick: u32) -> TickReport {
    let started = dispatch.clock_ms();
    let mut work = TickWork::begin(spec, book, tick);
    work.refuse_gone(book, dispatch);
    work.retrieval_embedding(book, dispatch).await;
    // Stages 3 and 4 run a window of personas at a time, so that only one
    // window's prompts exist at once; results stay in job order.
    work.timings.preparation = dispatch.clock_ms() - started;
    let groups = work.groups.len();
    let mut start = 0;
    while start < groups {
        let window = start..(start + spec.window.max(1)).min(groups);
        start = window.end;
        let prepare_started = dispatch.clock_ms();
        work.retrieve_and_prompt(book, dispatch, window).await;
        work.timings.preparation += dispatch.clock_ms() - prepare_started;
        let chat_started = dispatch.clock_ms();
        work.chat(dispatch).await;
        work.timings.chat += dispatch.clock_ms() - chat_started;
    }
    let finalise_started = dispatch.clock_ms();
    dispatch.stage(tick, "memory embedding", 0, work.conversed.len() as u64);
    let ctx = TickContext { cfg: spec.cfg, scenario: spec.scenario, tick, now: work.now };
    let mut requests = work.draft_memories(&ctx);
    let ssr = work.ssr_requests(spec, book, &mut requests);
    work.memory_embedding(dispatch, requests, ssr.as_ref()).await;
    if let Some(plan) = ssr {
        work.rate_intent(spec, book, &plan);
    }
    work.commit(spec, book, dispatch).await;
    work.timings.memory_finalisation = dispatch.clock_ms() - finalise_started;
    work.timings.total = dispatch.clock_ms() - started;
    let embeddings = dispatch.embeddings();
    work.finish(book, embeddings)
}

/// Asks `dispatch`'s personas through `ask` for the groups in `due` (with
/// their inputs, in group order), and returns the replies with their group
/// index, in that order; a persona that answers an error (or nothing) is
/// gone, its open jobs failed at `stage`. The work is proportional to
/// `due`, not to the panel.
async fn ask<I, R, F>(
    book: &mut Book,
    work: &mut TickWork,
    stage: Stage,
    due: Vec<(usize, I)>,
    ask: impl FnOnce(Vec<(u32, I)>) -> F,
) -> Vec<(usize, R)>
where
    F: Future<Output = Vec<Answer<R>>>,
{
    let asked: Vec<usize> = due.iter().map(|(g, _)| *g).collect();
    let answers = ask(due.into_iter().map(|(g, input)| (work.groups[g].0, input)).collect()).await;
    let mut replies = Vec::with_capacity(asked.len());
    let mut answers = answers.into_iter();
    for g in asked {
        let (p, range) = work.groups[g].clone();
        match answers.next() {
            Some(Ok(reply)) => replies.push((g, reply)),
            Some(Err(Gone(why))) => book.mark_gone(p, &mut work.outcomes[range], stage, &why),
            None => {
                let why = format!("gave no answer during tick {}", work.tick);
                book.mark_gone(p, &mut work.outcomes[range], stage, &why);
            }
        }
    }
    replies
}

impl TickWork {
    /// The tick's jobs, in job order, each with a bare outcome.
    pub fn begin(spec: &TickSpec<'_>, book: &Book, tick: u32) -> TickWork {
        let now = Clock::with_hours_per_tick(spec.cfg.raw.run.hours_per_tick).at(tick);
        let personas = book.first..book.first + book.interests.len() as u32;
        let jobs = spec.scenario.jobs_of(spec.seed, tick, personas, |p| &book.interests[book.slot(p)]);
        let outcomes = jobs
            .iter()
            .map(|j| {
                let stimulus = spec.scenario.stimuli[j.stimulus as usize].id.clone();
                Outcome::new(tick, j.position, j.persona, stimulus, j.exposure)
            })
            .collect();
        TickWork {
            tick,
            now,
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

    /// The groups among `window` with a job still open.
    fn open(&self, window: Range<usize>) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        window.map(|g| (g, self.groups[g].1.clone())).filter(|(_, r)| self.outcomes[r.clone()].iter().any(is_ok))
    }

    /// Stage 1: personas gone in an earlier tick are refused up front.
    pub fn refuse_gone(&mut self, book: &Book, dispatch: &impl Dispatch) {
        dispatch.stage(self.tick, "validate", 0, self.jobs.len() as u64);
        for (p, range) in &self.groups {
            if let Some(reason) = book.gone(*p) {
                for o in &mut self.outcomes[range.clone()] {
                    o.status = Status::Refused { reason: format!("persona is unavailable: {reason}") };
                }
            }
        }
    }

    /// Stage 2: each persona says what it needs embedded; the texts go
    /// through one deduplicated port call and the vectors back to their jobs.
    pub async fn retrieval_embedding(&mut self, book: &mut Book, dispatch: &mut impl Dispatch) {
        let tick = self.tick;
        dispatch.stage(tick, "retrieval embedding", 0, self.jobs.len() as u64);
        let due: Vec<_> = self.open(0..self.groups.len()).map(|(g, r)| (g, self.jobs[r].to_vec())).collect();
        let needs = ask(book, self, Stage::RetrievalEmbedding, due, |b| dispatch.retrieval_needs(tick, b)).await;
        let mut requests = Vec::new();
        for (g, need) in needs {
            for (i, text) in self.groups[g].1.clone().zip(need) {
                if let (Some(text), true) = (text, is_ok(&self.outcomes[i])) {
                    requests.push((i as u32, text));
                }
            }
        }
        let positions: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let retrieval = dispatch.embed(EmbedRole::Retrieval, requests).await;
        for (r, pos) in positions.iter().enumerate() {
            self.query[*pos as usize] = retrieval.vectors[r].as_ref().map(|e| e.vector.clone());
        }
        for (pos, spend) in &retrieval.allocation {
            self.outcomes[*pos as usize].spend.retrieval_embedding_estimate = *spend;
        }
        for (pos, reason) in &retrieval.failed {
            fail(&mut self.outcomes[*pos as usize], Stage::RetrievalEmbedding, reason.clone());
        }
        self.retrieval = retrieval;
    }

    /// Stage 3, for the personas of `window` (indices into the tick's
    /// groups): each ranks its own memories and builds its prompts; a
    /// context-budget refusal becomes the job's outcome.
    pub async fn retrieve_and_prompt(&mut self, book: &mut Book, dispatch: &mut impl Dispatch, window: Range<usize>) {
        let (tick, now) = (self.tick, self.now);
        let first_job = self.groups.get(window.start).map_or(0, |(_, r)| r.start) as u64;
        dispatch.stage(tick, "retrieve and prompt", first_job, self.jobs.len() as u64);
        self.ready.reserve_exact(self.groups[window.clone()].iter().map(|(_, r)| r.len()).sum());
        let due: Vec<_> = self
            .open(window.clone())
            .map(|(g, r)| (g, r.map(|i| (self.jobs[i], self.query[i].clone())).collect()))
            .collect();
        let replies = ask(book, self, Stage::Prepare, due, |b| dispatch.prepare(tick, now, b)).await;
        for (g, reply) in replies {
            for (i, prepared) in self.groups[g].1.clone().zip(reply) {
                let o = &mut self.outcomes[i];
                if !is_ok(o) {
                    continue;
                }
                match prepared {
                    Ok(p) => {
                        o.retrieved = p.retrieved.clone();
                        o.prompt = Some(p.reaction.prompt_digest());
                        self.ready.push(p);
                    }
                    Err(refusal) => o.status = Status::Refused { reason: refusal.to_string() },
                }
            }
        }
    }

    /// Stage 4: the conversations of the jobs prepared so far; results are
    /// kept in job order whatever order they finish in. A panic in one
    /// conversation fails that job alone, with the panic's message as its
    /// reason.
    pub async fn chat(&mut self, dispatch: &mut impl Dispatch) {
        let ready = std::mem::take(&mut self.ready);
        let positions: Vec<u32> = ready.iter().map(|p| p.job.position).collect();
        let (before, total) = (self.conversed.len() as u64, self.jobs.len() as u64);
        let (slots, lost) = dispatch.converse(self.tick, ready, (before, total)).await;
        self.conversed.reserve(positions.len());
        let mut slots = slots.into_iter();
        for &position in &positions {
            let o = &mut self.outcomes[position as usize];
            match slots.next().flatten() {
                Some((p, Ok(conversation))) => self.conversed.push((p, conversation)),
                Some((_, Err(panic))) => fail(o, Stage::Chat, format!("chat panicked: {panic}")),
                // A pool task can only fail outside a conversation (those
                // are caught); the jobs it held fail with it.
                None => fail(o, Stage::Chat, format!("the chat task failed: {}", lost.as_deref().unwrap_or("?"))),
            }
        }
    }

    /// Stage 5: outcomes take their replies, and each successful job drafts
    /// its memories (without vectors). Returns the texts to embed, by job
    /// position.
    pub fn draft_memories(&mut self, ctx: &TickContext<'_>) -> Vec<(u32, Arc<str>)> {
        let mut requests = Vec::new();
        // Many personas draft the same texts: each is kept once, shared.
        let mut texts: std::collections::HashSet<Arc<str>, crate::scan::TextHasher> = Default::default();
        let mut intern = |t: &mut Arc<str>| match texts.get(&**t) {
            Some(shared) => *t = Arc::clone(shared),
            None => {
                texts.insert(Arc::clone(t));
            }
        };
        for (prepared, conversation) in std::mem::take(&mut self.conversed) {
            let i = prepared.job.position as usize;
            let o = &mut self.outcomes[i];
            for c in &conversation.calls {
                o.spend.chat.add(&c.spend);
            }
            o.chat_calls = conversation.calls;
            match conversation.result {
                Err(failure) => fail(o, Stage::Chat, failure.to_string()),
                Ok(c) => {
                    let mut new = drafts(&prepared.job, ctx, &c);
                    for m in &mut new {
                        intern(&mut m.description);
                        m.sources.iter_mut().for_each(&mut intern);
                    }
                    requests.extend(new.iter().map(|m| (i as u32, Arc::clone(&m.description))));
                    o.reaction = Some(c.reaction.clone());
                    o.reflection = c.reflection.clone();
                    o.probes =
                        c.probes.iter().map(|(id, r)| ProbeAnswer { id: id.clone(), reply: r.clone() }).collect();
                    self.parts[i] = Some(JobCommit {
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
    fn ssr_requests(&self, spec: &TickSpec<'_>, book: &Book, requests: &mut Vec<(u32, Arc<str>)>) -> Option<SsrPlan> {
        let intent = &spec.cfg.raw.intent;
        if !intent.ssr() || !spec.embeddings {
            return None;
        }
        let reactions = self
            .outcomes
            .iter()
            .filter(|o| self.parts[o.position as usize].is_some())
            .filter_map(|o| o.reaction.as_ref().map(|r| (o.position, r.text.clone())));
        Some(SsrPlan::build(requests, self.jobs.len() as u32, reactions, intent, book.anchors.is_some()))
    }

    /// Stage 6: the drafts' texts (and SSR's) through one deduplicated port
    /// call; each draft keeps its own identity even when it shares a vector.
    async fn memory_embedding(
        &mut self,
        dispatch: &mut impl Dispatch,
        requests: Vec<(u32, Arc<str>)>,
        ssr: Option<&SsrPlan>,
    ) {
        let owners: Vec<u32> = requests.iter().map(|(i, _)| *i).collect();
        let memory = dispatch.embed(EmbedRole::Memory, requests).await;
        let mut next = vec![0usize; self.jobs.len()];
        let jobs = self.jobs.len() as u32;
        // SSR consumers (from `jobs` on) come after every draft.
        for (r, owner) in owners.iter().enumerate().filter(|(_, o)| **o < jobs) {
            let i = *owner as usize;
            if let Some(part) = self.parts[i].as_mut() {
                part.memories[next[i]].vector = memory.vectors[r].clone();
                next[i] += 1;
            }
        }
        let owner = |consumer: u32| ssr.map_or((consumer, false), |p| p.owner(consumer));
        for (consumer, spend) in &memory.allocation {
            self.outcomes[owner(*consumer).0 as usize].spend.memory_embedding_estimate.add(spend);
        }
        for (consumer, reason) in &memory.failed {
            let (pos, _) = owner(*consumer);
            if is_ok(&self.outcomes[pos as usize]) {
                fail(&mut self.outcomes[pos as usize], Stage::MemoryEmbedding, reason.clone());
            }
            self.parts[pos as usize] = None;
        }
        self.memory = memory;
    }

    /// SSR: the anchors' vectors are kept from the first stage that got
    /// them, and each reacting job whose stage succeeded gets its rating.
    fn rate_intent(&mut self, spec: &TickSpec<'_>, book: &mut Book, plan: &SsrPlan) {
        if book.anchors.is_none() {
            book.anchors = plan.anchor_vectors(&self.memory.vectors);
        }
        let Some(anchors) = &book.anchors else { return };
        let cost: BTreeMap<u32, crate::cost::Spend> = self
            .memory
            .allocation
            .iter()
            .map(|(c, s)| (plan.owner(*c), *s))
            .filter(|((_, ssr), _)| *ssr)
            .map(|((position, _), s)| (position, s))
            .collect();
        let ratings = plan.ratings(&self.memory.vectors, anchors, &spec.cfg.raw.intent, &cost);
        for (position, rating) in ratings {
            let o = &mut self.outcomes[position as usize];
            if is_ok(o) {
                o.ssr = Some(rating);
            }
        }
    }

    /// Stage 7: each persona applies its jobs' results and consolidates;
    /// the new memory ids come back to their outcomes.
    async fn commit(&mut self, spec: &TickSpec<'_>, book: &mut Book, dispatch: &mut impl Dispatch) {
        let (tick, now) = (self.tick, self.now);
        dispatch.stage(tick, "commit", 0, self.jobs.len() as u64);
        let section = &spec.cfg.raw.consolidation;
        let energy = Energy::of(&section.rules);
        let consolidate = (section.enabled || section.dry_run).then(|| Consolidate {
            rules: section.rules.clone(),
            dry_run: section.dry_run,
            end_session: tick == spec.session_end_tick,
        });
        // Each draft's memory event, its id to come from the commit.
        self.drafted = self
            .parts
            .iter()
            .zip(&self.outcomes)
            .map(|(p, o)| {
                let p = p.as_ref()?;
                let event = |m: &NewMemory| MemoryEvent {
                    id: MemoryId { persona: o.persona, seq: 0 },
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
        // Each asked group's committed job positions.
        let mut committed: Vec<Vec<usize>> = vec![Vec::new(); self.groups.len()];
        let open: Vec<(usize, Range<usize>)> = self.open(0..self.groups.len()).collect();
        let mut due = Vec::new();
        for (g, range) in open {
            let ok: Vec<usize> = range.filter(|i| self.parts[*i].is_some()).collect();
            if ok.is_empty() && consolidate.is_none() {
                continue;
            }
            let jobs = ok.iter().filter_map(|i| self.parts[*i].take()).collect();
            committed[g] = ok;
            due.push((g, PersonaCommit { tick, now, jobs, energy, consolidation: consolidate.clone() }));
        }
        let commits = ask(book, self, Stage::Commit, due, |b| dispatch.commit(b)).await;
        for (g, applied) in commits {
            let p = self.groups[g].0;
            let slot = book.slot(p);
            book.persona_digests[slot] = Some(applied.digest);
            for (i, ids) in committed[g].iter().zip(applied.ids) {
                self.outcomes[*i].memories = ids;
            }
            if !applied.changes.is_empty() {
                self.consolidation.push((p, applied.changes));
            }
        }
        for o in self.outcomes.iter_mut().filter(|o| !is_ok(o)) {
            o.memories.clear();
        }
    }

    /// The committed tick: memory events in job order, the stimuli shown,
    /// and the chained digests.
    fn finish(self, book: &mut Book, embeddings: Vec<EmbedExchange>) -> TickReport {
        let TickWork { tick, outcomes, drafted, retrieval, memory, consolidation, timings, .. } = self;
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
        let digests = book.digests.chain(tick, &outcomes, &book.persona_digests, &stages);
        book.digests = digests;
        TickReport {
            tick,
            outcomes,
            digests,
            persona_digests: book.persona_digests.clone(),
            retrieval: (retrieval.stats, retrieval.provider_spend, retrieval.calls),
            memory: (memory.stats, memory.provider_spend, memory.calls),
            timings,
            embeddings,
            memories,
            stimuli,
            consolidation,
        }
    }
}
