//! The field-versus-message-passing experiment: research topics with gold
//! findings ([`topic`]), the scripted research agents' model ([`model`]),
//! the metrics of a final report ([`metrics`]) and the paired statistics
//! ([`stats`]), the verdict ([`verdict`]), the run summary ([`summary`])
//! and the live-run cassette ([`cassette`]). The agents themselves and the
//! missions are actors (the `agents` crate); this crate holds everything
//! that is pure. Neither it nor the persona path needs FAISS: the field
//! lives in the `field` crate, which among the libraries only `agents`
//! depends on (and `sim-cli` under its default feature `agents`).

pub mod analysis;
pub mod cassette;
pub mod judge;
pub mod metrics;
pub mod model;
pub mod record;
pub mod stats;
pub mod summary;
pub mod topic;
pub mod verdict;

pub use model::{Role, ScriptedAgentModel};
pub use topic::Topic;
