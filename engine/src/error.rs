//! The one error type of the engine.

use crate::cost::Spend;

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
    /// A file could not be parsed at all (syntax error); the cause carries
    /// the parser's line and column.
    #[error("{source_name}: {cause}")]
    Parse {
        /// The file that failed to parse.
        source_name: String,
        /// The parser's message, with line and column.
        cause: String,
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
    /// An embedding provider failed after its retries; `incurred` is what was
    /// billed before the failure.
    #[error("embedding provider failed: {cause}")]
    Embedding {
        /// The provider's message.
        cause: String,
        /// What the failed invocation had already cost.
        incurred: Spend,
    },
    /// A chat provider failed.
    #[error("chat provider failed: {cause}")]
    Chat {
        /// The provider's message.
        cause: String,
    },
    /// A trace could not be read or written.
    #[error("trace {path}: {cause}")]
    TraceIo {
        /// The trace file.
        path: String,
        /// The operating system's message.
        cause: String,
    },
    /// A trace is not a trace of this engine, or of a format it reads.
    #[error("trace format: {cause}")]
    TraceFormat {
        /// What is wrong.
        cause: String,
    },
    /// A frame of a trace is damaged.
    #[error("trace frame {frame} at byte offset {offset}: {cause}")]
    TraceCorrupt {
        /// Frame index (0 is the header).
        frame: u64,
        /// Byte offset of the frame's start.
        offset: u64,
        /// What is wrong.
        cause: String,
    },
    /// The last frame of a trace is incomplete: the run was killed while
    /// writing it.
    #[error("trace frame {frame} at byte offset {offset} is torn: it needs {needed} bytes, {available} remain")]
    TraceTorn {
        /// Frame index.
        frame: u64,
        /// Byte offset of the frame's start.
        offset: u64,
        /// Bytes the frame needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
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

/// Result with the engine's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
