//! The one error type of the engine, and [`ActorFault`], the faults every
//! crate that runs actors shares (`actors` and `agents` each wrap it).

/// Every way an engine operation can fail. Variants name the input and the
/// cause so that the CLI can print them as they are.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration file or value is invalid.
    #[error("config {source_name}: {field}: {cause}")]
    Config {
        /// The file (or `<defaults>`) the value came from.
        source_name: String,
        /// Dotted path of the offending field.
        field: String,
        /// What is wrong with it.
        cause: String,
    },
    /// A fixture (scenario, trait table) is invalid.
    #[error("fixture {source_name}: {field}: {cause}")]
    Fixture {
        /// The file (or built-in name) the fixture came from.
        source_name: String,
        /// Dotted path of the offending field.
        field: String,
        /// What is wrong with it.
        cause: String,
    },
    /// A file could not be parsed at all (syntax error); the parser's
    /// message carries the line and column.
    #[error("{source_name}: {}", source.to_string().trim_end())]
    Parse {
        /// The file that failed to parse.
        source_name: String,
        /// The parser's error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// An embedding result did not have one vector per submitted text.
    #[error("embedding result has {got} vectors for {expected} texts")]
    WrongCardinality {
        /// Texts submitted.
        expected: usize,
        /// Vectors returned.
        got: usize,
    },
    /// An embedding vector had the wrong length.
    #[error("embedding vector {index} has dimension {got}, expected {expected}")]
    WrongDimension {
        /// Position of the vector in the result.
        index: usize,
        /// Configured dimension.
        expected: usize,
        /// Returned dimension.
        got: usize,
    },
    /// An embedding provider failed after its retries (the port's
    /// [`crate::embed::EmbedError`] carries what the failed invocation was
    /// billed; this is it once the billing has been accounted for).
    #[error("embedding provider failed: {cause}")]
    Embedding {
        /// The provider's message.
        cause: String,
    },
    /// A chat provider failed after its transport retries (the port's
    /// [`crate::chat::ChatError`] carries what its attempts were billed).
    #[error("chat provider failed: {cause}")]
    Chat {
        /// The provider's message.
        cause: String,
    },
    /// A file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not of the expected kind or format version (see
    /// [`crate::store::frame`]), or a value could not be framed.
    #[error("{file}: {cause}")]
    Format {
        /// The file.
        file: String,
        /// What is wrong.
        cause: String,
    },
    /// A frame of a file is damaged.
    #[error("{file}: frame {frame} at byte offset {offset}: {cause}")]
    Corrupt {
        /// The file.
        file: String,
        /// Frame index (0 is the first frame after the preamble).
        frame: u64,
        /// Byte offset of the frame's start.
        offset: u64,
        /// What is wrong.
        cause: String,
    },
    /// The last frame of a file is incomplete: the writer was killed while
    /// writing it.
    #[error("{file}: frame {frame} at byte offset {offset} is torn: it needs {needed} bytes, {available} remain")]
    Torn {
        /// The file.
        file: String,
        /// Frame index.
        frame: u64,
        /// Byte offset of the frame's start.
        offset: u64,
        /// Bytes the frame needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A trace ends with the parts of a tick but not the frame that commits
    /// them: the writer was stopped while writing a large tick.
    #[error(
        "{file}: tick {tick} is not committed: {parts} part frames from byte offset {offset} have no commit frame \
         (the run was stopped while writing it; resuming cuts them off)"
    )]
    Uncommitted {
        /// The trace.
        file: String,
        /// The tick.
        tick: u32,
        /// Complete part frames found.
        parts: u32,
        /// Byte offset of the first part.
        offset: u64,
    },
    /// A trace was recorded by another engine in a way this one cannot
    /// reproduce: an older trace format, or a configuration this engine
    /// resolves to a different hash (new settings or changed defaults since).
    #[error("{file} was recorded by engine {recorded_by} {why}; replay it with engine {recorded_by}")]
    RecordedByOlder {
        /// The trace.
        file: String,
        /// The engine version that recorded it.
        recorded_by: String,
        /// What no longer matches, e.g. "with an older configuration (...)".
        why: String,
    },
    /// A report asked to cross intent with a trait personas do not have.
    #[error("unknown trait {name:?}; known: {known}")]
    UnknownTrait {
        /// The trait asked for.
        name: String,
        /// The traits there are, comma separated.
        known: String,
    },
    /// Replay asked the cassette for an answer the trace does not hold.
    #[error("cassette miss: no recorded answer for {what} request {digest}")]
    CassetteMiss {
        /// `chat` or `embedding`.
        what: &'static str,
        /// The request digest.
        digest: String,
    },
}

impl Error {
    /// Whether the caller is at fault: a configuration, fixture, file or
    /// trace that cannot be used as given. Everything else (a provider
    /// that failed, a disk that refused a write) is this program's or its
    /// environment's.
    pub fn is_caller_fault(&self) -> bool {
        matches!(
            self,
            Error::Config { .. }
                | Error::Fixture { .. }
                | Error::Parse { .. }
                | Error::Format { .. }
                | Error::Corrupt { .. }
                | Error::Torn { .. }
                | Error::Uncommitted { .. }
                | Error::RecordedByOlder { .. }
        )
    }
}

/// What every crate that runs actors can meet besides the engine's own
/// refusals: a parameter out of range (the caller's fault) or an actor
/// that could not start (an internal one). `actors::Error` and
/// `agents::Error` wrap it whole, so the two share one shape and one set of
/// messages, and neither depends on the other.
#[derive(Debug, thiserror::Error)]
pub enum ActorFault {
    /// A parameter is out of range.
    #[error("{what}: {cause}")]
    InvalidInput {
        /// The parameter.
        what: &'static str,
        /// Why it is rejected.
        cause: String,
    },
    /// An actor could not be spawned.
    #[error("could not start the {actor} actor: {source}")]
    Spawn {
        /// Which actor.
        actor: String,
        /// The actor runtime's error (ractor's, boxed: the engine has no
        /// runtime).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ActorFault {
    /// A parameter out of range.
    pub fn invalid(what: &'static str, cause: impl Into<String>) -> Self {
        ActorFault::InvalidInput { what, cause: cause.into() }
    }

    /// An actor that could not start, with the runtime's error.
    pub fn spawn(actor: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ActorFault::Spawn { actor: actor.into(), source: Box::new(source) }
    }

    /// Whether the caller is at fault: a parameter out of range is, an
    /// actor that could not start is not.
    pub fn is_caller_fault(&self) -> bool {
        match self {
            ActorFault::InvalidInput { .. } => true,
            ActorFault::Spawn { .. } => false,
        }
    }
}

/// Result with the engine's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
