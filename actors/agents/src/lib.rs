#![warn(missing_docs)]
//! The agents' workload: the shared memory field driven by actors, and the
//! field-versus-message-passing experiment.
//!
//! - The field actor, behind [`field::FieldHandle`], owns the shared memory
//!   field (the `field` crate's FAISS index) and applies agents' operations
//!   in deterministic phases; [`field_sim`] drives it with a seeded
//!   synthetic mission (`sim-cli field simulate`).
//! - [`experiment::AgentActor`]s (researcher, analyst, writer) run missions
//!   through the chat port and a shared context (the field actor or message
//!   passing); [`experiment::run_experiment`] pairs the conditions
//!   (`sim-cli experiment`). Everything pure about the experiment is the
//!   `experiment` crate.
//!
//! This is the only crate of the workspace's simulation side that compiles
//! FAISS: the persona panel (`actors`) does not depend on it.

pub mod error;
pub mod experiment;
pub mod field;
pub mod field_sim;

pub use error::{Error, Result};
