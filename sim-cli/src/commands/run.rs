//! `sim-cli run`.

use crate::output::{print_summary, OutputDir, AUTO_OUTCOMES_MAX_TURNS, OUTCOMES_FILE};
use crate::prelude::{load_config, progress, runtime, trace_path};
use actors::replay::rerun;
use actors::run::{RunSpec, MAX_PANEL, MAX_PERSONAS, MAX_TICKS};
use actors::sink::TraceSink;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use engine::config::panel::PanelSection;
use engine::cost::NANO_PER_USD;
use engine::embed::Strategy;
use engine::persona::profile::DEFAULT_TRAITS;
use engine::persona::Traits;
use engine::report::RunSummary;
use engine::scenario::{Scenario, BUILTIN};
use engine::shard::Shard;
use engine::store::trace::file::read_trace_file;
use engine::store::trace::{Header, Record, RunEnd, Split, TraceWriter};
use engine::turn::TickDigests;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

/// How embedding stages submit their texts.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EmbedStrategy {
    /// One port call per stage with exact-text-deduplicated texts.
    Batched,
    /// One port call per text, no dedup, awaited in turn (the sequential baseline).
    PerPersona,
    /// One port call per text, no dedup, issued concurrently under the client's
    /// concurrency and rate limits (the concurrent baseline).
    PerPersonaConcurrent,
}

/// Whether a run writes `outcomes.jsonl` beside its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomesFile {
    /// Only for small panels: at most 10,000 persona-turns (personas x ticks).
    Auto,
    /// Always.
    Always,
    /// Never (`sim-cli export outcomes DIR` writes it from the trace later).
    Never,
}

impl OutcomesFile {
    /// Whether a run of `personas` x `ticks` writes the file.
    pub fn writes(self, personas: u32, ticks: u32) -> bool {
        match self {
            OutcomesFile::Auto => u64::from(personas) * u64::from(ticks) <= AUTO_OUTCOMES_MAX_TURNS,
            OutcomesFile::Always => true,
            OutcomesFile::Never => false,
        }
    }
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
    /// Tokio worker threads. Default: one per core. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Run directory. Default: a new directory under runs/. An existing non-empty directory is never overwritten.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stop at the first tick boundary where recorded spend reaches this many USD.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub budget_usd: Option<f64>,
    /// How embedding work is submitted: batched (default), or a per-persona baseline for comparison.
    #[arg(long, value_enum, default_value_t = EmbedStrategy::Batched)]
    pub embed_strategy: EmbedStrategy,
    /// Write outcomes.jsonl (one line per job) beside the trace: auto does for at most 10,000
    /// persona-turns. The trace holds every outcome either way; `sim-cli export outcomes DIR` writes
    /// the same file from it.
    #[arg(long, value_enum, default_value_t = OutcomesFile::Auto, value_name = "WHEN")]
    pub outcomes: OutcomesFile,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A live run estimated above this many USD asks for confirmation first (or needs --yes when piped).
    #[arg(long, value_name = "USD", default_value_t = 1.0)]
    pub confirm_above_usd: f64,
    /// Run a live panel above --confirm-above-usd without asking.
    #[arg(long)]
    pub yes: bool,
    /// Continue the killed, interrupted or stopped run in DIR from its last committed tick (its trace
    /// holds every other setting). A finished run is left unchanged.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["personas", "ticks", "seed", "scenario", "config", "out", "budget_usd", "embed_strategy", "outcomes", "panel", "shard"])]
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

impl TraceHooks {
    fn apply(self, mut w: TraceWriter) -> TraceWriter {
        if let Some(b) = self.trace_part_bytes {
            w = w.with_part_bytes(b as usize);
        }
        if let Some(b) = self.trace_disk_full_at {
            w = w.with_byte_limit(b);
        }
        w
    }
}

/// A scenario with where it came from and its source text.
struct LoadedScenario {
    scenario: Scenario,
    origin: String,
    source: String,
}

fn load_scenario(arg: &str) -> Result<LoadedScenario> {
    let path = PathBuf::from(arg);
    if !path.exists() {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == arg) {
            let scenario = Scenario::from_toml(text, &format!("built-in scenario {name}"))?;
            return Ok(LoadedScenario { scenario, origin: format!("built-in:{name}"), source: text.to_string() });
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!("scenario {arg:?}: no such file, and not a built-in scenario (built-ins: {})", names.join(", "));
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read scenario {}", path.display()))?;
    let scenario = Scenario::from_toml(&text, &path.display().to_string())?;
    Ok(LoadedScenario { scenario, origin: path.display().to_string(), source: text })
}

fn finish(summary: &RunSummary, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary).context("cannot encode the summary")?);
    } else {
        print_summary(summary);
    }
    Ok(())
}

