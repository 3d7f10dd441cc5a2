//! Personas as virtual actors, hosted by a pool of ractor actors.
//!
//! Each persona is an actor in the Orleans sense: an identity, a private
//! state that only its own messages read and only its commit changes, and
//! stage messages handled one at a time, in order. What it does not have is
//! a ractor task of its own while it is idle. Between stages its state rests
//! in the coordinator's compact store; for a stage window the coordinator
//! *activates* a batch of personas on a [`PersonaHost`] (moves their states
//! into the host's message), the host runs the stage for each, and hands
//! every state back with its answer (*deactivation*). A million idle
//! personas therefore cost their state and nothing else, and a stage costs
//! one message per host, not one per persona.
//!
//! A panic in one persona's handler is caught on its own: that persona's
//! state is dropped (it may be half-changed), its answer is the failure, and
//! the coordinator refuses it for the rest of the run, as it would a
//! persona actor that died. The host and the rest of the batch carry on.

use crate::shared::RunShared;
use engine::clock::SimTime;
use engine::persona::state::Applied;
use engine::persona::{PersonaCommit, PersonaState};
use engine::scenario::Job;
use engine::turn::{prepare, retrieval_need, TickContext};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A persona activated for a stage: its state, moved into the host and
/// handed back with the answer.
pub type Activation = Box<PersonaState>;

/// What a host hands back for one persona: its state and the stage's
/// answer, or, when the persona's handler panicked, the panic's message
/// (the state is then lost).
pub type Hosted<R> = Result<(Activation, R), String>;

pub use engine::tick::{Preparation, QueriedJob};

/// Messages to a persona host. Each carries a batch of activations, in
/// persona order, and is answered in the same order.
pub enum PersonaMsg {
    /// Stage 2: for each of a persona's jobs this tick (in job order), the
    /// text it needs embedded for retrieval, or `None` under the skip rules.
    RetrievalNeeds {
        /// Tick number.
        tick: u32,
        /// Each persona with its jobs, in job order.
        batch: Vec<(Activation, Vec<Job>)>,
        /// Reply: per persona, one entry per job.
        reply: RpcReplyPort<Vec<Hosted<Vec<Option<String>>>>>,
    },
    /// Stage 3: rank memories with each job's query vector and build the
    /// prompts. Refusals come back as `Err(reason)`.
    Prepare {
        /// Tick number.
        tick: u32,
        /// Its simulated time.
        now: SimTime,
        /// Each persona with its jobs and their retrieval vectors.
        batch: Vec<(Activation, Vec<QueriedJob>)>,
        /// Reply: per persona, one entry per job.
        reply: RpcReplyPort<Vec<Hosted<Preparation>>>,
    },
    /// Stage 7: apply the tick's results and consolidate. Answers with the
    /// new memory ids per job, the consolidation changes and the new state
    /// digest.
    Commit {
        /// Each persona with its commit.
        batch: Vec<(Activation, PersonaCommit)>,
        /// Reply.
        reply: RpcReplyPort<Vec<Hosted<Applied>>>,
    },
}

/// A host of persona activations. `self` is read-only run configuration;
/// the host keeps no state between messages.
pub struct PersonaHost {
    /// Shared, read-only run inputs.
    pub shared: Arc<RunShared>,
}

impl PersonaHost {
    fn check_fault(&self, persona: u32, tick: u32) {
        if self.shared.config.raw.faults.panic.iter().any(|f| f.persona == persona && f.tick == tick) {
            panic!("injected fault: persona {persona} panics at tick {tick}");
        }
    }

    fn ctx(&self, tick: u32, now: SimTime) -> TickContext<'_> {
        TickContext { cfg: &self.shared.config, scenario: &self.shared.scenario, tick, now }
    }
}

/// Runs `stage` for each activation on its own: a panic loses only that
/// persona's state.
fn each<I, R>(batch: Vec<(Activation, I)>, mut stage: impl FnMut(&mut PersonaState, I) -> R) -> Vec<Hosted<R>> {
    batch
        .into_iter()
        .map(|(mut state, input)| {
            catch_unwind(AssertUnwindSafe(|| stage(&mut state, input)))
                .map(|answer| (state, answer))
                .map_err(|panic| panic_message(&*panic))
        })
        .collect()
}

/// The message of a caught panic.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (None, Some(s)) => s.clone(),
        (None, None) => "a panic".to_string(),
    }
}

impl Actor for PersonaHost {
    type Msg = PersonaMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        // A reply the coordinator no longer waits for (it gave up on the
        // tick) is dropped; nothing to do then.
        match message {
            PersonaMsg::RetrievalNeeds { tick, batch, reply } => {
                let ctx = self.ctx(tick, SimTime::default());
                let _ = reply.send(each(batch, |state, jobs| {
                    self.check_fault(state.profile.id, tick);
                    jobs.iter().map(|j| retrieval_need(state, j, &ctx)).collect()
                }));
            }
            PersonaMsg::Prepare { tick, now, batch, reply } => {
                let ctx = self.ctx(tick, now);
                let _ = reply.send(each(batch, |state, jobs| {
                    jobs.iter().map(|(j, v)| prepare(state, j, v.as_deref(), &ctx)).collect()
                }));
            }
            PersonaMsg::Commit { batch, reply } => {
                let _ = reply.send(each(batch, |state, commit| state.apply(commit)));
            }
        }
        Ok(())
    }
}
