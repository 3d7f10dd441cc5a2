//! `sim-cli export outcomes`: the options, [`runs::export::write_outcomes`].

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Exports.
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// One row per job of a recorded run.
    Outcomes(OutcomesArgs),
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// JSON lines, as `outcomes.jsonl`.
    Jsonl,
    /// CSV with a header row and the persona's traits as columns.
    Csv,
}

/// Options of `sim-cli export outcomes`.
#[derive(Debug, Args)]
#[command(after_help = "JSON lines are byte for byte the run's outcomes.jsonl, unless --with-traits adds a\n\
    \"traits\" object to each line. CSV columns: tick, position, persona, the persona's traits (name,\n\
    age, age_band, city, occupation, income, interests joined by ';', price_sensitivity), stimulus,\n\
    exposure, status, failed_stage, reason, intent, sentiment, importance, ssr_expected, chat and\n\
    embedding costs (nano-USD), tokens, and the reaction text; quoted as RFC 4180 says. Examples:\n\n  \
    sim-cli export outcomes runs/demo --format csv --out outcomes.csv\n  \
    python -c \"import pandas; print(pandas.read_csv('outcomes.csv').groupby('age_band').intent.mean())\"")]
pub struct OutcomesArgs {
    /// The run directory (or its trace file).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// jsonl or csv.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// JSON lines: add each persona's traits.
    #[arg(long)]
    pub with_traits: bool,
    /// Only this tick.
    #[arg(long, value_name = "N")]
    pub tick: Option<u32>,
    /// Only this persona (index or label such as p-00007).
    #[arg(long, value_name = "ID")]
    pub persona: Option<String>,
    /// Write here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs an `export` subcommand. A reader that stops early (`| head`)
/// ends the export quietly.
pub fn export(cmd: ExportCommand) -> Result<()> {
    let ExportCommand::Outcomes(args) = cmd;
    match outcomes(&args) {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io =
            c.downcast_ref::<std::io::Error>().or_else(|| match c.downcast_ref::<csv::Error>().map(csv::Error::kind) {
                Some(csv::ErrorKind::Io(io)) => Some(io),
                _ => None,
            });
        io.is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn outcomes(args: &OutcomesArgs) -> Result<()> {
    let format = match args.format {
        Format::Jsonl => runs::export::Format::Jsonl,
        Format::Csv => runs::export::Format::Csv,
    };
    let filter = runs::export::Filter { tick: args.tick, persona: args.persona.clone(), with_traits: args.with_traits };
    let rows = match &args.out {
        Some(p) => {
            let file = std::fs::File::create(p).with_context(|| format!("--out {}: cannot create it", p.display()))?;
            runs::export::write_outcomes(&args.dir, format, &filter, file)?
        }
        None => runs::export::write_outcomes(&args.dir, format, &filter, std::io::stdout().lock())?,
    };
    if let Some(p) = &args.out {
        eprintln!("Wrote {rows} rows to {}", p.display());
    }
    Ok(())
}
