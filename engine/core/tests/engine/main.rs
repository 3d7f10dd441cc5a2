//! Integration tests of the engine: the turn stages of one persona, run
//! without a runtime against fixed chat replies, and the trace file.

// A test names the variant it expects and reports any other.
#![allow(clippy::wildcard_enum_match_arm)]

// The chat stage: guardrail retries, reflections and their fallback, probes.
mod converse;
// Whole ticks through the pure stage sequence, without a runtime or actors.
mod tick;
// The trace file: round trip, damage, truncation, limits, versions.
mod trace;
// Source checks no lint makes: no public function returns a String error, and
// no new import cycle between modules or sibling files, in every crate of the
// workspace.
mod layout;
// docs/ARCHITECTURE.md names only files, types, functions and modules that exist.
mod docs;
// Property-based fuzzing on stable: the trace decoder, the frame reader, the
// scenario and config parsers.
mod fuzz;
