//! Starting a run and resuming one: the inputs read and checked before
//! anything is written, the run directory, the trace the run writes
//! itself, the chat log, the outcomes file and the summary.

use crate::dir::{shard_dir, RunDir, AUTO_OUTCOMES_MAX_TURNS};
use crate::error::{refuse, Error, Result};
use crate::watch::Watch;
use actors::progress::Progress;
use actors::replay::rerun;
use actors::run::{RunSpec, MAX_PANEL, MAX_PERSONAS, MAX_TICKS};
use actors::sink::TraceSink;
use engine::config::panel::PanelSection;
use engine::config::{ChatProvider, Config};
use engine::cost::NANO_PER_USD;
use engine::embed::Strategy;
use engine::persona::profile::DEFAULT_TRAITS;
use engine::persona::Traits;
use engine::scenario::{Scenario, BUILTIN};
use engine::shard::Shard;
use engine::store::trace::file::read_trace_file;
use engine::store::trace::{Header, Record, RunEnd, Split, TraceWriter};
use engine::summary::RunSummary;
use engine::turn::TickDigests;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Personas in a run given neither a count nor a panel.
pub const DEFAULT_PERSONAS: u32 = 50;

/// Whether a run writes `outcomes.jsonl` beside its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutcomesFile {
    /// Only for small panels: at most [`AUTO_OUTCOMES_MAX_TURNS`]
    /// persona-turns (personas x ticks).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never (the export writes it from the trace later).
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

/// How the trace is written, never what it holds: switches the soak drives
/// its children with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceHooks {
    /// Every tick in trace parts of at most this many bytes.
    pub part_bytes: Option<u64>,
    /// A disk that fills up once the trace is this many bytes long.
    pub disk_full_at: Option<u64>,
}

impl TraceHooks {
    fn apply(self, mut w: TraceWriter) -> TraceWriter {
        if let Some(b) = self.part_bytes {
            w = w.with_part_bytes(b as usize);
        }
        if let Some(b) = self.disk_full_at {
            w = w.with_byte_limit(b);
        }
        w
    }
}

/// A scenario with where it came from and its source text.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The scenario.
    pub scenario: Scenario,
    /// `built-in:NAME` or the file's path.
    pub origin: String,
    /// Its TOML.
    pub source: String,
}

/// The scenario `arg` names: a TOML file, or else a built-in scenario.
pub fn load_scenario(arg: &str) -> Result<LoadedScenario> {
    let path = PathBuf::from(arg);
    if !path.exists() {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == arg) {
            let scenario = Scenario::from_toml(text, &format!("built-in scenario {name}"))?;
            return Ok(LoadedScenario { scenario, origin: format!("built-in:{name}"), source: text.to_string() });
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        refuse!("scenario {arg:?}: no such file, and not a built-in scenario (built-ins: {})", names.join(", "));
    }
    let text = std::fs::read_to_string(&path).map_err(Error::io(format!("cannot read scenario {}", path.display())))?;
    let scenario = Scenario::from_toml(&text, &path.display().to_string())?;
    Ok(LoadedScenario { scenario, origin: path.display().to_string(), source: text })
}

/// A panel given by data: the CSV's text and the panel map's TOML, each
/// with the name its errors use (a file's path).
#[derive(Debug, Clone)]
pub struct PanelData {
    /// The panel's CSV text.
    pub csv: String,
    /// What its errors call it.
    pub csv_name: String,
    /// The panel map's TOML text.
    pub map: String,
    /// What its errors call it.
    pub map_name: String,
}

impl PanelData {
    /// The panel in `panel`, read by the map in `map`.
    pub fn read(panel: &Path, map: &Path) -> Result<PanelData> {
        let read = |flag: &str, p: &Path| {
            std::fs::read_to_string(p).map_err(Error::io(format!("cannot read {flag} {}", p.display())))
        };
        let map_text = read("--panel-map", map)?;
        Ok(PanelData {
            csv: read("--panel", panel)?,
            csv_name: panel.display().to_string(),
            map: map_text,
            map_name: map.display().to_string(),
        })
    }

