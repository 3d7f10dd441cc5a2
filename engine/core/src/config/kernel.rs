//! Which compiled form of a local model's kernels runs: `[chat.gguf]
//! kernel` and `[embedding.minilm] kernel`.

use serde::{Deserialize, Serialize};

/// Which compiled form of a local model's kernels runs (the GGUF chat
/// model's, MiniLM's). Every level computes the same bits (the providers'
/// `kernel` module defines each operation once, in a fixed order); the
/// choice changes speed only, so it stays out of the digests and the
/// config hash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelLevel {
    /// The fastest level this CPU runs, chosen when the model loads; the
    /// level chosen is what a run's trace header records.
    #[default]
    Auto,
    /// AVX2 and FMA (x86-64-v3); refused on a CPU without them.
    Avx2,
    /// The baseline CPU: no vector extension beyond the target's default.
    /// Slower; the same bits.
    Portable,
}

impl KernelLevel {
    /// Whether the level is left to the machine.
    pub fn is_auto(&self) -> bool {
        *self == KernelLevel::Auto
    }

    /// Its name in configs and summaries.
    pub fn name(self) -> &'static str {
        match self {
            KernelLevel::Auto => "auto",
            KernelLevel::Avx2 => "avx2",
            KernelLevel::Portable => "portable",
        }
    }
}
