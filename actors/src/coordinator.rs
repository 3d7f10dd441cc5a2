//! The turn coordinator: keeps the store of resting personas and the pool
//! of persona hosts, and dispatches each tick's stages to them. The tick
//! itself (the stage sequence, which jobs are open, how answers and
//! failures land on outcomes, the digests) is [`engine::tick::run_tick`];
//! this actor supplies what it awaits: personas activated a window at a
//! time on the hosts, the embedding port, the chat pool and progress.

use crate::persona::{Activation, Hosted, PersonaMsg};
use crate::progress::Progress;
use crate::shared::RunShared;
use engine::clock::SimTime;
use engine::embed::{embed_stage, EmbedKey, EmbedRole, Plan, StageResult};
use engine::persona::state::Applied;
use engine::persona::{PersonaCommit, PersonaState};
use engine::scenario::Job;
use engine::store::trace::EmbedExchange;
use engine::tick::{run_tick, Answer, Book, Dispatch, Finished, Gone, Preparation, QueriedJob, TickSpec};
use engine::turn::{Prepared, TickDigests};
use ractor::concurrency::oneshot;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

pub use engine::tick::TickReport;

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
/// stage in progress, or gone (refused for the rest of the run; the
/// engine's [`Book`] says why).
enum Slot {
    Resting(Activation),
    Active,
    Gone,
}

/// Every persona of the panel (or of the shard), at rest or not: the
/// compact store, indexed by persona index.
struct PersonaSlots {
    /// The first persona index (0 unless the run is a shard).
    first: u32,
    slots: Vec<Slot>,
}

impl std::ops::Index<u32> for PersonaSlots {
    type Output = Slot;
    fn index(&self, persona: u32) -> &Slot {
        &self.slots[(persona - self.first) as usize]
    }
}

impl std::ops::IndexMut<u32> for PersonaSlots {
    fn index_mut(&mut self, persona: u32) -> &mut Slot {
        &mut self.slots[(persona - self.first) as usize]
    }
}

/// The coordinator's mutable state.
pub struct CoordinatorState {
    /// Every persona, by index: the compact store.
    slots: PersonaSlots,
    /// The pool of hosts personas are activated on.
    hosts: Vec<ActorRef<PersonaMsg>>,
    /// The most personas active at once.
    window: usize,
    /// What the run carries from tick to tick.
    book: Book,
}

/// Start-up arguments.
pub struct CoordinatorArgs {
    /// The index of the first persona (0 unless the run is a shard).
    pub first: u32,
    /// Every persona's starting state, by persona index from `first`.
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

fn stage_span(name: &'static str) -> tracing::Span {
    tracing::debug_span!("stage", name)
}

/// One tick's dispatch: the coordinator's hosts and persona slots, and the run's
/// ports.
struct HostDispatch<'a> {
    coordinator: &'a TurnCoordinator,
    slots: &'a mut PersonaSlots,
    hosts: &'a mut Vec<ActorRef<PersonaMsg>>,
    window: usize,
    started: Instant,
}

impl HostDispatch<'_> {
    /// Activates the personas of `batch` with their inputs, a window at a
    /// time: each window is split into one batch per host, the batches run
    /// concurrently, and every state comes back to the store with its
    /// answer. Answers are in `batch`'s order. A persona whose handler
    /// failed (or whose host did) is gone; a host that failed leaves the
    /// pool.
    async fn ask<I, R: Send + 'static>(
        &mut self,
        tick: u32,
        batch: Vec<(u32, I)>,
        message: impl Fn(Vec<(Activation, I)>, RpcReplyPort<Vec<Hosted<R>>>) -> PersonaMsg,
    ) -> Vec<Answer<R>> {
        let mut answers: Vec<Option<Answer<R>>> = batch.iter().map(|_| None).collect();
        let mut due = batch.into_iter().enumerate().peekable();
        while due.peek().is_some() {
            let window: Vec<(usize, (u32, I))> = due.by_ref().take(self.window).collect();
            let hosts = self.hosts.len().min(window.len());
            if hosts == 0 {
                for (k, (p, _)) in window {
                    self.slots[p] = Slot::Gone;
                    answers[k] = Some(Err(Gone("no persona host is left".into())));
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
                for (k, (p, input)) in window.by_ref().take(take) {
                    match std::mem::replace(&mut self.slots[p], Slot::Active) {
                        Slot::Resting(activation) => {
                            members.push((k, p));
                            batch.push((activation, input));
                        }
                        other @ (Slot::Active | Slot::Gone) => {
                            self.slots[p] = other;
                            answers[k] = Some(Err(Gone("is not available".into())));
                        }
                    }
                }
                let (tx, rx) = oneshot();
                let sent = self.hosts[h].cast(message(batch, tx.into())).is_ok();
                pending.push((h, members, rx, sent));
            }
            let mut dead_hosts = Vec::new();
            for (h, members, rx, sent) in pending {
                let replies = if sent { rx.await.ok() } else { None };
                let Some(replies) = replies.filter(|a| a.len() == members.len()) else {
                    dead_hosts.push(h);
                    for (k, p) in members {
                        self.slots[p] = Slot::Gone;
                        answers[k] = Some(Err(Gone(format!("its host failed during tick {tick}"))));
                    }
                    continue;
                };
                for ((k, p), hosted) in members.into_iter().zip(replies) {
                    answers[k] = Some(match hosted {
                        Ok((activation, answer)) => {
                            self.slots[p] = Slot::Resting(activation);
                            Ok(answer)
                        }
                        Err(panic) => {
                            tracing::warn!(persona = p, tick, %panic, "a persona's handler panicked; the rest of the panel continues");
                            self.slots[p] = Slot::Gone;
                            Err(Gone(format!("failed during tick {tick}")))
                        }
                    });
                }
            }
            for h in dead_hosts.into_iter().rev() {
                self.hosts.remove(h);
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(Gone(format!("gave no answer during tick {tick}")))))
            .collect()
    }
}

