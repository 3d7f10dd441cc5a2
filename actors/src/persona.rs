//! The persona actor: owns one persona's state and answers the coordinator's
//! stage messages. State changes only on [`PersonaMsg::Commit`].

use crate::shared::RunShared;
use engine::clock::SimTime;
use engine::persona::state::Applied;
use engine::persona::{PersonaCommit, PersonaState, Profile};
use engine::scenario::Job;
use engine::turn::{prepare, retrieval_need, Prepared, Refusal, TickContext};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;

/// Messages to a persona actor.
pub enum PersonaMsg {
    /// Stage 2: for each of the persona's jobs this tick (in job order), the
    /// text it needs embedded for retrieval, or `None` under the skip rules.
    RetrievalNeeds {
        /// Tick number.
        tick: u32,
        /// The persona's jobs, in job order.
        jobs: Vec<Job>,
        /// Reply: one entry per job.
        reply: RpcReplyPort<Vec<Option<String>>>,
    },
    /// Stage 3: rank memories with each job's query vector and build the
    /// prompts. Refusals come back as `Err(reason)`.
    Prepare {
        /// Tick number.
        tick: u32,
        /// Its simulated time.
        now: SimTime,
        /// Jobs with their retrieval vectors, in job order.
        jobs: Vec<(Job, Option<Arc<[f32]>>)>,
        /// Reply: one entry per job.
        reply: RpcReplyPort<Vec<Result<Prepared, Refusal>>>,
    },
    /// Stage 7: apply the tick's results and consolidate. Replies with the
    /// new memory ids per job, the consolidation changes and the new state
    /// digest.
    Commit {
        /// The commit.
        commit: PersonaCommit,
        /// Reply.
        reply: RpcReplyPort<Applied>,
    },
    /// A copy of the persona's state, for inspection and tests.
    Snapshot {
        /// Reply.
        reply: RpcReplyPort<PersonaState>,
    },
}

/// The persona actor. `self` is read-only run configuration.
pub struct PersonaActor {
    /// Shared, read-only run inputs.
    pub shared: Arc<RunShared>,
}

impl PersonaActor {
    fn check_fault(&self, persona: u32, tick: u32) {
        if self.shared.config.raw.faults.panic.iter().any(|f| f.persona == persona && f.tick == tick) {
            panic!("injected fault: persona {persona} panics at tick {tick}");
        }
    }

    fn ctx(&self, tick: u32, now: SimTime) -> TickContext<'_> {
        TickContext { cfg: &self.shared.config, scenario: &self.shared.scenario, tick, now }
    }
}

impl Actor for PersonaActor {
    type Msg = PersonaMsg;
    type State = PersonaState;
    type Arguments = Profile;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        profile: Profile,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(PersonaState::new(profile))
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            PersonaMsg::RetrievalNeeds { tick, jobs, reply } => {
                self.check_fault(state.profile.id, tick);
                let ctx = self.ctx(tick, SimTime::default());
                let needs = jobs.iter().map(|j| retrieval_need(state, j, &ctx)).collect();
                // The coordinator may have given up on this tick; nothing to do then.
                let _ = reply.send(needs);
            }
            PersonaMsg::Prepare { tick, now, jobs, reply } => {
                let ctx = self.ctx(tick, now);
                let prepared = jobs.iter().map(|(j, v)| prepare(state, j, v.as_deref(), &ctx)).collect();
                let _ = reply.send(prepared);
            }
            PersonaMsg::Commit { commit, reply } => {
                let _ = reply.send(state.apply(commit));
            }
            PersonaMsg::Snapshot { reply } => {
                let _ = reply.send(state.clone());
            }
        }
        Ok(())
    }
}