/// Personas in a run without `--personas` or `--panel`.
const DEFAULT_PERSONAS: u32 = 50;

/// The `[panel]` of a run given by data: `panel` read by `map`, all rows or
/// a seeded subsample of `personas` of them (kept in file order).
fn load_panel(panel: &Path, map: &Path, personas: Option<u32>, seed: u64) -> Result<PanelSection> {
    let read = |flag: &str, p: &Path| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {flag} {}", p.display()))
    };
    let (panel_name, map_name) = (panel.display().to_string(), map.display().to_string());
    let map = survey::PanelMap::from_toml(&read("--panel-map", map)?, &map_name)?;
    let rows = survey::Panel::from_csv(&read("--panel", panel)?, &panel_name, &map)?;
    let n = rows.respondents.len();
    let chosen = match personas {
        None => (0..n).collect(),
        Some(k) => rows.subsample(k as usize, seed).with_context(|| {
            format!(
                "--personas {k}: the panel {panel_name} has only {n} rows (give at most {n}, or leave --personas out)"
            )
        })?,
    };
    if chosen.len() > MAX_PERSONAS as usize {
        bail!(
            "--panel {panel_name}: {n} rows; a run has at most {MAX_PERSONAS} personas (pass --personas to subsample)"
        );
    }
    Ok(PanelSection { source: panel_name, rows: chosen.iter().map(|&i| rows.respondents[i].given()).collect() })
}

/// The chat write-ahead log of a run directory (live chat providers only).
pub const CHAT_WAL_FILE: &str = "chat.wal";

