//! `sim-cli report DIR`: the options, [`runs::report()`], what was written.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Options of `sim-cli report`.
#[derive(Debug, Args)]
#[command(after_help = "Writes report.html and report.json into the run directory (or beside --out). The page\n\
    opens from disk in any browser: overview, intent per stimulus and tick (with SSR beside it when the\n\
    run measured it), segments, typical and unusual reactions, probes, costs, memory and failures.\n\
    Works on any recorded run, finished, stopped or unfinished, with no model call. Example:\n\n  \
    sim-cli report runs/default-s42-50x3 --by age,income,interests")]
pub struct ReportArgs {
    /// The run directory (or its trace file).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Where to write the page (report.json goes beside it). Default: DIR/report.html.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Traits to cross intent with: age, income, city, occupation, interests.
    #[arg(long, value_delimiter = ',', default_value = "age,income", value_name = "TRAIT,...")]
    pub by: Vec<String>,
    /// Print report.json on stdout as well.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sim-cli report`.
pub fn report(args: &ReportArgs) -> Result<()> {
    let (terminal, progress) = crate::prelude::progress(0);
    let written = runs::report(&args.dir, args.out.as_deref(), &args.by, progress.as_ref());
    if let Some(t) = &terminal {
        t.finish();
    }
    let written = written?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&written.analysis)?);
    } else {
        println!("Wrote {} and {}", written.html.display(), written.json.display());
        println!("Open the page in any browser; it needs no network.");
    }
    Ok(())
}
