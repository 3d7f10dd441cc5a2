//! The embedding side: the [`InferenceClient`] (the engine's
//! [`engine::embed::EmbeddingPort`] over one provider, with its
//! [`TextCache`]) and the providers behind it ([`provider::EmbedProvider`]):
//! [`LocalProvider`] (the embedded default), [`ModelledProvider`] (latency
//! and seeded faults, for benches and tests), [`HttpProvider`] (any
//! OpenAI-compatible `/embeddings` endpoint) and, with the `local-models`
//! feature, MiniLM in-process ([`minilm`]).

pub mod cache;
pub mod client;
pub mod http;
pub mod local;
#[cfg(feature = "local-models")]
pub mod minilm;
pub mod modelled;
pub mod provider;

pub use cache::TextCache;
pub use client::InferenceClient;
pub use http::HttpProvider;
pub use local::LocalProvider;
#[cfg(feature = "local-models")]
pub use minilm::{MiniLm, MiniLmProvider};
pub use modelled::ModelledProvider;
pub use provider::EmbedProvider;
