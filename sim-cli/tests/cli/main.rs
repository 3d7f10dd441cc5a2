//! Tests of the `sim-cli` binary: what a user types and sees.

mod support;

// `sim-cli run`: the JSON summary contract, the readable summary, run directories.
mod run;
// Bad input: each case names the input and the cause and exits non-zero.
mod bad_input;
// Traces: replay, divergence, inspect, damage, parts, resume, no secrets.
mod trace;
// `[chat] mode = "batch"` against a loopback Batch API server: price, digest, failures, resume.
mod batch;
// `sim-cli soak` (the short campaign CI runs: determinism, kills, faults, full disk,
// mutated inputs) and `sim-cli check-determinism`.
mod soak;
// A panel in shards (`run --shard`, `merge`): the unsharded digest, refusals, the k8s and Slurm examples, `bench scale --shards`.
mod shards;
// Memory commands on a recorded run.
mod memory;
// `sim-cli field`: simulate, replay, stats, bench.
#[cfg(feature = "agents")]
mod field;
// `sim-cli experiment`: determinism, outputs, blind export, persona write-up, bad input.
#[cfg(feature = "agents")]
mod experiment;
// The build without the `agents` feature (`cargo test -p sim-cli --no-default-features`).
#[cfg(not(feature = "agents"))]
mod slim;
// The local MiniLM model: a run, replay, strategies, threads, `embed check`.
mod minilm;
// `sim-cli report`: aggregates, the page in headless Chromium, bad input.
mod report;
// `sim-cli validate`: the ANES suite's digest and figures, the page, one's own survey, bad input.
mod validate;
// The user guide's command list (docs/GUIDE.md) against `--help`, and its minimal scenario.
#[cfg(feature = "agents")]
mod readme;
// A real language model offline: SmolLM2-135M on every shipped local-model config, replay without it, thread counts.
// Run once, in the full build: the slim build's `run` is the same code, and the model takes minutes.
#[cfg(feature = "agents")]
mod gguf;
