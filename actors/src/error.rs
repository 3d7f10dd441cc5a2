//! The one error type of the actors crate.

/// What can go wrong running a simulation. Caller faults (bad input) and
/// internal faults (an actor that could not start) are separate variants so
/// the CLI can say which is which.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine rejected an input.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A run parameter is out of range.
    #[error("{what}: {cause}")]
    InvalidInput {
        /// The parameter.
        what: &'static str,
        /// Why it is rejected.
        cause: String,
    },
    /// An actor could not be spawned.
    #[error("could not start the {actor} actor: {cause}")]
    Spawn {
        /// Which actor.
        actor: String,
        /// ractor's message.
        cause: String,
    },
    /// The coordinator stopped answering (an internal fault).
    #[error("the turn coordinator failed during tick {tick}: {cause}")]
    Coordinator {
        /// The tick in progress.
        tick: u32,
        /// What happened.
        cause: String,
    },
    /// The observer (e.g. the output writer) refused a committed tick.
    #[error("could not record tick {tick}: {cause}")]
    Observer {
        /// The tick.
        tick: u32,
        /// The observer's message.
        cause: String,
    },
    /// The field actor stopped answering (an internal fault).
    #[error("the field actor failed: {0}")]
    FieldActor(String),
    /// A mission of the experiment failed.
    #[error("{0}")]
    Mission(String),
    /// The field refused an operation.
    #[error(transparent)]
    Field(#[from] ::field::PortError),
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