    /// The run's `[panel]`: every row, or a seeded subsample of `personas`
    /// of them (kept in file order).
    pub fn section(&self, personas: Option<u32>, seed: u64) -> Result<PanelSection> {
        let map = survey::PanelMap::from_toml(&self.map, &self.map_name)?;
        let rows = survey::Panel::from_csv(&self.csv, &self.csv_name, &map)?;
        let n = rows.respondents.len();
        let name = &self.csv_name;
        let chosen = match personas {
            None => (0..n).collect(),
            Some(k) => match rows.subsample(k as usize, seed) {
                Some(c) => c,
                None => refuse!(
                    "--personas {k}: the panel {name} has only {n} rows (give at most {n}, or leave --personas out)"
                ),
            },
        };
        if chosen.len() > MAX_PERSONAS as usize {
            refuse!(
                "--panel {name}: {n} rows; a run has at most {MAX_PERSONAS} personas (pass --personas to subsample)"
            );
        }
        Ok(PanelSection { source: name.clone(), rows: chosen.iter().map(|&i| rows.respondents[i].given()).collect() })
    }
}

/// What a new run is: its inputs, read and checked by [`start`] before
/// anything is written.
#[derive(Debug, Clone)]
pub struct Start {
    /// The resolved configuration ([`crate::load_config`]).
    pub config: Config,
    /// A built-in scenario's name or a scenario file.
    pub scenario: String,
    /// Personas: default [`DEFAULT_PERSONAS`]; with a panel, a subsample
    /// of its rows.
    pub personas: Option<u32>,
    /// A panel given by data.
    pub panel: Option<PanelData>,
    /// Ticks.
    pub ticks: u32,
    /// The seed of every draw.
    pub seed: u64,
    /// The run directory; default a fresh one under `runs/`.
    pub out: Option<PathBuf>,
    /// Stop at the first tick boundary where recorded spend reaches this.
    pub budget_usd: Option<f64>,
    /// Whether `outcomes.jsonl` is written.
    pub outcomes: OutcomesFile,
    /// `I/N` or `auto/N`: one shard of the panel.
    pub shard: Option<String>,
    /// How the trace is written.
    pub hooks: TraceHooks,
    /// A `validate --calibrate` file (`calibration.json`) to apply to the
    /// probes that ask one of its questions.
    pub calibration: Option<PathBuf>,
    /// Jobs of tick 1 asked before a live run, to measure its prompts and
    /// replies for the estimate; the run reuses their answers. Default
    /// [`crate::preflight::DEFAULT_PILOT`]; 0 prices replies at their cap.
    pub pilot: u32,
}

impl Start {
    /// A run of the embedded defaults: 50 personas, 3 ticks, seed 42, the
    /// default scenario.
    pub fn new(config: Config) -> Start {
        Start {
            config,
            scenario: "default".into(),
            personas: None,
            panel: None,
            ticks: 3,
            seed: 42,
            out: None,
            budget_usd: None,
            outcomes: OutcomesFile::Auto,
            shard: None,
            calibration: None,
            hooks: TraceHooks::default(),
            pilot: crate::preflight::DEFAULT_PILOT,
        }
    }
}

/// A run that came to a stop, with its summary written.
#[derive(Debug)]
pub struct Finished {
    /// Its directory.
    pub dir: RunDir,
    /// Its summary.
    pub summary: RunSummary,
    /// Whether it had finished before this call (a resume or a shard's
    /// retry that had nothing to do).
    pub already: bool,
}

impl Finished {
    /// Ok when the run stopped for good (all ticks, or its budget); the
    /// error with the resume hint when it stopped resumably (an interrupt,
    /// the circuit breaker).
    pub fn completed(&self) -> Result<()> {
        match self.summary.stopped.as_ref().filter(|s| !s.reason.is_final()) {
            None => Ok(()),
            Some(s) => Err(Error::Interrupted {
                dir: self.dir.path().to_path_buf(),
                after_tick: s.after_tick,
                reason: s.reason.to_string(),
                detail: s.detail.clone(),
            }),
        }
    }
}

