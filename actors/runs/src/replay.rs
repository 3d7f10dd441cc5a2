//! Replaying a recorded run: every model answer served from its trace,
//! digests compared tick by tick, no model called.

use crate::dir::RunDir;
use crate::error::{Error, Result};
use crate::start::runtime;
use crate::watch::Watch;
use actors::replay::{rerun, Divergence};
use engine::store::trace::file::read_trace_file;
use engine::turn::TickDigests;
use std::path::{Path, PathBuf};

/// What a replay found.
#[derive(Debug)]
pub struct Replayed {
    /// The trace replayed.
    pub trace: PathBuf,
    /// Ticks the trace holds.
    pub ticks_recorded: u32,
    /// Ticks the run was asked for.
    pub ticks_planned: u32,
    /// Ticks that replayed to the recorded digests.
    pub ticks_matched: u32,
    /// Whether the trace is of a finished run.
    pub complete: bool,
    /// The first difference, if any: its tick, persona, job and field.
    pub divergence: Option<Divergence>,
    /// Model calls during the replay (zero unless something is wrong).
    pub provider_calls: u64,
    /// Answers served from the trace.
    pub cassette_hits: u64,
    /// Requests the trace held no answer for.
    pub cassette_misses: u64,
    /// The first of them.
    pub first_miss: Option<String>,
    /// The last recorded tick's digests.
    pub recorded: Option<TickDigests>,
}

impl Replayed {
    /// Ok when every recorded tick replayed to its digests; the divergence
    /// as an error otherwise.
    pub fn matched(&self) -> Result<()> {
        match &self.divergence {
            None => Ok(()),
            Some(d) => Err(Error::Diverged(format!("replay of {} diverged at {d}", self.trace.display()))),
        }
    }
}

/// Replays the run in `path` (a run directory or a trace file).
pub fn replay(path: &Path, watch: &Watch<'_>) -> Result<Replayed> {
    let (_, trace) = RunDir::open(path)?;
    let read =
        read_trace_file(&trace, false).map_err(|e| Error::context(format!("cannot replay {}", trace.display()), e))?;
    let runtime = runtime(watch.threads)?;
    let out = runtime.block_on(rerun(&read, false, watch.progress.clone(), |_, _| Ok(())))?;
    Ok(Replayed {
        trace,
        ticks_recorded: read.ticks.len() as u32,
        ticks_planned: read.header.ticks,
        ticks_matched: out.ticks_matched,
        complete: read.end.is_some(),
        divergence: out.divergence,
        provider_calls: out.cassette.provider_calls,
        cassette_hits: out.cassette.hits,
        cassette_misses: out.cassette.misses,
        first_miss: out.first_miss,
        recorded: read.ticks.last().map(|t| t.digests),
    })
}
