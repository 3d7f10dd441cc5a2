//! The field actor: owns the shared memory field (every context's FAISS
//! index behind its `parking_lot::Mutex`, and the pattern tables) and
//! applies agents' operations in deterministic phases. FAISS work runs on
//! tokio's blocking pool, never on the async executor.
//!
//! Agents submit operations ([`FieldHandle::submit`]) whenever they like; nothing is
//! applied until the phase ends ([`FieldHandle::end_phase`]), which applies it in
//! `(agent, seq)` order (see [`SharedContextPort::phase`]) and answers every
//! submission. The arrival order of submissions, and so the number of
//! threads, cannot change a result.

use crate::{Error, Result};
use ::field::log::EventLog;
use ::field::{
    ContextId, Entry, FieldConfig, FieldContexts, PortError, PortReply, SharedContextPort, Submitted, TelemetryReport,
};
use engine::clock::SimTime;
use engine::digest::Digest;
use ractor::concurrency::{oneshot, OneshotReceiver};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Answer to one submitted operation.
pub type OpReply = std::result::Result<PortReply, PortError>;

/// Messages to the field actor (private: [`FieldHandle`] is the interface).
pub(crate) enum FieldMsg {
    /// Opens a context for `team`, seeded with `initial`, optionally logging
    /// its phases to `log` (a new `field.events` file).
    Create {
        /// Team members.
        team: Vec<String>,
        /// Seed entries.
        initial: Vec<Entry>,
        /// Simulated time.
        now: SimTime,
        /// Event log path.
        log: Option<PathBuf>,
        /// Reply: the context.
        reply: RpcReplyPort<std::result::Result<ContextId, PortError>>,
    },
    /// Queues an operation for the context's current phase. The reply comes
    /// when the phase ends.
    Submit {
        /// Context.
        ctx: ContextId,
        /// The operation, with its agent and sequence number.
        op: Submitted,
        /// Reply, sent at the end of the phase.
        reply: RpcReplyPort<OpReply>,
    },
    /// Applies every queued operation of the context at `now` and answers
    /// them. Replies with the number applied.
    EndPhase {
        /// Context.
        ctx: ContextId,
        /// Simulated time of the phase.
        now: SimTime,
        /// Reply.
        reply: RpcReplyPort<std::result::Result<usize, PortError>>,
    },
    /// The context's digest and telemetry at `now`.
    Report {
        /// Context.
        ctx: ContextId,
        /// Simulated time.
        now: SimTime,
        /// Reply; an error for an unknown or destroyed context, or for a
        /// pattern whose strength or resonance is not finite.
        reply: RpcReplyPort<std::result::Result<(Digest, TelemetryReport), PortError>>,
    },
    /// Saves the context's field (FAISS's writer plus the pattern table).
    Save {
        /// Context.
        ctx: ContextId,
        /// Directory.
        dir: PathBuf,
        /// Reply.
        reply: RpcReplyPort<std::result::Result<(), PortError>>,
    },
    /// Closes a context; its queued operations fail.
    Destroy {
        /// Context.
        ctx: ContextId,
        /// Reply.
        reply: RpcReplyPort<std::result::Result<(), PortError>>,
    },
}

/// The field actor; `self` holds nothing mutable. Spawn it with
/// [`FieldHandle::spawn`].
pub(crate) struct FieldActor;

/// The actor's state: the contexts (moved to the blocking pool while FAISS
/// works) and each context's queued operations.
pub(crate) struct FieldState {
    port: Option<FieldContexts>,
    pending: BTreeMap<ContextId, Vec<(Submitted, RpcReplyPort<OpReply>)>>,
}

/// Runs `f` on the contexts on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    state: &mut FieldState,
    f: impl FnOnce(&mut FieldContexts) -> T + Send + 'static,
) -> std::result::Result<T, ActorProcessingErr> {
    let mut port = state.port.take().ok_or("the field was lost by an earlier failure")?;
    let (port, out) = tokio::task::spawn_blocking(move || {
        let out = f(&mut port);
        (port, out)
    })
    .await?;
    state.port = Some(port);
    Ok(out)
}

impl Actor for FieldActor {
    type Msg = FieldMsg;
    type State = FieldState;
    /// Dimension and parameters of every context's field.
    type Arguments = (usize, FieldConfig);

    async fn pre_start(
        &self,
        _myself: ActorRef<FieldMsg>,
        (dim, cfg): (usize, FieldConfig),
    ) -> std::result::Result<FieldState, ActorProcessingErr> {
        Ok(FieldState { port: Some(FieldContexts::new(dim, cfg)), pending: BTreeMap::new() })
    }