/// A tokio runtime with `threads` workers (default: one per core).
pub fn runtime(threads: Option<u32>) -> Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        builder.worker_threads(n as usize);
    }
    builder.enable_all().build().map_err(Error::io("cannot start the async runtime"))
}

/// Starts the run `start` describes and runs it to its end, an interrupt
/// or a failure. A shard whose directory already holds it is resumed.
/// A run answers in any mode, in the options' own order and without
/// separate reasons: those are for `validate`. Returns the content hash a
/// calibration file must have been fitted under: the configuration as
/// loaded, before a panel of data is resolved into it.
fn refuse_answer_modes(config: &Config) -> Result<String> {
    if config.raw.answers.reasons {
        refuse!(
            "config [answers] reasons = true: a run's reactions already give their reasons in words; `reasons` \
             applies to `validate` (remove it from [answers])"
        );
    }
    if config.raw.answers.order != engine::config::AnswerOrder::AsAsked {
        refuse!(
            "config [answers] order = \"permuted\": a run shows its probes' options as the scenario lists them; a \
             permuted order applies to `validate` (remove `order` from [answers], or pass --option-order to validate)"
        );
    }
    Ok(config.content_hash().hex())
}

/// `--budget-usd` in nano-USD, checked.
fn budget(usd: Option<f64>) -> Result<Option<u64>> {
    match usd {
        None => Ok(None),
        Some(b) if b.is_finite() && b > 0.0 && b < 1e9 => Ok(Some((b * NANO_PER_USD as f64).round() as u64)),
        Some(b) => refuse!("--budget-usd {b}: must be a positive number of USD below 1e9"),
    }
}

