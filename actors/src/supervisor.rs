//! The panel supervisor: parent of every persona host. A persona whose
//! handler panics is caught by its host (see [`crate::persona`]); a host
//! that fails is reported here and logged, and the supervisor keeps
//! running, so the rest of the panel carries on. The coordinator sees a
//! failed host as the dropped reply of its batch and turns it into job
//! outcomes.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

/// Messages to the supervisor: none. It acts only on supervision events
/// from its children; a failure shows in the run as the failed jobs of the
/// persona, and in the log.
pub enum SupervisorMsg {}

/// The supervisor. It has no configuration; its state is the number of
/// persona actors that failed, which it logs as they fail.
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
        _failed: &mut usize,
    ) -> Result<(), ActorProcessingErr> {
        match message {}
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        failed: &mut usize,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            *failed += 1;
            tracing::warn!(actor = %cell.get_id(), error = %err, failed = *failed, "persona host failed; the rest of the panel continues");
        }
        Ok(())
    }
}
