//! Traces: the append-only record of a run, and the cassette that replays it.
//!
//! A trace file is a [`crate::store::frame`] container (magic `SIMTRACE`, format
//! version [`record::FORMAT_VERSION`]) whose payloads are
//! [`record::Record`]s encoded by [`crate::store::codec`]. The first
//! frame is the [`record::Header`] (everything needed to re-run: resolved
//! config, scenario and trait sources, seed, sizes), then one
//! [`record::TickFrame`] per committed tick, and a [`record::RunEnd`] when
//! the run finished. A tick is committed once its frame is written and
//! synced. A shard's trace and a merged one (format 7) also say how the
//! panel is split ([`record::Split`]).
//!
//! [`cassette`] serves model answers back from a trace keyed by request
//! digest, so replay and resume make no model calls.

pub mod audit;
pub mod cassette;
pub mod file;
pub mod record;
pub mod spill;
pub mod wal;

pub use cassette::{CassetteChat, CassetteEmbedder, EmbedRecorder};
pub use file::{read_trace, read_trace_file, ReadTrace, Torn, TraceWriter, TRACE_FORMAT};
pub use record::{EmbedExchange, Header, MemoryEvent, Record, RunEnd, Split, TickFrame};