/// Starts the run `start` describes (or a shard's retry, which continues
/// its shard): checks the inputs before anything is written, asks
/// `watch.confirm` for a live model, writes the run directory and its
/// trace tick by tick, and returns the run once it stops (at its end, its
/// budget, or an interrupt at a tick boundary).
pub fn start(start: Start, watch: &Watch<'_>) -> Result<Finished> {
    let Start { mut config, seed, ticks, .. } = start;
    let budget_nano_usd = budget(start.budget_usd)?;
    let plain_hash = refuse_answer_modes(&config)?;
    // Every input is read and checked before anything is written.
    let personas = match &start.panel {
        Some(panel) => {
            let section = panel.section(start.personas, seed)?;
            let rows = section.rows.len() as u32;
            config.raw.panel = Some(section);
            rows
        }
        None => start.personas.unwrap_or(DEFAULT_PERSONAS),
    };
    if personas == 0 || personas > MAX_PANEL {
        refuse!("--personas {personas}: a panel has 1 to {MAX_PANEL} personas");
    }
    if ticks == 0 || ticks > MAX_TICKS {
        refuse!("--ticks {ticks}: a run has 1 to {MAX_TICKS} ticks");
    }
    if start.shard.is_none() && personas > MAX_PERSONAS {
        let at_least = personas.div_ceil(MAX_PERSONAS);
        refuse!(
            "--personas {personas}: one run holds at most {MAX_PERSONAS} personas; split the panel into at least {at_least} shards (--shard I/N, then `sim-cli merge`)"
        );
    }
    let loaded = load_scenario(&start.scenario)?;
    if let Some(path) = &start.calibration {
        config.raw.answers.calibrated = crate::calibration::calibrations(path, &config, &plain_hash, &loaded.scenario)?;
    }
    for warning in loaded.scenario.check_run(&loaded.origin, ticks, &Traits::builtin().interests)? {
        watch.progress.note(&format!("warning: {warning}"));
    }
    let header = Header::new(&config, seed, personas, ticks)
        .with_budget(budget_nano_usd)
        .with_strategy(Strategy::Batched)
        .with_scenario(&loaded.origin, &loaded.source)
        .with_traits(DEFAULT_TRAITS);
    let shard = match &start.shard {
        Some(text) => Some(shard_of(text, personas, watch.progress.as_ref())?),
        None => None,
    };
    let out = match (shard, &start.out) {
        (Some(s), None) => Some(shard_dir(&loaded.scenario.name, seed, personas, ticks, s)),
        (_, out) => out.clone(),
    };
    if let (Some(s), Some(dir)) = (shard, &out) {
        let dir = RunDir::at(dir);
        if dir.trace().exists() {
            // A retried pod or array task runs the same command again.
            same_shard(&dir, &header, s)?;
            return resume(dir.path(), start.hooks, watch);
        }
        if dir.clear_unstarted()? {
            watch
                .progress
                .note(&format!("{}: a start that never reached its first frame; starting again", dir.path().display()));
        }
    }
    // The ports are built before anything is written: a missing key or an
    // unreadable cache file stops the run here, with nothing left behind.
    // A shard's ports get its share of the rate limits.
    let port_config = shard.map(|s| s.share_rates(&config));
    let (embedder, chat) = actors::run::default_ports(port_config.as_ref().unwrap_or(&config), seed)?;
    let ran = shard.map_or(personas, |s| s.personas(personas).len() as u32);
    let runtime = runtime(watch.threads)?;
    let traits = Traits::builtin();
    let held = shard.map_or(0..personas, |s| s.personas(personas));
    let plan = crate::preflight::Plan::new(&config, &loaded.scenario, &traits, seed, held, ticks);
    // The directory is checked before the pilot is bought.
    RunDir::check_out(out.as_deref(), "--out")?;
    let crate::preflight::Finished { chat, estimate, paid } = preflight(plan, start.pilot, chat, &runtime, watch)?;
    let default = crate::dir::default_base(&loaded.scenario.name, seed, personas, ticks);
    let dir = RunDir::create(out.as_deref(), &default, "--out")?;
    let interrupt = watch.interrupt.install(&runtime, dir.path())?;
    dir.write_config(&config)?;
    let logged = chat_log(&config, &dir, &chat)?;
    let split = shard.map(Split::Shard);
    let mut trace = TraceSink::new(start.hooks.apply(dir.create_trace(&header, split.as_ref())?));
    // The pilot's answers are logged once the trace exists (a retried
    // shard then resumes, and is served them).
    let chat = logged_pilot(logged, chat, &paid)?;
    let spec = RunSpec {
        config,
        scenario: loaded.scenario,
        traits,
        seed,
        personas,
        shard,
        ticks,
        planned_ticks: None,
        budget_nano_usd,
        strategy: Strategy::Batched,
        embedder,
        chat: Some(chat),
        interrupt,
        replayed_ticks: 0,
    };
    let mut writer = dir.outcome_writer(start.outcomes.writes(ran, ticks))?;
    let result = runtime.block_on(actors::run::run(spec, watch.progress.clone(), false, |report| {
        writer.write_tick(&report)?;
        trace.send(Record::Tick(Box::new(report.into_frame())))
    }));
    let mut summary = result.map_err(|e| stopped(e.into(), &dir))?.summary;
    summary.estimate = estimate;
    close(trace, dir, summary)
}

/// The connection check, the pilot and the estimate, as `watch.confirm`
/// asks for them; returns the port the run asks: answers kept by earlier
/// commands served from the response cache (the connection check asks the
/// server itself), and the pilot's answers served to the run.
fn preflight(
    plan: crate::preflight::Plan<'_>,
    pilot: u32,
    live: Arc<dyn engine::chat::ChatPort>,
    runtime: &tokio::runtime::Runtime,
    watch: &Watch<'_>,
) -> Result<crate::preflight::Finished> {
    let config = plan.cfg;
    let cached = providers::with_response_cache(config, plan.seed, Arc::clone(&live), &Arc::default());
    let ports = (live.as_ref(), cached.as_ref());
    let preflight = crate::preflight::Preflight::new(plan, pilot, ports, runtime, watch.progress.as_ref());
    (watch.confirm)(config, &|| preflight.estimate())?;
    preflight.finish(Arc::clone(&cached))
}

