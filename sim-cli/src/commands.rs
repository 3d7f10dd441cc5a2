//! The user's commands, one module each: its clap arguments and its
//! handler. The work itself lives in the libraries (`engine`, `actors`,
//! `field`, `providers`); what several commands share is in
//! [`crate::prelude`]. No command uses another.

pub mod embed;
pub mod experiment;
pub mod export;
pub mod field;
pub mod inspect;
pub mod intent;
pub mod memory;
pub mod replay;
pub mod report;
pub mod run;
