//! `sim-cli run`.

use crate::output::{print_summary, OutputDir};
use crate::progress::TerminalProgress;
use actors::progress::{Progress, Silent};
use actors::run::{RunSpec, MAX_PERSONAS, MAX_TICKS};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use engine::config::{Config, RawConfig};
use engine::cost::NANO_PER_USD;
use engine::embed::Strategy;
use engine::persona::Traits;
use engine::scenario::{Scenario, BUILTIN};
use std::path::PathBuf;
use std::sync::Arc;

/// How embedding stages submit their texts.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EmbedStrategy {
    /// One port call per stage with exact-text-deduplicated texts.
    Batched,
    /// One port call per text, no dedup, awaited in turn (the baseline).
    PerPersona,
}

/// Options of `sim-cli run`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli run                                   50 personas, 3 ticks, default scenario\n  \
    sim-cli run --personas 1000 --ticks 5 --json  machine-readable summary on stdout\n  \
    sim-cli run --scenario launch-day             a built-in scenario (see `sim-cli scenarios`)\n  \
    sim-cli run --scenario my.toml --config c.toml --out runs/study-1\n\n\
    The same --seed gives the same digests at any --threads.")]
pub struct RunArgs {
    /// Personas in the panel (1 to 1,000,000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PERSONAS)))]
    pub personas: u32,
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
    /// Tokio worker threads. Default: one per core. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Run directory. Default: a new directory under runs/. An existing non-empty directory is never overwritten.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stop at the first tick boundary where recorded spend reaches this many USD.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub budget_usd: Option<f64>,
    /// How embedding work is submitted: batched (default) or per-persona (the baseline for comparison).
    #[arg(long, value_enum, default_value_t = EmbedStrategy::Batched)]
    pub embed_strategy: EmbedStrategy,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn load_scenario(arg: &str) -> Result<Scenario> {
    let path = PathBuf::from(arg);
    if !path.exists() {
        if let Some(s) = Scenario::builtin(arg) {
            return Ok(s);
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!("scenario {arg:?}: no such file, and not a built-in scenario (built-ins: {})", names.join(", "));
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read scenario {}", path.display()))?;
    Ok(Scenario::from_toml(&text, &path.display().to_string())?)
}

fn load_config(path: Option<&PathBuf>) -> Result<Config> {
    let Some(path) = path else { return Ok(Config::defaults()) };
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {name}"))?;
    Ok(RawConfig::from_toml(&text, &name)?.resolve(&name)?)
}

/// Runs `sim-cli run`.
pub fn run(args: RunArgs) -> Result<()> {
    let budget_nano_usd = match args.budget_usd {
        None => None,
        Some(b) if b.is_finite() && b > 0.0 && b < 1e9 => Some((b * NANO_PER_USD as f64).round() as u64),
        Some(b) => bail!("--budget-usd {b}: must be a positive number of USD below 1e9"),
    };
    // Step 1: every input is read and validated before anything is written.
    let config = load_config(args.config.as_ref())?;
    let scenario = load_scenario(&args.scenario)?;
    let out = OutputDir::create(args.out.as_deref(), &scenario.name, args.seed, args.personas, args.ticks)?;
    out.write_config(&config)?;

    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        builder.worker_threads(n as usize);
    }
    let runtime = builder.enable_all().build().context("cannot start the async runtime")?;
    let terminal = TerminalProgress::new(args.ticks).map(Arc::new);
    let progress: Arc<dyn Progress> = match &terminal {
        Some(t) => t.clone(),
        None => Arc::new(Silent),
    };
    let spec = RunSpec {
        config,
        scenario,
        traits: Traits::builtin(),
        seed: args.seed,
        personas: args.personas,
        ticks: args.ticks,
        budget_nano_usd,
        strategy: match args.embed_strategy {
            EmbedStrategy::Batched => Strategy::Batched,
            EmbedStrategy::PerPersona => Strategy::PerConsumer,
        },
        embedder: None,
        chat: None,
    };
    let mut writer = out.outcome_writer()?;
    let result = runtime.block_on(actors::run::run(spec, progress, false, |report| writer.write_tick(report)));
    if let Some(t) = &terminal {
        t.finish();
    }
    let mut summary = result?.summary;
    summary.out_dir = out.path().display().to_string();
    out.write_summary(&summary)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary).context("cannot encode the summary")?);
    } else {
        print_summary(&summary);
    }
    Ok(())
}
