//! The chat side: the [`ChatClient`] (the engine's
//! [`engine::chat::ChatPort`] over one or more upstream endpoints) and the
//! upstreams behind it ([`upstream::ChatUpstream`]): an OpenAI-compatible
//! `/chat/completions` server ([`HttpChat`]), the modelled provider
//! ([`ModelledChat`]: the scripted replies behind modelled latency and
//! seeded faults) and, with the `local-models` feature, a GGUF model
//! in-process ([`gguf`]); and the Batch API ([`batch_api`]) around a
//! client.

pub mod batch_api;
pub mod client;
#[cfg(feature = "local-models")]
pub mod gguf;
pub mod http;
pub mod modelled;
pub mod upstream;

pub use batch_api::BatchChat;
pub use client::ChatClient;
pub use http::HttpChat;
pub use modelled::ModelledChat;
