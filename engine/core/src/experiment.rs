//! The field-versus-message-passing experiment: research topics with gold
//! findings ([`topic`]), the scripted research agents' model ([`model`]),
//! the metrics of a final report ([`metrics`]) and the paired statistics
//! ([`stats`]). The agents themselves and the missions are actors (see the
//! `actors` crate); this module holds everything that is pure.

pub mod cassette;
pub mod judge;
pub mod metrics;
pub mod model;
pub mod stats;
pub mod summary;
pub mod topic;
pub mod verdict;

pub use model::{Role, ScriptedAgentModel};
pub use topic::Topic;
