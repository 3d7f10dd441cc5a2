//! The panel supervisor: parent of every persona actor. A persona that
//! panics is reported here and logged; the supervisor keeps running, so the
//! rest of the panel carries on. The coordinator sees the failure as the
//! dropped reply of the message in flight and turns it into job outcomes.

use parking_lot::Mutex;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Messages to the supervisor.
pub enum SupervisorMsg {
    /// How many child failures have been seen so far.
    Failures {
        /// Reply.
        reply: ractor::RpcReplyPort<usize>,
    },
}

/// Child failures by actor id, shared with whoever wants to read them.
pub type FailureLog = Arc<Mutex<BTreeMap<ActorId, String>>>;

/// The supervisor. `self` holds the shared failure log.
pub struct PanelSupervisor {
    /// Where failures are recorded. A `parking_lot::Mutex` because it is
    /// held for one insert and never across an await.
    pub failures: FailureLog,
}

impl Actor for PanelSupervisor {
    type Msg = SupervisorMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<Self::Msg>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(&self, _myself: ActorRef<Self::Msg>, message: Self::Msg, _state: &mut ()) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Failures { reply } => {
                let _ = reply.send(self.failures.lock().len());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            tracing::warn!(actor = %cell.get_id(), error = %err, "persona actor failed; the rest of the panel continues");
            self.failures.lock().insert(cell.get_id(), err.to_string());
        }
        Ok(())
    }
}
