//! `sim-cli replay`: re-run a recorded run with every model answer served
//! from its trace, and compare digests tick by tick.

use crate::prelude::progress;
use anyhow::Result;
use clap::Args;
use engine::digest::Digest;
use runs::Watch;
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
    // The ticks are in the trace.
    let (terminal, progress) = progress(0);
    let watch = Watch { threads: args.threads, progress, ..Watch::quiet() };
    let out = runs::replay(&args.trace, &watch);
    if let Some(t) = &terminal {
        t.finish();
    }
    let out = out?;
    if args.json {
        let v = ReplayReport {
            trace: out.trace.display().to_string(),
            ticks_recorded: out.ticks_recorded,
            ticks_matched: out.ticks_matched,
            complete: out.complete,
            divergence: out.divergence.as_ref().map(|d| Diverged { tick: d.tick, persona: d.persona, what: &d.what }),
            provider_calls: out.provider_calls,
            cassette_hits: out.cassette_hits,
            cassette_misses: out.cassette_misses,
            first_miss: out.first_miss.as_deref(),
            digest: out.recorded.map(|d| d.digest),
            full_digest: out.recorded.map(|d| d.full_digest),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let recorded = out.ticks_recorded;
        match &out.divergence {
            None => println!("Replayed {} of {recorded} recorded ticks: every digest matches.", out.ticks_matched),
            Some(d) => println!("Replay diverged after {} matching ticks: {d}", out.ticks_matched),
        }
        if !out.complete {
            println!(
                "The trace is of an unfinished run ({recorded} of {} ticks); `sim-cli run --resume` continues it.",
                out.ticks_planned
            );
        }
        println!(
            "Provider calls during replay: {}. Cassette: {} answers served, {} misses{}.",
            out.provider_calls,
            out.cassette_hits,
            out.cassette_misses,
            out.first_miss.as_ref().map(|m| format!(" (first: {m})")).unwrap_or_default()
        );
        if let Some(d) = out.recorded {
            println!("Recorded digest:      {}\nRecorded full digest: {}", d.digest, d.full_digest);
        }
    }
    Ok(out.matched()?)
}