impl Dispatch for HostDispatch<'_> {
    async fn retrieval_needs(&mut self, tick: u32, batch: Vec<(u32, Vec<Job>)>) -> Vec<Answer<Vec<Option<String>>>> {
        let message = |batch, reply| PersonaMsg::RetrievalNeeds { tick, batch, reply };
        self.ask(tick, batch, message).instrument(stage_span("retrieval-needs")).await
    }

    async fn prepare(
        &mut self,
        tick: u32,
        now: SimTime,
        batch: Vec<(u32, Vec<QueriedJob>)>,
    ) -> Vec<Answer<Preparation>> {
        let message = |batch, reply| PersonaMsg::Prepare { tick, now, batch, reply };
        self.ask(tick, batch, message).instrument(stage_span("retrieve-and-prompt")).await
    }

    async fn commit(&mut self, batch: Vec<(u32, PersonaCommit)>) -> Vec<Answer<Applied>> {
        let tick = batch.first().map_or(0, |(_, c)| c.tick);
        let message = |batch, reply| PersonaMsg::Commit { batch, reply };
        self.ask(tick, batch, message).instrument(stage_span("commit")).await
    }

    async fn embed<T: AsRef<str> + Send + Sync>(&mut self, role: EmbedRole, requests: Vec<(u32, T)>) -> StageResult {
        let shared = &self.coordinator.shared;
        let e = &shared.config.raw.embedding;
        let key = EmbedKey { role, model: e.model.clone(), dim: e.dim };
        let span = stage_span(if role == EmbedRole::Retrieval { "retrieval-embedding" } else { "memory-embedding" });
        let result = match &shared.embedder {
            Some(port) => embed_stage(&**port, &key, &Plan::new(requests), shared.strategy).instrument(span).await,
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

    async fn converse(
        &mut self,
        tick: u32,
        ready: Vec<Prepared>,
        progress: (u64, u64),
    ) -> (Vec<Option<Finished>>, Option<String>) {
        let c = self.coordinator;
        let jobs = ready.len();
        let done = crate::chat_pool::converse_all(&c.shared, &c.progress, tick, ready, progress)
            .instrument(stage_span("chat"))
            .await;
        tracing::debug!(jobs, "chat window done");
        done
    }

    fn stage(&self, tick: u32, stage: &'static str, done: u64, total: u64) {
        self.coordinator.progress.stage(tick, stage, done, total);
    }

    fn clock_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    fn embeddings(&mut self) -> Vec<EmbedExchange> {
        self.coordinator.shared.recorder.as_ref().map(|r| r.take()).unwrap_or_default()
    }
}

impl TurnCoordinator {
    /// The run's inputs to a tick, stages 3 and 4 taking `window` personas
    /// at a time.
    fn tick_spec(&self, window: usize) -> TickSpec<'_> {
        let shared = &self.shared;
        TickSpec {
            cfg: &shared.config,
            scenario: &shared.scenario,
            seed: shared.seed,
            window,
            session_end_tick: shared.session_end_tick,
            embeddings: shared.embedder.is_some(),
        }
    }

    /// Runs one tick as `docs/ARCHITECTURE.md` ("One tick through the
    /// code") walks it, on this coordinator's hosts.
    async fn run_tick(&self, state: &mut CoordinatorState, tick: u32) -> TickReport {
        let spec = self.tick_spec(state.window);
        let CoordinatorState { slots, hosts, window, book } = state;
        let mut dispatch = HostDispatch { coordinator: self, slots, hosts, window: *window, started: Instant::now() };
        run_tick(&spec, book, &mut dispatch, tick).await
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
        Ok(CoordinatorState {
            slots: PersonaSlots { first: args.first, slots: args.personas.into_iter().map(Slot::Resting).collect() },
            hosts: args.hosts,
            window: args.window.max(1),
            book: Book::of_shard(args.genesis, args.first, args.interests),
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
                let at = persona.checked_sub(state.slots.first).map(|i| i as usize);
                let snapshot = match at.and_then(|i| state.slots.slots.get(i)) {
                    Some(Slot::Resting(activation)) => Some(PersonaState::clone(activation)),
                    Some(Slot::Active | Slot::Gone) | None => None,
                };
                let _ = reply.send(snapshot);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
