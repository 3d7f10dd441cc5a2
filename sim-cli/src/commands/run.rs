//! `sim-cli run`: the options, [`runs::start`] or [`runs::resume`], the
//! summary printed.

use crate::output::print_summary;
use crate::preflight::Estimate;
use crate::prelude::{answer_mode, progress};
use actors::run::MAX_PANEL;
use actors::run::MAX_TICKS;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use engine::config::{AnswerMode, Config};
use runs::{Interrupt, Start, Watch};
use std::path::PathBuf;

/// Whether a run writes `outcomes.jsonl` beside its trace (`--outcomes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomesFile {
    /// Only for small panels: at most 10,000 persona-turns (personas x ticks).
    Auto,
    /// Always.
    Always,
    /// Never (`sim-cli export outcomes DIR` writes it from the trace later).
    Never,
}

/// Options of `sim-cli run`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli run                                   50 personas, 3 ticks, default scenario\n  \
    sim-cli run --personas 1000 --ticks 5 --json  machine-readable summary on stdout\n  \
    sim-cli run --scenario launch-day             a built-in scenario (see `sim-cli scenarios`)\n  \
    sim-cli run --scenario my.toml --config c.toml --out runs/study-1\n  \
    sim-cli run --config live.toml                a live chat model (docs/GUIDE.md, live models)\n  \
    sim-cli run --resume runs/study-1             continue a killed or interrupted run\n  \
    sim-cli run --personas 100000 --shard auto/16 one shard of 16 (index from JOB_COMPLETION_INDEX or\n  \
                                                  SLURM_ARRAY_TASK_ID); `sim-cli merge` joins them\n\n\
    The same --seed gives the same digests at any --threads. Ctrl-C stops at the next tick\n\
    boundary (a second Ctrl-C at once); the run stays resumable with --resume.")]
pub struct RunArgs {
    /// Personas in the panel (1 to 1,000,000; up to 100,000,000 in shards of at most 1,000,000).
    /// Default 50; with --panel, every row (or a seeded subsample of this many rows).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PANEL)))]
    pub personas: Option<u32>,
    /// Personas given by data: one per row of this CSV file, stated in the row's own traits (see
    /// docs/GUIDE.md, "Panels from data"). Needs --panel-map.
    #[arg(long, value_name = "FILE", requires = "panel_map")]
    pub panel: Option<PathBuf>,
    /// Which column of --panel is the row id and which columns are which traits (TOML).
    #[arg(long, value_name = "FILE", requires = "panel")]
    pub panel_map: Option<PathBuf>,
    /// Ticks to simulate (1 to 100,000). A scenario with fewer ticks cycles.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_TICKS)))]
    pub ticks: u32,
    /// Seed of every random draw: panel, exposures, model sampling.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Scenario: a built-in name (default, launch-day, repeat-exposure) or a TOML file.
    #[arg(long, default_value = "default", value_name = "FILE|NAME")]
    pub scenario: String,
    /// Configuration TOML (models, retrieval weights, prices...). Unset fields keep their defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How purchase intent and the scenario's probes are answered: "sample" (the digit each reply gives),
    /// "probabilities" (the model's probability of each option where its reply puts the answer) or
    /// "verbalized" (after reacting, each persona gives the shares of people like it at each point; a probe is
    /// asked for shares). The distributions are recorded in the trace; the persona follows their rounded mean,
    /// and a probe generates no reason. Overrides the config's `[answers] mode`.
    #[arg(long, value_name = "MODE", value_parser = answer_mode())]
    pub answer_mode: Option<AnswerMode>,
    /// Neither serve answers from the response cache nor keep them there, for this command. By default a
    /// live model's (OpenAI-compatible or GGUF) replies and weighings are kept under `sim-engine/responses`
    /// in the user's cache directory (`[cache] dir` elsewhere), keyed by the request, the seed, every setting
    /// that changes a reply and the provider's identity; a later run or validation asking the same gets them
    /// with no call, and the same digests. The summary gives the calls made, the answers served and the bill.
    #[arg(long)]
    pub no_cache: bool,
    /// Before a live or local model's run, converse the first N jobs of tick 1 (billed, and reused by the
    /// run: nothing is paid twice) to measure its prompt and reply lengths; the estimate printed before the
    /// run, and kept in the summary as `estimate`, is a range built on them, with its assumptions. 0 prices
    /// every reply at max_output_tokens.
    #[arg(long, value_name = "N", default_value_t = runs::preflight::DEFAULT_PILOT)]
    pub pilot: u32,
    /// A calibration.json of `validate --calibrate` to apply to the scenario's probes that ask one of its
    /// questions (the same text and options): each persona's distribution is tempered and blended with the
    /// people's marginal as fitted. Needs the configuration and answer mode the validation used.
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Tokio worker threads. Default: one per core. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Run directory. Default: a new directory under runs/. An existing non-empty directory is never overwritten.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stop at the first tick boundary where recorded spend reaches this many USD.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub budget_usd: Option<f64>,
    /// Write outcomes.jsonl (one line per job) beside the trace: auto does for at most 10,000
    /// persona-turns. The trace holds every outcome either way; `sim-cli export outcomes DIR` writes
    /// the same file from it.
    #[arg(long, value_enum, default_value_t = OutcomesFile::Auto, value_name = "WHEN")]
    pub outcomes: OutcomesFile,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A live run whose estimate's high end is above this many USD asks for confirmation first (or
    /// needs --yes when piped).
    #[arg(long, value_name = "USD", default_value_t = 1.0)]
    pub confirm_above_usd: f64,
    /// Run a live panel above --confirm-above-usd without asking.
    #[arg(long)]
    pub yes: bool,
    /// Continue the killed, interrupted or stopped run in DIR from its last committed tick (its trace
    /// holds every other setting). A finished run is left unchanged.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["personas", "ticks", "seed", "scenario", "config", "out", "budget_usd", "answer_mode", "no_cache", "pilot", "calibration", "outcomes", "panel", "shard"])]
    pub resume: Option<PathBuf>,
    /// Run shard I of N: a contiguous 1/N of the panel's personas, each with the same outcomes as in
    /// the whole run. `auto/N` takes I from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs), then
    /// SLURM_ARRAY_TASK_ID (Slurm arrays). The shard gets 1/N of --budget-usd and of the configured
    /// rate limits. Default --out: runs/NAME/shard-000I-of-000N. The same command on an unfinished
    /// shard directory resumes it; on a finished one it does nothing. `sim-cli merge` joins the shards.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    #[command(flatten)]
    pub hooks: TraceHooks,
}

