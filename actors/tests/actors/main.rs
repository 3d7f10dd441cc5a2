//! Integration tests of the actors crate: whole runs through the actors.

mod support;

// Same seed, same digests at any thread count; different seeds differ.
mod determinism;
// Failures stay with their job: panics, unparseable replies, refusals.
mod isolation;
// Embedding stages: skip rules, dedup, strategies, running without a port.
mod embedding;
// Memory visibility across ticks, persona isolation, budget stops.
mod ticks;
// Embedding failures at each stage, seeded provider faults, the cache file.
mod failures;
// The trace encoder writes the bytes its reader decodes.
mod trace;
// Memory consolidation at each commit: expiry hides memories, dry runs, promotion.
mod consolidation;
