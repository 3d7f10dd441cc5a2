//! `sim-cli replay`: re-run a recorded run with every model answer served
//! from its trace, and compare digests tick by tick.

use crate::prelude::{progress, runtime, trace_path};
use actors::replay::rerun;
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::digest::Digest;
use engine::store::trace::file::read_trace_file;
use serde::Serialize;
use std::path::PathBuf;

/// Options of `sim-cli replay`.
#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 when every recorded tick replays to the same digests, 1 otherwise.\n\
    Replay never calls a model: an answer the trace does not hold is a cassette miss, reported as such.")]
pub struct ReplayArgs {
    /// Run directory (holding trace.bin) or a trace file.
    #[arg(value_name = "DIR|TRACE")]
    pub trace: PathBuf,
    /// Tokio worker threads. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The `--json` report of `sim-cli replay`.
#[derive(Debug, Serialize)]
struct ReplayReport<'a> {
    trace: String,
    ticks_recorded: u32,
    ticks_matched: u32,
    complete: bool,
    divergence: Option<Diverged<'a>>,
    provider_calls: u64,
    cassette_hits: u64,
    cassette_misses: u64,
    first_miss: Option<&'a str>,
    digest: Option<Digest>,
    full_digest: Option<Digest>,
}

/// The first divergence of a replay.
#[derive(Debug, Serialize)]
struct Diverged<'a> {
    tick: u32,
    persona: Option<u32>,
    what: &'a str,
}

/// Runs `sim-cli replay`.
pub fn replay(args: ReplayArgs) -> Result<()> {
    let path = trace_path(&args.trace)?;
    let read = read_trace_file(&path, false).with_context(|| format!("cannot replay {}", path.display()))?;
    let runtime = runtime(args.threads)?;
    let (terminal, progress) = progress(read.header.ticks);
    let out = runtime.block_on(rerun(&read, false, progress, |_, _| Ok(())));
    if let Some(t) = &terminal {
        t.finish();
    }
    let out = out?;
    let recorded = read.ticks.len() as u32;
    let complete = read.end.is_some();
    let last = read.ticks.last().map(|t| t.digests);
    if args.json {
        let v = ReplayReport {
            trace: path.display().to_string(),
            ticks_recorded: recorded,
            ticks_matched: out.ticks_matched,
            complete,
            divergence: out.divergence.as_ref().map(|d| Diverged { tick: d.tick, persona: d.persona, what: &d.what }),
            provider_calls: out.cassette.provider_calls,
            cassette_hits: out.cassette.hits,
            cassette_misses: out.cassette.misses,
            first_miss: out.first_miss.as_deref(),
            digest: last.map(|d| d.digest),
            full_digest: last.map(|d| d.full_digest),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match &out.divergence {
            None => println!("Replayed {} of {recorded} recorded ticks: every digest matches.", out.ticks_matched),
            Some(d) => println!("Replay diverged after {} matching ticks: {d}", out.ticks_matched),
        }
        if !complete {
            println!(
                "The trace is of an unfinished run ({recorded} of {} ticks); `sim-cli run --resume` continues it.",
                read.header.ticks
            );
        }
        println!(
            "Provider calls during replay: {}. Cassette: {} answers served, {} misses{}.",
            out.cassette.provider_calls,
            out.cassette.hits,
            out.cassette.misses,
            out.first_miss.as_ref().map(|m| format!(" (first: {m})")).unwrap_or_default()
        );
        if let Some(d) = last {
            println!("Recorded digest:      {}\nRecorded full digest: {}", d.digest, d.full_digest);
        }
    }
    if let Some(d) = out.divergence {
        bail!("replay of {} diverged at {d}", path.display());
    }
    Ok(())
}
