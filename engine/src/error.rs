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
}

/// Result with the engine's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