/// Runs `sim-cli run`.
pub fn run(args: RunArgs) -> Result<()> {
    if let Some(dir) = &args.resume {
        return resume(dir, args.threads, args.json, args.hooks);
    }
    let budget_nano_usd = match args.budget_usd {
        None => None,
        Some(b) if b.is_finite() && b > 0.0 && b < 1e9 => Some((b * NANO_PER_USD as f64).round() as u64),
        Some(b) => bail!("--budget-usd {b}: must be a positive number of USD below 1e9"),
    };
    if !(args.confirm_above_usd.is_finite() && args.confirm_above_usd >= 0.0) {
        bail!("--confirm-above-usd {}: must be a non-negative number of USD", args.confirm_above_usd);
    }
    // Step 1: every input is read and validated before anything is written.
    let mut config = load_config(args.config.as_ref())?;
    let personas = match (&args.panel, &args.panel_map) {
        (Some(panel), Some(map)) => {
            let section = load_panel(panel, map, args.personas, args.seed)?;
            let rows = section.rows.len() as u32;
            config.raw.panel = Some(section);
            rows
        }
        _ => args.personas.unwrap_or(DEFAULT_PERSONAS),
    };
    if args.shard.is_none() && personas > MAX_PERSONAS {
        let at_least = personas.div_ceil(MAX_PERSONAS);
        bail!(
            "--personas {personas}: one run holds at most {MAX_PERSONAS} personas; split the panel into at least {at_least} shards (--shard I/N, then `sim-cli merge`)"
        );
    }
    let loaded = load_scenario(&args.scenario)?;
    for warning in loaded.scenario.check_run(&loaded.origin, args.ticks, &Traits::builtin().interests)? {
        eprintln!("warning: {warning}");
    }
    let strategy = match args.embed_strategy {
        EmbedStrategy::Batched => Strategy::Batched,
        EmbedStrategy::PerPersona => Strategy::PerConsumer,
        EmbedStrategy::PerPersonaConcurrent => Strategy::PerConsumerConcurrent,
    };
    let header = Header::new(&config, args.seed, personas, args.ticks)
        .with_budget(budget_nano_usd)
        .with_strategy(strategy)
        .with_scenario(&loaded.origin, &loaded.source)
        .with_traits(DEFAULT_TRAITS);
    let (shard, out_dir) = shard_and_out(&args, &loaded.scenario.name, personas)?;
    if let (Some(s), Some(dir)) = (shard, &out_dir) {
        if dir.join("trace.bin").exists() {
            // A retried pod or array task runs the same command again.
            same_shard(dir, &header, s)?;
            return resume(dir, args.threads, args.json, args.hooks);
        }
        clear_unstarted(dir)?;
    }
    // The ports are built before anything is written: a missing key or an
    // unreadable cache file stops the run here, with nothing left behind.
    // A shard's ports get its share of the rate limits.
    let port_config = shard.map(|s| s.share_rates(&config));
    let (embedder, chat) = actors::run::default_ports(port_config.as_ref().unwrap_or(&config), args.seed)?;
    let ran = shard.map_or(personas, |s| s.personas(personas).len() as u32);
    let estimate =
        || crate::preflight::estimate(&config, &loaded.scenario, &Traits::builtin(), args.seed, ran, args.ticks);
    crate::preflight::confirm(&config, estimate, args.confirm_above_usd, args.yes)?;
    let runtime = runtime(args.threads)?;
    runtime.block_on(crate::preflight::probe(&config, chat.as_ref()))?;
    let out = OutputDir::create(out_dir.as_deref(), &loaded.scenario.name, args.seed, personas, args.ticks)?;
    let interrupt = interrupt_on_ctrl_c(&runtime, out.path())?;
    out.write_config(&config)?;
    // Live answers are logged as they are paid for, so a resume never buys
    // them again.
    let chat: std::sync::Arc<dyn engine::chat::ChatPort> = match config.raw.chat.provider {
        engine::config::ChatProvider::Scripted => chat,
        engine::config::ChatProvider::Modelled
        | engine::config::ChatProvider::Openai
        | engine::config::ChatProvider::Gguf => {
            std::sync::Arc::new(engine::store::trace::wal::WalChat::open(&out.path().join(CHAT_WAL_FILE), chat)?)
        }
    };
    let split = shard.map(Split::Shard);
    let mut trace = TraceSink::new(args.hooks.apply(out.create_trace(&header, split.as_ref())?));
    let (terminal, progress) = progress(args.ticks);
    let spec = RunSpec {
        config,
        scenario: loaded.scenario,
        traits: Traits::builtin(),
        seed: args.seed,
        personas,
        shard,
        ticks: args.ticks,
        planned_ticks: None,
        budget_nano_usd,
        strategy,
        embedder,
        chat: Some(chat),
        interrupt: Some(interrupt),
        replayed_ticks: 0,
    };
    let mut writer = out.outcome_writer(args.outcomes.writes(ran, args.ticks))?;
    let result = runtime.block_on(actors::run::run(spec, progress, false, |report| {
        writer.write_tick(&report)?;
        trace.send(Record::Tick(Box::new(report.into_frame())))
    }));
    if let Some(t) = &terminal {
        t.finish();
    }
    let mut summary = result.map_err(|e| stopped_by(e, out.path()))?.summary;
    summary.out_dir = out.path().display().to_string();
    close(trace, out, &summary, args.json)
}

/// The shard `--shard` names, if any, and the run directory: `--out`, or
/// for a shard without it, `runs/NAME/shard-000I-of-000N`, the same on
/// every retry.
fn shard_and_out(args: &RunArgs, scenario: &str, personas: u32) -> Result<(Option<Shard>, Option<PathBuf>)> {
    let shard = match &args.shard {
        Some(text) => Some(shard_of(text, personas)?),
        None => None,
    };
    let out = match (shard, &args.out) {
        (Some(s), None) => {
            let run = format!("runs/{scenario}-s{}-{personas}x{}", args.seed, args.ticks);
            Some(PathBuf::from(run).join(s.dir_name()))
        }
        (_, out) => out.clone(),
    };
    Ok((shard, out))
}

/// The shard `--shard TEXT` names for a panel of `personas`, saying where
/// an `auto` index came from.
fn shard_of(text: &str, personas: u32) -> Result<Shard> {
    let (shard, from) = Shard::parse(text, |v| std::env::var(v).ok()).map_err(|e| anyhow::anyhow!("--shard {e}"))?;
    if shard.count > personas {
        bail!("--shard {text}: {} shards for {personas} personas; every shard needs at least one persona", shard.count);
    }
    let range = shard.personas(personas);
    if range.len() > MAX_PERSONAS as usize {
        let at_least = personas.div_ceil(MAX_PERSONAS);
        bail!(
            "--shard {text}: a shard of {personas} personas in {} holds {}; a shard holds at most {MAX_PERSONAS} (use at least {at_least} shards)",
            shard.count,
            range.len()
        );
    }
    let from = from.map(|v| format!(", index from {v}")).unwrap_or_default();
    eprintln!("{shard}{from}: personas {} to {} of {personas}", range.start, range.end - 1);
    Ok(shard)
}

