//! `sim-cli merge`: the options, [`runs::merge`], the summary printed.

use crate::output::print_summary;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

/// Options of `sim-cli merge`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli merge runs/study/shard-* --out runs/study/merged\n  \
    sim-cli replay runs/study/merged              every shard re-run from the merged trace\n\n\
    Every shard must be of one run (configuration, scenario, seed, engine, panel size, ticks and\n\
    shard count), each index 0 to N-1 given once, and each finished; a budget-stopped shard\n\
    merges only with shards stopped at the same tick. The merged digest is the unsharded\n\
    run's; its costs are what the shards paid (see docs/GUIDE.md, \"Panels past one machine\").")]
pub struct MergeArgs {
    /// The shards' run directories (or trace files), in any order.
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub shards: Vec<PathBuf>,
    /// The merged run's directory: new, or empty.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the merged summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sim-cli merge`.
pub fn merge(args: MergeArgs) -> Result<()> {
    let (terminal, progress) = crate::prelude::progress(0);
    let merged = runs::merge(&args.shards, &args.out, progress.as_ref());
    if let Some(t) = &terminal {
        t.finish();
    }
    let merged = merged?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&merged.summary).context("cannot encode the summary")?);
    } else {
        println!(
            "Merged {} shards of {} personas into {}.",
            merged.shards,
            merged.personas,
            merged.dir.path().display()
        );
        print_summary(&merged.summary);
    }
    Ok(())
}
