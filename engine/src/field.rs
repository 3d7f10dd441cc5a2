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
//! - **reinforce** counts accesses and, for patterns returned together,
//!   adds the co-access bonus.
//! - **measure_stability** is `0.6 x attractor strength + 0.4 x organisation`
//!   ([`Stability`] defines both).
//!
//! [`port::SharedContextPort`] is what agents use; its adapters are the
//! field ([`port::FieldContexts`]) and message passing
//! ([`port::MessagePassing`]). Not yet wired to agents: the field actor,
//! trace events, telemetry and the `field bench` command are the rest of
//! the field issue.

pub mod pattern;
pub mod port;

pub use pattern::{Field, FieldConfig, FieldError, Hit, Injected, Pattern, Stability};
pub use port::{ContextId, Entry, FieldContexts, Found, Merge, MessagePassing, PortError, SharedContextPort};
