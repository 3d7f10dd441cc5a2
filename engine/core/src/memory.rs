//! Three-tier memory consolidation: energy, tiers, promotion, expiry and
//! versioned records that are never destroyed.
//!
//! A [`Ledger`] holds every version of every record. Each record has one
//! current version (`valid_to` unset); promotion, expiry and resets close
//! it and open a new one, linked to the old. Decay and access change the
//! current version's energy in place, as the source plan does. Every
//! operation returns the [`Change`]s it made, and has a dry run that
//! returns the same changes and alters nothing.
//!
//! Each persona owns a ledger of its memories
//! ([`crate::persona::PersonaState::ledger`]); consolidation runs at each
//! tick commit. After a run, [`crate::maintenance::MemoryWorld`] replays the operations of
//! the `sim-cli memory` commands (test memories, manual consolidation) over
//! the state a trace reconstructs.

pub mod ledger;
pub mod record_id;
pub mod scenarios;
pub mod tier;

pub use ledger::{Change, ConsolidationConfig, Ledger, LedgerError, RecordId, Scope, Tier, Version};
pub use record_id::{MemoryId, MemoryIdText};
