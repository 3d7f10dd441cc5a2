//! Tests of the `sim-cli` binary: what a user types and sees.
//!
//! The slim build (`cargo test -p sim-cli --no-default-features`) differs
//! from the full one only in its command list and in the agents' errors:
//! it runs `slim`, `bad_input` and `run`, which test those and its panels.
//! Every other module runs once, in the full build: the slim build runs the
//! same code for them.

mod support;

// `sim-cli run`: the JSON summary contract, the readable summary, run directories.
mod run;
// Bad input: each case names the input and the cause and exits non-zero.
mod bad_input;
// Traces: replay, divergence, inspect, damage, parts, resume, no secrets.
#[cfg(feature = "agents")]
mod trace;
// The pre-flight estimate and its pilot against a live run's bill (scripts/prefix-cache-server).
#[cfg(feature = "agents")]
mod estimate;
// `[chat] mode = "batch"` against a loopback Batch API server: price, digest, failures, resume.
#[cfg(feature = "agents")]
mod batch_api;
// `sim-cli soak` (the short campaign CI runs: determinism, kills, faults, full disk,
// mutated inputs) and `sim-cli check-determinism`.
#[cfg(feature = "agents")]
mod soak;
// A panel in shards (`run --shard`, `merge`): the unsharded digest, refusals, the k8s and Slurm examples, `bench scale --shards`.
#[cfg(feature = "agents")]
mod shards;
// Memory commands on a recorded run.
#[cfg(feature = "agents")]
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
#[cfg(feature = "agents")]
mod minilm;
// `sim-cli report`: aggregates, the page in headless Chromium, bad input.
#[cfg(feature = "agents")]
mod report;
// `sim-cli validate`: the ANES suite's digest and figures, the page, one's own survey, bad input.
#[cfg(feature = "agents")]
mod validate;
// `validate --given` (known answers, the imputer) and `--weights` (weighted figures against numpy's).
#[cfg(feature = "agents")]
mod validate_design;
// The user guide's command list (docs/GUIDE.md) against `--help`, and its minimal scenario.
#[cfg(feature = "agents")]
mod readme;
// A real language model offline: SmolLM2-135M on every shipped local-model config, replay without it, thread counts.
// Run once, in the full build: the slim build's `run` is the same code, and the model takes minutes.
#[cfg(feature = "agents")]
mod gguf;
