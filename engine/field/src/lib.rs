#![warn(missing_docs)]
//! The shared memory field: patterns that agents inject and query, held in
//! a FAISS flat inner-product index (behind a `parking_lot::Mutex`; FAISS
//! writes are not thread-safe) with a pattern table beside it.
//!
//! - **inject** stores `strength x permeability`; the same content again
//!   reinforces the existing pattern instead of duplicating it.
//! - **query** ranks by the score
//!
//!   ```text
//!   base(p)     = S0 + min(0.02 x co_accesses, 1)
//!   plan(p, q)  = cos(q, p) x base(p) x e^(-lambda t) x min(1 + 0.05 x accesses, 2)
//!   extra(p)    = min(amplification, 0.2)
//!   score(p, q) = plan(p, q) x (1 + extra(p))
//!   ```
//!
//!   (`t` in simulated hours since the last access, `S0` the pattern's
//!   `strength x permeability`). Co-access adds to the strength, at most 1
//!   in all; resonance raises a score by at most 0.2 of the plan score;
//!   so a score stays below `cos x (S0 + 1) x 2 x 1.2`, and a pattern whose cosine is
//!   not positive scores at most 0, below every similar live pattern.
//!   Archived patterns (`S0 x e^(-lambda t)` below 0.05) are left out.
//!   The answer is the exact top-k under that score: the query over-fetches
//!   from FAISS until no unfetched pattern can enter, then re-scores the
//!   candidates in one fixed-order kernel, ties by id.
//! - **decay** is applied at score time; [`Field::decay`] reports what is
//!   archived at a time.
//! - **reinforce** counts accesses and resets the decay clock (decay runs
//!   from the last access with the pattern's own S0); patterns returned
//!   together each count a co-access (+0.02 strength, up to 1, apart from
//!   the resonance cap). A hit that resonates with another hit of its answer gets
//!   `amplification = 0.2 x resonance` of its strongest pair, where
//!   `resonance = cos^2 x s_A x s_B` over the plan strengths
//!   `s = S0 x e^(-lambda t) x boost`. Amplification is replaced at every
//!   answer, never summed, and resonance never includes it, so nothing grows
//!   from its own earlier amplification. Re-injecting a pattern's content
//!   resurrects it when it has faded.
//! - **monitoring**: the max/min ratio of the live patterns' *effective*
//!   strengths (`S0 x e^(-lambda t) x boost x (1 + extra)`) is taken after
//!   every phase and raises an alarm above [`FieldConfig::ratio_alarm`]
//!   (default 100); a strength, score or resonance that is not finite is an
//!   error naming the pattern ([`FieldError::NonFinite`]).
//! - **measure_stability** is `0.6 x attractor strength + 0.4 x organisation`
//!   ([`Stability`] defines both).
//!
//! [`port::SharedContextPort`] is what agents use; its adapters are the
//! field ([`port::FieldContexts`]) and message passing
//! ([`messages::MessagePassing`]). Agents act in phases
//! ([`port::SharedContextPort::phase`]): a phase applies its operations in
//! `(agent, seq)` order, injections first, then every query against the
//! same state, so the result does not depend on arrival order or thread
//! count. The field adapter counts and samples every phase
//! ([`telemetry`]) and can log it ([`log`]) for step-by-step replay
//! ([`replay`]).

mod config;
mod error;
pub mod field;
pub mod log;
pub mod messages;
pub mod pattern;
pub mod port;
pub mod replay;
mod storage;
pub mod telemetry;
pub mod threads;

pub use field::{Field, FieldConfig, FieldError, Hit, Injected, Stability};
pub use messages::{Merge, MessagePassing};
pub use pattern::Pattern;
pub use port::{
    ContextId, Entry, FieldContexts, FieldSession, Found, PortError, PortOp, PortReply, SharedContextPort, Submitted,
};
pub use telemetry::{Telemetry, TelemetryReport};