/// The run's chat log, for every provider but the scripted one: live
/// answers are logged as they are paid for, so a resume never buys them
/// again.
fn chat_log(
    config: &Config,
    dir: &RunDir,
    chat: &Arc<dyn engine::chat::ChatPort>,
) -> Result<Option<Arc<engine::store::trace::wal::WalChat>>> {
    Ok(match config.raw.chat.provider {
        ChatProvider::Scripted => None,
        ChatProvider::Modelled | ChatProvider::Openai | ChatProvider::Gguf => {
            Some(Arc::new(engine::store::trace::wal::WalChat::open(&dir.chat_wal(), Arc::clone(chat))?))
        }
    })
}

/// The port the run asks: `chat` behind its log, which first logs the
/// pilot's answers (`paid`).
fn logged_pilot(
    logged: Option<Arc<engine::store::trace::wal::WalChat>>,
    chat: Arc<dyn engine::chat::ChatPort>,
    paid: &[engine::turn::ChatCallRecord],
) -> Result<Arc<dyn engine::chat::ChatPort>> {
    Ok(match logged {
        Some(logged) => {
            logged.log_paid(paid)?;
            logged
        }
        None => chat,
    })
}

/// The shard `text` names for a panel of `personas`, noting where an
/// `auto` index came from.
fn shard_of(text: &str, personas: u32, progress: &dyn Progress) -> Result<Shard> {
    let (shard, from) = match Shard::parse(text, |v| std::env::var(v).ok()) {
        Ok(s) => s,
        Err(e) => refuse!("--shard {e}"),
    };
    if shard.count > personas {
        refuse!(
            "--shard {text}: {} shards for {personas} personas; every shard needs at least one persona",
            shard.count
        );
    }
    let range = shard.personas(personas);
    if range.len() > MAX_PERSONAS as usize {
        let at_least = personas.div_ceil(MAX_PERSONAS);
        refuse!(
            "--shard {text}: a shard of {personas} personas in {} holds {}; a shard holds at most {MAX_PERSONAS} (use at least {at_least} shards)",
            shard.count,
            range.len()
        );
    }
    let from = from.map(|v| format!(", index from {v}")).unwrap_or_default();
    progress.note(&format!("{shard}{from}: personas {} to {} of {personas}", range.start, range.end - 1));
    Ok(shard)
}

/// Checks that the run in `dir` is shard `shard` of the run `header`
/// describes, before a shard's retry resumes it.
fn same_shard(dir: &RunDir, header: &Header, shard: Shard) -> Result<()> {
    let path = dir.trace();
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
    let Some(h) = recorded else { refuse!("{}: the trace has no header", path.display()) };
    let mut what = h.differences(header);
    if split != Some(Split::Shard(shard)) {
        what.push("shard");
    }
    if !what.is_empty() {
        return Err(Error::Refused(format!(
            "{} holds another run (it differs from this command in: {}); a run is never overwritten: choose another --out",
            dir.path().display(),
            what.join(", ")
        )));
    }
    Ok(())
}

/// A run that failed mid-way keeps what it committed: the error says so,
/// with the command that continues it.
fn stopped(e: Error, dir: &RunDir) -> Error {
    Error::Stopped { dir: dir.path().to_path_buf(), source: Box::new(e) }
}

fn run_end(summary: &RunSummary) -> RunEnd {
    RunEnd {
        ticks_completed: summary.ticks_completed,
        stopped: summary.stopped.clone(),
        digests: TickDigests { digest: summary.digest, full_digest: summary.full_digest },
    }
}