/// A shard stopped before its trace existed left at most its
/// `config.toml` and a chat log with no answer in it: nothing was paid
/// for, so a retry clears them and starts. Anything else stays, and the
/// directory is refused as any non-empty one is.
fn clear_unstarted(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut ours = Vec::new();
    for e in entries {
        let path = e?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let unpaid = match name {
            "config.toml" => true,
            CHAT_WAL_FILE => engine::store::trace::wal::read_wal(&path).is_ok_and(|(answers, _)| answers.is_empty()),
            _ => false,
        };
        if !unpaid {
            return Ok(());
        }
        ours.push(path);
    }
    for p in &ours {
        std::fs::remove_file(p).with_context(|| format!("cannot clear {}", p.display()))?;
    }
    if !ours.is_empty() {
        eprintln!("{}: a start that never reached its first frame; starting again", dir.display());
    }
    Ok(())
}

/// Checks that the run in `dir` is shard `shard` of the run `header`
/// describes, before a shard command resumes it.
fn same_shard(dir: &Path, header: &Header, shard: Shard) -> Result<()> {
    let path = dir.join("trace.bin");
    let mut records = engine::store::trace::file::open_records(&path)?;
    let mut recorded = None;
    let mut split = None;
    for _ in 0..2 {
        match records.next_record()? {
            Some(Record::Header(h)) => recorded = Some(h),
            Some(Record::Split(s)) => split = Some(s),
            _ => break,
        }
    }
    let Some(h) = recorded else { bail!("{}: the trace has no header", path.display()) };
    let mut what = h.differences(header);
    if split != Some(Split::Shard(shard)) {
        what.push("shard");
    }
    if !what.is_empty() {
        bail!(
            "{} holds another run (it differs from this command in: {}); a run is never overwritten: choose another --out",
            dir.display(),
            what.join(", ")
        );
    }
    Ok(())
}

/// A run that failed mid-way keeps what it committed: the error says so,
/// with the command that continues it.
fn stopped_by(e: actors::Error, dir: &Path) -> anyhow::Error {
    anyhow::Error::from(e).context(format!(
        "the run stopped; every committed tick is kept (once the cause is fixed, `sim-cli run --resume {}` continues)",
        dir.display()
    ))
}

/// A flag that the first Ctrl-C sets (the run stops at the next tick
/// boundary); a second Ctrl-C stops at once. Either way the committed ticks
/// are kept and `run --resume` continues. The handler is registered before
/// this returns, so no Ctrl-C after it is missed.
fn interrupt_on_ctrl_c(runtime: &tokio::runtime::Runtime, dir: &Path) -> Result<Arc<std::sync::atomic::AtomicBool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let set = flag.clone();
    let dir = dir.display().to_string();
    let mut interrupts = {
        let _context = runtime.enter();
        signal(SignalKind::interrupt()).context("cannot watch for Ctrl-C")?
    };
    runtime.spawn(async move {
        if interrupts.recv().await.is_some() {
            set.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("\ninterrupted: stopping after this tick (Ctrl-C again stops at once; the run stays resumable)");
            if interrupts.recv().await.is_some() {
                eprintln!("stopped at once; resume with `sim-cli run --resume {dir}`");
                std::process::exit(130);
            }
        }
    });
    Ok(flag)
}

fn run_end(summary: &RunSummary) -> RunEnd {
    RunEnd {
        ticks_completed: summary.ticks_completed,
        stopped: summary.stopped.clone(),
        digests: TickDigests { digest: summary.digest, full_digest: summary.full_digest },
    }
}

