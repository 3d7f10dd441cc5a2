//! Integration tests of the engine: the turn stages of one persona, run
//! without a runtime against fixed chat replies, the trace file, and the
//! inference client with its providers.

// A test names the variant it expects and reports any other.
#![allow(clippy::wildcard_enum_match_arm)]

// The chat stage: guardrail retries, reflections and their fallback, probes.
mod converse;
// The trace file: round trip, damage, truncation, limits, versions.
mod trace;
// The inference client: chunking, cache hits, retries, billing, failures.
mod client;
// The OpenAI-compatible HTTP provider, against a loopback server.
mod http;
