//! The native half of the Python package `simengine` (imported as
//! `simengine._native`; the Python half is `python/simengine/`).
//!
//! It converts types and owns the waiting; the work is the `runs` crate's
//! (the run as a library, the same code `sim-cli` calls):
//!
//! - `binding.rs` holds the module's functions: `run`, `summary_json`,
//!   `outcome_columns`, `replay_json`, `report`, `merge`;
//! - `wait.rs` runs an operation on its own thread with the GIL released,
//!   polls for signals and hands progress to Python on the calling
//!   thread, so that worker threads never call into Python;
//! - `errors.rs` turns the library's typed errors into the package's
//!   exceptions (`simengine.errors`).
//!
//! - `agents.rs` (the `agents` feature, which brings FAISS) runs the
//!   agents' workload: `field_simulate`.
//!
//! The module exists only with the `python` feature, which maturin turns
//! on (`pyproject.toml`). Without it this crate is empty, so that
//! `cargo build/test --workspace` never needs a Python to link against.

#[cfg(feature = "agents")]
mod agents;
#[cfg(feature = "python")]
mod binding;
#[cfg(feature = "python")]
mod errors;
#[cfg(feature = "python")]
mod wait;
