//! The one error type of the runs crate.

use std::path::PathBuf;

/// What can go wrong with a run as a whole: its inputs, its directory, the
/// engine under it. Every message names the input or file and the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input (an option, a file's content) is refused.
    #[error("{0}")]
    Input(String),
    /// A file or directory could not be read or written.
    #[error("{what}")]
    Io {
        /// What was being done, naming the file (`cannot read scenario x.toml`).
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A directory holds something a run may not overwrite or use.
    #[error("{0}")]
    Refused(String),
    /// A live run was not given the go-ahead; nothing was run.
    #[error("{0}")]
    NotConfirmed(String),
    /// The engine refused an input or a file.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A survey input (a panel, its map) is refused.
    #[error(transparent)]
    Survey(#[from] survey::Error),
    /// A chat model failed outside a run (the live model's check).
    #[error(transparent)]
    Chat(#[from] engine::chat::ChatError),
    /// An embedder failed outside a run.
    #[error(transparent)]
    Embed(#[from] engine::embed::EmbedError),
    /// The run itself failed.
    #[error(transparent)]
    Actors(#[from] actors::Error),
    /// A run failed mid-way; what it committed is kept and it resumes.
    #[error(
        "the run stopped; every committed tick is kept (once the cause is fixed, `sim-cli run --resume {}` continues)",
        dir.display()
    )]
    Stopped {
        /// The run directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A run stopped before its end for a reason that allows resuming it
    /// (an interrupt, the circuit breaker).
    #[error(
        "stopped after tick {after_tick} ({reason}: {detail}); everything committed is kept: resume with `sim-cli run --resume {}`",
        dir.display()
    )]
    Interrupted {
        /// The run directory.
        dir: PathBuf,
        /// The last committed tick.
        after_tick: u32,
        /// The reason, as the summary names it.
        reason: String,
        /// Its detail.
        detail: String,
    },
    /// What was being done when an error below it happened.
    #[error("{what}")]
    Context {
        /// What was being done, naming the input.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
    /// A re-run of recorded ticks gave other results than the trace.
    #[error("{0}")]
    Diverged(String),
    /// A merge failed part-way; the shards are untouched.
    #[error("the merge into {} failed; the shards are untouched and nothing is kept in the output directory", out.display())]
    MergeFailed {
        /// The merge's output directory.
        out: PathBuf,
        /// Why.
        #[source]
        source: Box<Error>,
    },
}

/// The runs crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the caller is at fault (bad input, a directory that cannot
    /// be used), or the cause is not known to be internal (a file that
    /// cannot be read, a trace that does not replay), rather than this
    /// program or its environment (an actor that failed).
    pub fn is_caller_fault(&self) -> bool {
        match self {
            Error::Input(_)
            | Error::Refused(_)
            | Error::NotConfirmed(_)
            | Error::Interrupted { .. }
            | Error::Io { .. }
            | Error::Chat(_)
            | Error::Embed(_)
            | Error::Diverged(_) => true,
            Error::Engine(e) => e.is_caller_fault(),
            Error::Survey(_) => true,
            Error::Actors(e) => e.is_caller_fault(),
            Error::Stopped { source, .. } | Error::MergeFailed { source, .. } | Error::Context { source, .. } => {
                source.is_caller_fault()
            }
        }
    }

    /// An [`Error::Context`]: `what` was being done when `e` happened.
    pub(crate) fn context(what: impl Into<String>, e: impl Into<Error>) -> Error {
        Error::Context { what: what.into(), source: Box::new(e.into()) }
    }

    /// An [`Error::Io`] naming what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// Fails with [`Error::Input`], formatted.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::Error::Input(format!($($arg)*)))
    };
}
pub(crate) use refuse;