/// `sim-cli run --resume DIR`: continues a killed run from its last
/// committed tick; a finished run is left as it is.
fn resume(dir: &Path, threads: Option<u32>, json: bool, hooks: TraceHooks) -> Result<()> {
    let path = trace_path(dir)?;
    let run_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let read = read_trace_file(&path, true).with_context(|| format!("cannot resume from {}", path.display()))?;
    let runtime = runtime(threads)?;
    let (terminal, progress) = progress(read.header.ticks);
    if read.end.is_some() {
        // Finished: rebuild the summary from the trace; touch nothing.
        let rerun = runtime.block_on(rerun(&read, false, progress, |_, _| Ok(())))?;
        if let Some(t) = &terminal {
            t.finish();
        }
        if let Some(d) = rerun.divergence {
            bail!("the finished run in {} does not replay: {d}", path.display());
        }
        eprintln!("{}: the run already finished; nothing to resume", path.display());
        let mut summary = rerun.result.summary;
        summary.out_dir = run_dir.display().to_string();
        // A run killed between its end frame and its summary finished
        // without one: it is written now (merge needs a shard's).
        let kept = std::fs::read_to_string(run_dir.join("summary.json")).ok();
        let kept = kept.and_then(|t| serde_json::from_str::<RunSummary>(&t).ok());
        if kept.is_none_or(|k| (k.digest, k.full_digest) != (summary.digest, summary.full_digest)) {
            OutputDir::existing(&run_dir).write_summary(&summary)?;
            eprintln!("{}: summary.json was missing or not this run's; written from the trace", run_dir.display());
        }
        return finish(&summary, json);
    }
    // A live model is checked before the trace is touched, as for a new run.
    let config = read.header.config(&path.display().to_string())?;
    if config.raw.chat.provider == engine::config::ChatProvider::Openai {
        let chat = providers::build_chat(&config, read.header.seed)?;
        runtime.block_on(crate::preflight::probe(&config, chat.as_ref()))?;
    }
    if let Some(t) = &read.tail {
        let kept = cut_torn_tail(&path, read.valid_len)?;
        eprintln!("{}: {}; cut off, its bytes kept in {}", path.display(), t.describe(), kept.display());
    }
    eprintln!("{}: resuming after tick {} of {}", path.display(), read.ticks.len(), read.header.ticks);
    let interrupt = interrupt_on_ctrl_c(&runtime, &run_dir)?;
    let mut trace =
        TraceSink::new(hooks.apply(TraceWriter::reopen(&path, read.valid_len, read.header.format_version)?));
    let out = OutputDir::existing(&run_dir);
    // The run wrote outcomes.jsonl or it did not; resuming keeps to that.
    let mut writer = out.outcome_writer(run_dir.join(OUTCOMES_FILE).exists())?;
    let wal = run_dir.join(CHAT_WAL_FILE);
    let rerun = runtime.block_on(actors::replay::resume(&read, &wal, Some(interrupt), progress, |report, recorded| {
        writer.write_tick(&report)?;
        match recorded {
            Some(_) => Ok(()),
            None => trace.send(Record::Tick(Box::new(report.into_frame()))),
        }
    }));
    if let Some(t) = &terminal {
        t.finish();
    }
    let rerun = rerun.map_err(|e| stopped_by(e, &run_dir))?;
    if let Some(d) = rerun.divergence {
        bail!("cannot resume {}: re-running the recorded ticks diverged at {d}", path.display());
    }
    let mut summary = rerun.result.summary;
    summary.out_dir = run_dir.display().to_string();
    close(trace, out, &summary, json)
}

/// Ends a run that came to a stop: a run that stopped for good gets its end
/// frame; one stopped by Ctrl-C or the circuit breaker stays resumable and
/// the command fails with the resume hint. Writes the summary either way.
fn close(mut trace: TraceSink, out: OutputDir, summary: &RunSummary, json: bool) -> Result<()> {
    let resumable = summary.stopped.as_ref().filter(|s| !s.reason.is_final()).cloned();
    if resumable.is_none() {
        trace.send(Record::End(run_end(summary))).map_err(|e| stopped_by(e, out.path()))?;
    }
    trace.finish().map_err(|e| stopped_by(e, out.path()))?;
    out.write_summary(summary)?;
    finish(summary, json)?;
    match resumable {
        None => Ok(()),
        Some(s) => bail!(
            "stopped after tick {} ({}: {}); everything committed is kept: resume with `sim-cli run --resume {}`",
            s.after_tick,
            s.reason,
            s.detail,
            out.path().display()
        ),
    }
}

/// Moves the bytes after `valid_len` to a side file and returns its path.
fn cut_torn_tail(path: &Path, valid_len: u64) -> Result<PathBuf> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let side = path.with_extension(format!("bin.torn-{valid_len}"));
    let tail = bytes.get(valid_len as usize..).unwrap_or_default();
    std::fs::write(&side, tail).with_context(|| format!("cannot write {}", side.display()))?;
    Ok(side)
}
