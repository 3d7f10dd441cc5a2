#![warn(missing_docs)]
//! The shared memory field: patterns that agents inject and query, held in
//! a FAISS flat inner-product index (behind a `parking_lot::Mutex`; FAISS
//! writes are not thread-safe) with a pattern table beside it.
//!
//! - **inject** stores `strength x permeability`; the same content again
//!   reinforces the existing pattern instead of duplicating it.
//! - **query** scores `cosine x S0 x e^(-lambda t) x min(1 + 0.05 x accesses, 2)`
//!   plus the co-access bonus, leaves out archived patterns (decayed
//!   strength below 0.05), and returns the exact top-k under that score: it
//!   over-fetches from FAISS until no unfetched pattern can enter, then
//!   re-scores the candidates in one fixed-order kernel, ties by id.
//! - **decay** is applied at score time; [`Field::decay`] reports what is
//!   archived at a time.
//! - **reinforce** counts accesses and resets the decay clock (decay runs
//!   from the last access with the pattern's own S0); patterns returned
//!   together gain the co-access bonus, and patterns that resonate in one
//!   answer are amplified by `0.2 x resonance`. Re-injecting a pattern's
//!   content resurrects it when it has faded.
//! - **measure_stability** is `0.6 x attractor strength + 0.4 x organisation`
//!   ([`Stability`] defines both).
//!
//! [`port::SharedContextPort`] is what agents use; its adapters are the
//! field ([`port::FieldContexts`]) and message passing
//! ([`port::MessagePassing`]). Agents act in phases
//! ([`port::SharedContextPort::phase`]): a phase applies its operations in
//! `(agent, seq)` order, injections first, then every query against the
//! same state, so the result does not depend on arrival order or thread
//! count. The field adapter counts and samples every phase
//! ([`telemetry`]) and can log it for step-by-step replay ([`log`]).

mod config;
mod error;
pub mod log;
pub mod pattern;
pub mod port;
mod storage;
pub mod telemetry;
pub mod threads;

pub use pattern::{Field, FieldConfig, FieldError, Hit, Injected, Pattern, Stability};
pub use port::{
    ContextId, Entry, FieldContexts, FieldSession, Found, Merge, MessagePassing, PortError, PortOp, PortReply,
    SharedContextPort, Submitted,
};
pub use telemetry::{Telemetry, TelemetryReport};