/// Hidden switches `sim-cli soak` drives its children with. Operational:
/// they change how the trace is written, never what it holds.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct TraceHooks {
    /// Write every tick in trace parts of at most this many bytes (so that a
    /// kill can land between the frames of one tick of a small panel).
    #[arg(long, hide = true, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..=16 << 20))]
    pub trace_part_bytes: Option<u64>,
    /// Simulate a disk that fills up once the trace is this many bytes long.
    #[arg(long, hide = true, value_name = "BYTES")]
    pub trace_disk_full_at: Option<u64>,
}

impl From<TraceHooks> for runs::TraceHooks {
    fn from(h: TraceHooks) -> Self {
        runs::TraceHooks { part_bytes: h.trace_part_bytes, disk_full_at: h.trace_disk_full_at }
    }
}

/// Runs `sim-cli run`.
pub fn run(args: RunArgs) -> Result<()> {
    if !(args.confirm_above_usd.is_finite() && args.confirm_above_usd >= 0.0) {
        bail!("--confirm-above-usd {}: must be a non-negative number of USD", args.confirm_above_usd);
    }
    // A resumed run's ticks are in its trace.
    let (terminal, progress) = progress(if args.resume.is_some() { 0 } else { args.ticks });
    let confirm = |cfg: &Config, estimate: &dyn Fn() -> runs::Result<Estimate>| {
        crate::preflight::confirm(cfg, estimate, args.confirm_above_usd, args.yes)
    };
    let watch = Watch { threads: args.threads, progress, interrupt: Interrupt::CtrlC, confirm: &confirm };
    let finished = match &args.resume {
        Some(dir) => runs::resume(dir, args.hooks.into(), &watch),
        None => start(&args, &watch),
    };
    if let Some(t) = &terminal {
        t.finish();
    }
    let finished = finished?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&finished.summary).context("cannot encode the summary")?);
    } else {
        print_summary(&finished.summary);
    }
    Ok(finished.completed()?)
}

/// A new run (or a shard's retry) from the options.
fn start(args: &RunArgs, watch: &Watch<'_>) -> runs::Result<runs::Finished> {
    let panel = match (&args.panel, &args.panel_map) {
        (Some(panel), Some(map)) => Some(runs::PanelData::read(panel, map)?),
        _ => None,
    };
    let mut config = runs::load_config(args.config.as_deref())?;
    if let Some(mode) = args.answer_mode {
        config.raw.answers.mode = mode;
    }
    if args.no_cache {
        config.raw.cache.enabled = false;
    }
    let start = Start {
        config,
        scenario: args.scenario.clone(),
        personas: args.personas,
        panel,
        ticks: args.ticks,
        seed: args.seed,
        out: args.out.clone(),
        budget_usd: args.budget_usd,
        outcomes: match args.outcomes {
            OutcomesFile::Auto => runs::OutcomesFile::Auto,
            OutcomesFile::Always => runs::OutcomesFile::Always,
            OutcomesFile::Never => runs::OutcomesFile::Never,
        },
        shard: args.shard.clone(),
        hooks: args.hooks.into(),
        calibration: args.calibration.clone(),
        pilot: args.pilot,
    };
    runs::start(start, watch)
}
