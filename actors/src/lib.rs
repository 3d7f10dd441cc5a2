#![warn(missing_docs)]
//! ractor actors that own state and sequence the stages of a tick.
//!
//! - Personas are virtual actors: each one's
//!   [`engine::persona::PersonaState`] rests in the coordinator's store and
//!   is activated, a window at a time, on a [`persona::PersonaHost`], which
//!   answers stage messages ([`persona::PersonaMsg`]) for a batch of
//!   personas and hands their states back.
//! - [`coordinator::TurnCoordinator`] dispatches each tick's stages
//!   (`engine::tick::run_tick` decides them): it activates personas on the
//!   hosts, runs the embedding stages on the port and the chat stage on
//!   [`chat_pool`] (a bounded pool of tasks), and returns a
//!   [`coordinator::TickReport`] with outcomes in job order.
//! - [`supervisor::PanelSupervisor`] is the parent of the persona hosts; a
//!   persona that panics fails its own jobs, not the run.
//! - [`run::run`] spawns them all, drives the ticks, stops at the budget and
//!   tears down.
//!
//! The agents' field and experiment are another crate (`agents`), so this
//! one does not compile FAISS.
//!
//! ```
//! use actors::{progress::Silent, run::{run, RunSpec}};
//! use std::sync::Arc;
//!
//! let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
//! let result = rt.block_on(run(RunSpec::defaults(7, 4, 2), Arc::new(Silent), false, |_| Ok(()))).unwrap();
//! assert_eq!(result.summary.jobs.total, 8);
//! ```

pub mod chat_pool;
pub mod coordinator;
pub mod error;
pub mod persona;
pub mod progress;
pub mod replay;
pub mod run;
pub mod shared;
pub mod sink;
pub mod supervisor;

pub use error::{Error, Result};
