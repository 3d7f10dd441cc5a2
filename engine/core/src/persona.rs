//! Personas: who they are, what they remember, and how a turn reads them.
//!
//! - [`Traits`] is the trait table from `fixtures/personas/traits.toml`;
//!   [`generate`] draws a [`Profile`] from it for a seed and index.
//! - [`MemoryStream`] is a persona's private memory, ranked by
//!   [`MemoryStream::retrieve`] with the recency, importance and relevance
//!   score.
//! - [`prompt`] renders what the chat model sees; [`reply`] parses what
//!   comes back.
//! - [`PersonaState`] is everything a persona actor owns, with the commit
//!   that applies a tick's results.

pub mod memory;
pub mod profile;
pub mod prompt;
pub mod reply;
pub mod state;

pub use memory::{MemoryId, MemoryKind, MemoryRecord, MemoryStream, Scored};
pub use profile::{generate, Profile, Traits};
pub use state::{Belief, Energy, PersonaCommit, PersonaState};
