//! Integration tests of the providers crate: the inference client over
//! scripted and modelled providers, and the HTTP provider against a real
//! HTTP server on loopback.

// A test names the variant it expects and reports any other.
#![allow(clippy::wildcard_enum_match_arm)]

// The inference client: chunking, cache hits, retries, billing, failures, simulated time.
mod client;
// The OpenAI-compatible HTTP provider, against a loopback server.
mod http;
// The chat client and its HTTP upstream against a loopback server: usage, retries, timeouts, a fleet.
mod chat;
// The local MiniLM model (feature `local-models`): an independent reference, exactness, refused directories.
#[cfg(feature = "local-models")]
mod minilm;
// The local GGUF chat model (SmolLM2-135M; feature `local-models`): tokenizer, constrained decoding, seeded sampling, the prefix cache.
#[cfg(feature = "local-models")]
mod gguf;
// Qwen2.5-Coder-0.5B (Q4_K_M; feature `local-models`): llama.cpp's token ids, candle's quantized_qwen2, batch invariance, unknown architectures.
#[cfg(feature = "local-models")]
mod qwen2;
