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
//! Not wired into runs yet: the persona memory stream, the trace and the
//! `sim-cli memory` commands are the next step (see the consolidation
//! issue).

pub mod ledger;
pub mod scenarios;

pub use ledger::{Change, ConsolidationConfig, Ledger, LedgerError, Scope, Tier, Version};
