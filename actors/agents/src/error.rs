//! The one error type of the agents crate. The faults every actor crate
//! shares (a parameter out of range, an actor that could not start) are
//! [`engine::error::ActorFault`], wrapped whole as `actors::Error` wraps
//! it; what only the field and the experiment meet is here.

/// What can go wrong running the field actor or the experiment. Caller
/// faults (bad input) and internal faults (an actor that failed) are told
/// apart so the CLI can say which is which.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine rejected an input.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A parameter is out of range, or an actor could not start.
    #[error(transparent)]
    Fault(#[from] engine::error::ActorFault),
    /// The field actor stopped answering (an internal fault).
    #[error("the field actor failed: {0}")]
    FieldActor(String),
    /// A mission of the experiment failed (an internal fault of the
    /// mission's machinery).
    #[error("{0}")]
    Mission(String),
    /// An agent's chat call failed.
    #[error("{role} chat call failed: {source}")]
    AgentChat {
        /// The agent's role.
        role: &'static str,
        /// The chat port's error.
        #[source]
        source: Box<engine::Error>,
    },
    /// A mission of the experiment failed; `source` says how.
    #[error("mission on topic {topic}, repetition {rep}, {condition}: {source}")]
    InMission {
        /// The topic.
        topic: String,
        /// The repetition.
        rep: u32,
        /// The condition's name.
        condition: &'static str,
        /// What failed.
        #[source]
        source: Box<Error>,
    },
    /// The field refused an operation.
    #[error(transparent)]
    Field(#[from] ::field::PortError),
}

impl Error {
    /// A parameter out of range (a caller fault).
    pub fn invalid(what: &'static str, cause: impl Into<String>) -> Self {
        Error::Fault(engine::error::ActorFault::invalid(what, cause))
    }

    /// An actor that could not be spawned (an internal fault).
    pub fn spawn(actor: impl Into<String>, source: ractor::SpawnErr) -> Self {
        Error::Fault(engine::error::ActorFault::spawn(actor, source))
    }

    /// Whether the caller is at fault (bad configuration, bad input, a
    /// topic or cassette that cannot be used) rather than this program or
    /// its environment (an actor that failed, a disk that refused a write).
    pub fn is_caller_fault(&self) -> bool {
        match self {
            Error::Engine(e) => e.is_caller_fault(),
            Error::Fault(f) => f.is_caller_fault(),
            Error::Field(e) => e.is_caller_fault(),
            Error::InMission { source, .. } => source.is_caller_fault(),
            Error::AgentChat { .. } | Error::FieldActor(_) | Error::Mission(_) => false,
        }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_faults_are_told_from_internal_ones() {
        let config =
            || engine::Error::Config { source_name: "c.toml".into(), field: "chat.model".into(), cause: "x".into() };
        assert!(Error::invalid("topics", "0").is_caller_fault());
        assert!(Error::from(config()).is_caller_fault());
        assert!(Error::Field(::field::PortError::DuplicateSequence { agent: "a".into(), seq: 1 }).is_caller_fault());
        assert!(!Error::FieldActor("gone".into()).is_caller_fault());
        // A mission's error is judged by what it wraps.
        let in_mission = |source| Error::InMission { topic: "t".into(), rep: 0, condition: "field", source };
        assert!(in_mission(Box::new(Error::from(config()))).is_caller_fault());
        assert!(!in_mission(Box::new(Error::Mission("no reply".into()))).is_caller_fault());
    }
}
