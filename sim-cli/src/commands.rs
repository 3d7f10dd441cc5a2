//! The user's commands, one module each: its clap arguments and its
//! handler. The work itself lives in the libraries (`engine`, `actors`,
//! `providers`, and for `field` and `experiment`, which the default feature
//! `agents` brings, `agents`, `field` and `experiment`); what several commands share is in
//! [`crate::prelude`]. No command uses another.

pub mod embed;
#[cfg(feature = "agents")]
pub mod experiment;
pub mod export;
#[cfg(feature = "agents")]
pub mod field;
pub mod inspect;
pub mod intent;
pub mod memory;
pub mod merge;
pub mod replay;
pub mod report;
pub mod run;
pub mod validate;