/// Continues the killed, interrupted or stopped run in `dir` (a run
/// directory or its trace) from its last committed tick; a finished run is
/// left as it is, its summary rewritten only when missing or not its own.
pub fn resume(dir: &Path, hooks: TraceHooks, watch: &Watch<'_>) -> Result<Finished> {
    let (run_dir, path) = RunDir::open(dir)?;
    let read = read_trace_file(&path, true)
        .map_err(|e| Error::context(format!("cannot resume from {}", path.display()), e))?;
    let runtime = runtime(watch.threads)?;
    let progress = watch.progress.clone();
    if read.end.is_some() {
        // Finished: rebuild the summary from the trace; touch nothing.
        let rerun = runtime.block_on(rerun(&read, false, progress, |_, _| Ok(())))?;
        if let Some(d) = rerun.divergence {
            return Err(Error::Diverged(format!("the finished run in {} does not replay: {d}", path.display())));
        }
        watch.progress.note(&format!("{}: the run already finished; nothing to resume", path.display()));
        let mut summary = rerun.result.summary;
        summary.out_dir = run_dir.path().display().to_string();
        // A run killed between its end frame and its summary finished
        // without one: it is written now (merge needs a shard's).
        let kept = run_dir.read_summary();
        if kept.is_none_or(|k| (k.digest, k.full_digest) != (summary.digest, summary.full_digest)) {
            run_dir.write_summary(&summary)?;
            watch.progress.note(&format!(
                "{}: {} was missing or not this run's; written from the trace",
                run_dir.path().display(),
                crate::dir::SUMMARY
            ));
        }
        return Ok(Finished { dir: run_dir, summary, already: true });
    }
    // A live model is checked before the trace is touched, as for a new run.
    let config = read.header.config(&path.display().to_string())?;
    if config.raw.chat.provider == ChatProvider::Openai {
        let chat = providers::build_chat(&config, read.header.seed)?;
        runtime.block_on(crate::preflight::probe(&config, chat.as_ref(), watch.progress.as_ref()))?;
    }
    if let Some(t) = &read.tail {
        let kept = cut_torn_tail(&path, read.valid_len)?;
        watch.progress.note(&format!(
            "{}: {}; cut off, its bytes kept in {}",
            path.display(),
            t.describe(),
            kept.display()
        ));
    }
    watch.progress.note(&format!(
        "{}: resuming after tick {} of {}",
        path.display(),
        read.ticks.len(),
        read.header.ticks
    ));
    let interrupt = watch.interrupt.install(&runtime, run_dir.path())?;
    let mut trace =
        TraceSink::new(hooks.apply(TraceWriter::reopen(&path, read.valid_len, read.header.format_version)?));
    // The run wrote outcomes.jsonl or it did not; resuming keeps to that.
    let mut writer = run_dir.outcome_writer(run_dir.outcomes().exists())?;
    let wal = run_dir.chat_wal();
    let rerun = runtime.block_on(actors::replay::resume(&read, &wal, interrupt, progress, |report, recorded| {
        writer.write_tick(&report)?;
        match recorded {
            Some(_) => Ok(()),
            None => trace.send(Record::Tick(Box::new(report.into_frame()))),
        }
    }));
    let rerun = rerun.map_err(|e| stopped(e.into(), &run_dir))?;
    if let Some(d) = rerun.divergence {
        return Err(Error::Diverged(format!(
            "cannot resume {}: re-running the recorded ticks diverged at {d}",
            path.display()
        )));
    }
    close(trace, run_dir, rerun.result.summary)
}

/// Ends a run that came to a stop: a run that stopped for good gets its
/// end frame; one stopped resumably does not. Writes the summary either way.
fn close(mut trace: TraceSink, dir: RunDir, mut summary: RunSummary) -> Result<Finished> {
    summary.out_dir = dir.path().display().to_string();
    let resumable = summary.stopped.as_ref().is_some_and(|s| !s.reason.is_final());
    if !resumable {
        trace.send(Record::End(run_end(&summary))).map_err(|e| stopped(e.into(), &dir))?;
    }
    trace.finish().map_err(|e| stopped(e.into(), &dir))?;
    dir.write_summary(&summary)?;
    Ok(Finished { dir, summary, already: false })
}

/// Moves the bytes after `valid_len` to a side file and returns its path.
fn cut_torn_tail(path: &Path, valid_len: u64) -> Result<PathBuf> {
    let bytes = std::fs::read(path).map_err(Error::io(format!("cannot read {}", path.display())))?;
    let side = path.with_extension(format!("bin.torn-{valid_len}"));
    let tail = bytes.get(valid_len as usize..).unwrap_or_default();
    std::fs::write(&side, tail).map_err(Error::io(format!("cannot write {}", side.display())))?;
    Ok(side)
}
