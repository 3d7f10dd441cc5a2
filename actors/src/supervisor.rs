//! The panel supervisor: parent of every persona actor. A persona that
//! panics is reported here and logged; the supervisor keeps running, so the
//! rest of the panel carries on. The coordinator sees the failure as the
//! dropped reply of the message in flight and turns it into job outcomes.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

/// Messages to the supervisor.
pub enum SupervisorMsg {
    /// How many child failures have been seen so far.
    Failures {
        /// Reply.
        reply: ractor::RpcReplyPort<usize>,
    },
}

/// The supervisor. It has no configuration; its state is the number of
/// persona actors that failed.
pub struct PanelSupervisor;

impl Actor for PanelSupervisor {
    type Msg = SupervisorMsg;
    type State = usize;
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<Self::Msg>, _args: ()) -> Result<usize, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        failed: &mut usize,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Failures { reply } => {
                let _ = reply.send(*failed);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        failed: &mut usize,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            tracing::warn!(actor = %cell.get_id(), error = %err, "persona actor failed; the rest of the panel continues");
            *failed += 1;
        }
        Ok(())
    }
}
