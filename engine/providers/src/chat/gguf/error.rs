//! The GGUF engine's own error: a vocabulary, template or decoding that
//! failed.

/// Why a GGUF model's vocabulary, template or decoding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The file's metadata (vocabulary, chat template) cannot serve.
    #[error("{0}")]
    File(String),
    /// A reply could not be decoded (the model or the grammar failed).
    #[error("{0}")]
    Decode(String),
}
