//! The one error type of the actors crate.

/// What can go wrong running a simulation. Caller faults (bad input) and
/// internal faults (an actor that could not start) are separate variants so
/// the CLI can say which is which. The faults every actor crate shares
/// (a parameter out of range, an actor that could not start) are
/// [`engine::error::ActorFault`], which the agents crate's error wraps too.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine rejected an input.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A run parameter is out of range, or an actor could not start: the
    /// faults every actor crate shares ([`engine::error::ActorFault`]).
    #[error(transparent)]
    Fault(#[from] engine::error::ActorFault),
    /// The coordinator stopped answering (an internal fault).
    #[error("the turn coordinator failed during tick {tick}: {cause}")]
    Coordinator {
        /// The tick in progress.
        tick: u32,
        /// What happened.
        cause: String,
    },
    /// The observer (e.g. the output writer) refused a committed tick.
    #[error("could not record tick {tick}: {source}")]
    Observer {
        /// The tick.
        tick: u32,
        /// The observer's error.
        #[source]
        source: Box<Error>,
    },
    /// A re-run stopped because it diverged from its trace at this tick.
    #[error("the re-run diverged from the trace at tick {0}")]
    Diverged(u32),
    /// The trace writer thread stopped before the run did.
    #[error("the trace writer {0}")]
    TraceWriter(&'static str),
    /// The trace writer could not write a record (a full disk, say); what
    /// was committed before it stays.
    #[error("could not write {what} to the trace")]
    TraceWrite {
        /// `tick N` or `the end of the run`.
        what: String,
        /// The writer's error.
        #[source]
        source: engine::Error,
    },
}

impl Error {
    /// Whether the caller is at fault (bad configuration, bad input, a
    /// fixture or trace that cannot be used) rather than this program or
    /// its environment (an actor that failed, a disk that refused a write).
    pub fn is_caller_fault(&self) -> bool {
        match self {
            Error::Engine(e) => e.is_caller_fault(),
            Error::Fault(f) => f.is_caller_fault(),
            Error::Observer { source, .. } => source.is_caller_fault(),
            Error::Coordinator { .. } | Error::TraceWriter(_) | Error::TraceWrite { .. } | Error::Diverged(_) => false,
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
        let io = || engine::Error::Io { file: "t.bin".into(), source: std::io::Error::other("disk full") };
        assert!(Error::from(engine::error::ActorFault::invalid("personas", "0")).is_caller_fault());
        assert!(Error::Engine(config()).is_caller_fault());
        assert!(!Error::Engine(io()).is_caller_fault());
        assert!(!Error::Coordinator { tick: 1, cause: "gone".into() }.is_caller_fault());
        // Wrapped errors are judged by what they wrap.
        assert!(Error::Observer { tick: 2, source: Box::new(Error::Engine(config())) }.is_caller_fault());
        assert!(!Error::Observer { tick: 2, source: Box::new(Error::Engine(io())) }.is_caller_fault());
    }
}
