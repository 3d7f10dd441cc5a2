#![warn(missing_docs)]
//! The deterministic domain of the simulation engine. No actors, no CLI, no
//! wall clock in state.
//!
//! A run is a panel of personas ([`persona::Profile`], generated from
//! [`persona::Traits`] and a seed) meeting the stimuli of a
//! [`scenario::Scenario`] tick by tick. Each tick expands into jobs
//! ([`scenario::Job`]); the stage functions in [`turn`] take a job from its
//! retrieval need to the memories it leaves, and [`tick::run_tick`]
//! sequences them over a whole tick; both reach the two ports:
//! [`embed::EmbeddingPort`] (batched and deduplicated by [`embed::Plan`])
//! and [`chat::ChatPort`]. Costs are integer nano-USD ([`cost`]), split
//! exactly. Every outcome and state change feeds the chained digests of
//! [`turn::TickDigests`], and [`summary::RunSummary`] accumulates what a user
//! reads at the end.
//!
//! The core is pure: no runtime, no network client, no native index. The
//! adapters behind its ports live in their own crates: `providers` (the
//! inference client and the embedding providers) and `field` (the FAISS
//! pattern field shared by agents). Persistence is one tree, [`store`]:
//! every binary file is one [`store::frame`] container, [`store::codec`]
//! is the only caller of the serialiser, and [`store::trace`] is the run's
//! record. Post-run memory operations are [`maintenance`].
//! The agents' field-versus-messages experiment is not here: its pure side
//! is the `experiment` crate, its actors the `agents` crate.
//!
//! ```
//! use engine::{config::Config, persona::{generate, PersonaState, Traits}, scenario::Scenario};
//! use engine::{clock::Clock, turn::{prepare, retrieval_need, TickContext}};
//!
//! let cfg = Config::defaults();
//! let scenario = Scenario::builtin("default").unwrap();
//! let state = PersonaState::new(generate(&Traits::builtin(), 42, 0));
//! let jobs = scenario.jobs(42, 1, 1, |_| &[]);
//! let ctx = TickContext { cfg: &cfg, scenario: &scenario, tick: 1, now: Clock::with_hours_per_tick(24).at(1) };
//! // A persona with no memories needs no retrieval embedding.
//! assert_eq!(retrieval_need(&state, &jobs[0], &ctx), None);
//! let prepared = prepare(&state, &jobs[0], None, &ctx).unwrap();
//! assert!(prepared.reaction.prompt.contains("REACTION:"));
//! ```

pub mod analysis;
pub mod chat;
pub mod clock;
pub mod config;
pub mod cost;
pub mod digest;
pub mod embed;
pub mod error;
pub mod estimate;
pub mod intent;
pub mod maintenance;
pub mod memory;
pub mod persona;
pub mod rng;
pub mod scan;
pub mod scenario;
pub mod shard;
pub mod store;
pub mod summary;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tick;
pub mod turn;

pub use error::{Error, Result};

/// A boxed, sendable future: what the ports return, so that they can be
/// used as trait objects.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