    async fn handle(
        &self,
        _myself: ActorRef<FieldMsg>,
        msg: FieldMsg,
        state: &mut FieldState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            FieldMsg::Create { team, initial, now, log, reply } => {
                let created = blocking(state, move |port| {
                    let ctx = port.create_context(&team, initial, now)?;
                    if let Some(path) = log {
                        port.record(ctx, EventLog::create(&path)?)?;
                    }
                    Ok(ctx)
                })
                .await?;
                let _ = reply.send(created);
            }
            FieldMsg::Submit { ctx, op, reply } => state.pending.entry(ctx).or_default().push((op, reply)),
            FieldMsg::EndPhase { ctx, now, reply } => {
                let (ops, replies): (Vec<Submitted>, Vec<RpcReplyPort<OpReply>>) =
                    state.pending.remove(&ctx).unwrap_or_default().into_iter().unzip();
                let applied = blocking(state, move |port| port.phase(ctx, &ops, now)).await?;
                let answer = match applied {
                    Ok(results) => {
                        let n = results.len();
                        for (port, result) in replies.into_iter().zip(results) {
                            let _ = port.send(result);
                        }
                        Ok(n)
                    }
                    Err(e) => {
                        for port in replies {
                            let _ = port.send(Err(e.clone()));
                        }
                        Err(e)
                    }
                };
                let _ = reply.send(answer);
            }
            FieldMsg::Report { ctx, now, reply } => {
                let report = blocking(state, move |port| match port.session(ctx) {
                    Some(s) => s.report(now).map(|r| (s.field.digest(), r)).map_err(PortError::from),
                    None => Err(PortError::UnknownContext(ctx)),
                })
                .await?;
                let _ = reply.send(report);
            }
            FieldMsg::Save { ctx, dir, reply } => {
                let saved = blocking(state, move |port| match port.session(ctx) {
                    Some(s) => s.field.save(&dir).map_err(PortError::from),
                    None => port.check_context(ctx),
                })
                .await?;
                let _ = reply.send(saved);
            }
            FieldMsg::Destroy { ctx, reply } => {
                let port = state.port.as_mut().ok_or("the field was lost by an earlier failure")?;
                let destroyed = port.destroy_context(ctx);
                for (_, queued) in state.pending.remove(&ctx).unwrap_or_default() {
                    let _ = queued.send(Err(PortError::Destroyed(ctx)));
                }
                let _ = reply.send(destroyed);
            }
        }
        Ok(())
    }
}

/// A typed handle on a running field actor: every operation is an async
/// method; each submission is answered or failed, never dropped.
#[derive(Clone)]
pub struct FieldHandle(ActorRef<FieldMsg>);

fn gone<E>(_: E) -> Error {
    Error::FieldActor("it stopped without replying".into())
}

impl FieldHandle {
    /// Spawns a field actor.
    pub async fn spawn(dim: usize, cfg: FieldConfig) -> Result<(FieldHandle, tokio::task::JoinHandle<()>)> {
        let (actor, join) = Actor::spawn(None, FieldActor, (dim, cfg)).await.map_err(|e| Error::spawn("field", e))?;
        Ok((FieldHandle(actor), join))
    }

    async fn ask<T>(&self, build: impl FnOnce(RpcReplyPort<T>) -> FieldMsg) -> Result<T> {
        let (tx, rx) = oneshot();
        self.0.cast(build(tx.into())).map_err(gone)?;
        rx.await.map_err(gone)
    }

    /// Opens a context.
    pub async fn create(
        &self,
        team: Vec<String>,
        initial: Vec<Entry>,
        now: SimTime,
        log: Option<PathBuf>,
    ) -> Result<ContextId> {
        Ok(self.ask(|reply| FieldMsg::Create { team, initial, now, log, reply }).await??)
    }

    /// Queues an operation; await the returned receiver after the phase
    /// ends.
    pub fn submit(&self, ctx: ContextId, op: Submitted) -> Result<OneshotReceiver<OpReply>> {
        let (tx, rx) = oneshot();
        self.0.cast(FieldMsg::Submit { ctx, op, reply: tx.into() }).map_err(gone)?;
        Ok(rx)
    }

    /// Ends the phase: applies and answers everything queued.
    pub async fn end_phase(&self, ctx: ContextId, now: SimTime) -> Result<usize> {
        Ok(self.ask(|reply| FieldMsg::EndPhase { ctx, now, reply }).await??)
    }

    /// Digest and telemetry.
    pub async fn report(&self, ctx: ContextId, now: SimTime) -> Result<(Digest, TelemetryReport)> {
        Ok(self.ask(|reply| FieldMsg::Report { ctx, now, reply }).await??)
    }

    /// Saves the field into `dir`.
    pub async fn save(&self, ctx: ContextId, dir: PathBuf) -> Result<()> {
        Ok(self.ask(|reply| FieldMsg::Save { ctx, dir, reply }).await??)
    }

    /// Closes a context.
    pub async fn destroy(&self, ctx: ContextId) -> Result<()> {
        Ok(self.ask(|reply| FieldMsg::Destroy { ctx, reply }).await??)
    }

    /// Stops the actor.
    pub fn stop(&self) {
        self.0.stop(None);
    }
}
