//! `sim-cli field`: the shared memory field. `simulate` drives the field
//! actor with a seeded synthetic mission and writes its event log, saved
//! index and telemetry; `replay` re-applies a log step by step; `stats`
//! prints the telemetry rebuilt from a log; `bench` measures the field
//! against a plain FAISS flat scan in the same process.

use crate::prelude::runtime;
use ::field::replay::replay as replay_log;
use ::field::replay::ReplayedPhase;
use ::field::{Field, FieldConfig};
use agents::field_sim::{simulate, FieldSimSpec};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use engine::clock::SimTime;
use engine::digest::Digest;
use engine::rng::{Purpose, Stream};
use faiss::{index_factory, Index, MetricType};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The field's commands.
#[derive(Debug, Subcommand)]
pub enum FieldCommand {
    /// Run a seeded synthetic mission on the field actor and write its event log, saved field and telemetry.
    Simulate(SimulateArgs),
    /// Re-apply a field event log phase by phase and check every digest.
    Replay(LogArgs),
    /// Telemetry of a logged field: counts, resonance, shared patterns, the strength and stability timeline.
    Stats(StatsArgs),
    /// Inject and query latency against a plain FAISS flat scan, per field size.
    Bench(BenchArgs),
}

/// Options of `sim-cli field simulate`.
#[derive(Debug, Args)]
#[command(after_help = "Each phase, every agent submits its operations from its own task; the field applies\n\
    them at the end of the phase in (agent, seq) order, injections first, then all queries against\n\
    the same state. The digest depends on the seed alone, whatever --threads is.")]
pub struct SimulateArgs {
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Agents (three are named researcher, analyst and writer).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub agents: u32,
    /// Phases.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub phases: u32,
    /// Operations per agent per phase (about half injections, half queries).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub ops: u32,
    /// Vector dimension.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub dim: u32,
    /// Topic centres the vectors cluster around.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub topics: u32,
    /// Results per query.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub k: u32,
    /// Simulated hours between phases.
    #[arg(long, default_value_t = 1.0)]
    pub hours_per_phase: f64,
    /// Decay constant per simulated hour.
    #[arg(long, default_value_t = 0.1)]
    pub lambda: f64,
    /// Boundary permeability applied at injection.
    #[arg(long, default_value_t = 1.0)]
    pub permeability: f64,
    /// The strength-ratio figure's threshold: a phase whose max/min effective strength ratio exceeds it is
    /// counted (a figure of the field's age and lambda, not of lock-in).
    #[arg(long, default_value_t = 100.0)]
    pub ratio_alarm: f64,
    /// Lock-in monitor: the N patterns whose share of the answer slots is watched.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub lock_in_top: u32,
    /// Lock-in monitor: the window of phases whose answers are counted.
    #[arg(long, value_name = "PHASES", default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub lock_in_window: u32,
    /// Lock-in alarm: a phase whose window's top-N share exceeds this (with more than N live patterns) is locked in.
    #[arg(long, value_name = "SHARE", default_value_t = 0.9)]
    pub lock_in_alarm: f64,
    /// Output directory (must not exist or be empty). Default: the first free runs/field-s{seed}[-k].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tokio worker threads. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A directory holding `field.events`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Directory written by `field simulate` (or a field.events file).
    #[arg(value_name = "DIR|LOG")]
    pub dir: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `sim-cli field stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Directory written by `field simulate` (or a field.events file).
    #[arg(value_name = "DIR|LOG")]
    pub dir: PathBuf,
    /// Leave the per-pattern strengths out of the timeline (they grow with the field).
    #[arg(long)]
    pub brief: bool,
    /// Print the telemetry as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `sim-cli field bench`.
#[derive(Debug, Args)]
#[command(after_help = "Both sides run in this process on the same vectors: the field (FAISS IDMap,Flat\n\
    inner product, exact top-k with score-time decay and boosts, reinforcement after each single\n\
    query) and a bare FAISS Flat inner-product index. Batches hold 64 queries. To measure one core,\n\
    pin the process: `taskset -c 0 sim-cli field bench`. Ratios are measured side by side; absolute\n\
    figures move with the machine's load.")]
pub struct BenchArgs {
    /// Field sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "100,500,1000,5000", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub vectors: Vec<u32>,
    /// Vector dimension.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub dim: u32,
    /// Results per query.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub k: u32,
    /// Minimum measuring time per figure, in milliseconds.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub min_ms: u64,
    /// Seed of the vectors.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// FAISS's OpenMP threads (the field's `threads` setting): 1 by default; 0 leaves OpenMP's own
    /// choice (OMP_NUM_THREADS, or one per core).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub threads: u32,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Internal: measure only as this process is (no pinned child).
    #[arg(long, hide = true)]
    pub pinned_child: bool,
}

/// Runs `sim-cli field ...`.
pub fn field(cmd: FieldCommand) -> Result<()> {
    match cmd {
        FieldCommand::Simulate(a) => simulate_cmd(a),
        FieldCommand::Replay(a) => replay_cmd(a),
        FieldCommand::Stats(a) => stats_cmd(a),
        FieldCommand::Bench(a) => bench_cmd(a),
    }
}

fn positive(name: &str, v: f64, allow_zero: bool) -> Result<()> {
    if !v.is_finite() || v < 0.0 || (!allow_zero && v == 0.0) {
        bail!("{name} {v}: must be a finite number {}", if allow_zero { ">= 0" } else { "> 0" });
    }
    Ok(())
}

fn simulate_cmd(a: SimulateArgs) -> Result<()> {
    positive("--hours-per-phase", a.hours_per_phase, false)?;
    positive("--lambda", a.lambda, true)?;
    positive("--permeability", a.permeability, true)?;
    if !(a.ratio_alarm.is_finite() && a.ratio_alarm > 1.0) {
        bail!("--ratio-alarm {}: must be a finite number > 1", a.ratio_alarm);
    }
    if !(a.lock_in_alarm > 0.0 && a.lock_in_alarm < 1.0) {
        bail!("--lock-in-alarm {}: must be a share between 0 and 1", a.lock_in_alarm);
    }
    let out = a.out.clone().unwrap_or_else(|| runs::dir::fresh(&format!("runs/field-s{}", a.seed)));
    if out.exists() && std::fs::read_dir(&out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("output directory {} already exists and is not empty; choose another --out or remove it", out.display());
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create output directory {}", out.display()))?;
    let spec = FieldSimSpec {
        seed: a.seed,
        agents: a.agents,
        phases: a.phases,
        ops: a.ops,
        dim: a.dim as usize,
        topics: a.topics,
        hours_per_phase: a.hours_per_phase,
        k: a.k as usize,
        field: FieldConfig {
            lambda: a.lambda,
            permeability: a.permeability,
            ratio_alarm: a.ratio_alarm,
            lock_in_top: a.lock_in_top as usize,
            lock_in_window: a.lock_in_window,
            lock_in_alarm: a.lock_in_alarm,
            ..FieldConfig::default()
        },
        out: Some(out.clone()),
    };
    let bar = crate::progress::bar(u64::from(a.phases), "phases");
    let result = runtime(a.threads)?.block_on(simulate(&spec, |p| bar.set_position(u64::from(p))));
    bar.finish_and_clear();
    let result = result.context("field simulation failed")?;
    write_json(&out.join("telemetry.json"), &result.telemetry)?;
    let summary = SimulateSummary {
        out: out.display().to_string(),
        digest: result.digest,
        operations: Operations { ok: result.ok, failed: result.failed },
        patterns: result.telemetry.patterns,
        archived: result.telemetry.archived,
        multi_agent_patterns: result.telemetry.multi_agent_patterns.len(),
        stability: result.telemetry.stability.stability,
        convergence_phase: result.telemetry.convergence_phase,
        resonance: ResonanceFigures { mean: result.telemetry.resonance.mean, max: result.telemetry.resonance.max },
        busiest: result.telemetry.busiest.clone(),
        monitor: result.telemetry.monitor.clone(),
        lock_in: result.telemetry.lock_in.clone(),
        query_resonance: result.telemetry.query_resonance.clone(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let t = &result.telemetry;
        println!("Field simulation: {} agents x {} phases x {} ops, seed {}", a.agents, a.phases, a.ops, a.seed);
        println!(
            "  operations   {} ok, {} refused ({} injections, {} queries)",
            result.ok, result.failed, t.injects.total, t.queries.total
        );
        println!(
            "  patterns     {} ({} archived), {} accessed by more than one agent",
            t.patterns,
            t.archived,
            t.multi_agent_patterns.len()
        );
        println!(
            "  resonance    mean {:.4}, max {:.4}, {} strongly resonant pairs",
            t.resonance.mean, t.resonance.max, t.resonance.strongly_resonant_pairs
        );
        println!("  busiest      {}", busiest_line(t.busiest.as_ref()));
        println!("  to queries   {}", query_resonance_line(&t.query_resonance));
        println!("  lock-in      {}", lock_in_line(&t.lock_in));
        println!("  ratio        {}", monitor_line(&t.monitor));
        let conv = t.convergence_phase.map_or("not reached".to_string(), |p| format!("phase {p}"));
        println!("  stability    {:.3} (convergence > 0.75: {conv})", t.stability.stability);
        println!("  digest       {}", result.digest.hex());
        println!("Wrote {}: field.events, field.index, field.patterns, telemetry.json", out.display());
    }
    Ok(())
}

/// The busiest pattern in words.
fn busiest_line(b: Option<&::field::telemetry::Busiest>) -> String {
    b.map_or("no query returned anything".to_string(), |b| {
        format!(
            "#{} {} (by {}) answered {} queries, {:.1}% of all",
            b.id,
            b.key,
            b.injected_by,
            b.answered,
            100.0 * b.share
        )
    })
}

/// The answers' resonance with their queries in words.
fn query_resonance_line(q: &::field::telemetry::QueryResonance) -> String {
    format!(
        "{} of {} returned patterns resonant with their query (cosine > 0.7, decayed strength > 0.1); {} of {} queries had one",
        q.resonant_hits, q.hits, q.queries_with_resonant, q.queries
    )
}

/// The lock-in monitor in words.
fn lock_in_line(l: &::field::telemetry::LockIn) -> String {
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
    let now = format!(
        "top {} patterns hold {} of the last {} phases' answer slots (peak {}), Gini {}",
        l.top,
        pct(l.top_share),
        l.window,
        pct(l.max_top_share),
        l.gini.map_or("-".to_string(), |g| format!("{g:.3}"))
    );
    match l.first_alarm_phase {
        Some(first) => format!(
            "ALARM: {now}; above {} in {} phases, first at phase {first}",
            pct(Some(l.alarm_share)),
            l.alarm_phases
        ),
        None => format!("{now}; alarm at {} never reached", pct(Some(l.alarm_share))),
    }
}

/// The strength-ratio figure in words.
fn monitor_line(m: &::field::telemetry::Monitor) -> String {
    let max = match (m.max_ratio, m.max_ratio_phase) {
        (Some(r), Some(p)) => format!("max/min effective strength ratio peaked at {r:.2} (phase {p})"),
        _ => "no live patterns to compare".to_string(),
    };
    match m.first_alarm_phase {
        Some(first) => format!(
            "ALARM: {max}; above the alarm of {} in {} phases, first at phase {first}",
            m.ratio_alarm, m.alarm_phases
        ),
        None => format!("{max}; alarm at {} never reached", m.ratio_alarm),
    }
}

/// The `--json` summary of `field simulate`.
#[derive(Debug, Serialize)]
struct SimulateSummary {
    out: String,
    digest: Digest,
    operations: Operations,
    patterns: usize,
    archived: usize,
    multi_agent_patterns: usize,
    stability: f64,
    convergence_phase: Option<u64>,
    resonance: ResonanceFigures,
    busiest: Option<::field::telemetry::Busiest>,
    monitor: ::field::telemetry::Monitor,
    lock_in: ::field::telemetry::LockIn,
    query_resonance: ::field::telemetry::QueryResonance,
}

/// Resonance among the live patterns at the end.
#[derive(Debug, Serialize)]
struct ResonanceFigures {
    mean: f64,
    max: f64,
}

#[derive(Debug, Serialize)]
struct Operations {
    ok: u64,
    failed: u64,
}

/// The `--json` report of `field replay`.
#[derive(Debug, Serialize)]
struct ReplayReport<'a> {
    log: String,
    phases: &'a [ReplayedPhase],
    matched: bool,
    first_divergence: Option<u64>,
    digest: Digest,
}

fn write_json(path: &Path, v: &impl Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(v)?).with_context(|| format!("cannot write {}", path.display()))
}

fn log_path(p: &Path) -> Result<PathBuf> {
    let path = if p.is_dir() { p.join("field.events") } else { p.to_path_buf() };
    if !path.is_file() {
        bail!("{}: no field event log here (expected a directory written by `sim-cli field simulate`, or a field.events file)", path.display());
    }
    Ok(path)
}

fn replay_cmd(a: LogArgs) -> Result<()> {
    let path = log_path(&a.dir)?;
    let (steps, session) = replay_log(&path).with_context(|| format!("cannot replay {}", path.display()))?;
    let diverged = steps.iter().find(|s| !s.matches).map(|s| s.phase);
    if a.json {
        let v = ReplayReport {
            log: path.display().to_string(),
            phases: &steps,
            matched: diverged.is_none(),
            first_divergence: diverged,
            digest: session.field.digest(),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{:>6} {:>8} {:>8} {:>8} {:>6} {:>10}  digest",
            "phase", "hours", "injects", "queries", "live", "stability"
        );
        for s in &steps {
            let mark = if s.matches { "ok" } else { "DIVERGED" };
            println!(
                "{:>6} {:>8.2} {:>8} {:>8} {:>6} {:>10.4}  {} {mark}",
                s.phase,
                s.hours,
                s.injects,
                s.queries,
                s.live,
                s.stability,
                &s.replayed.hex()[..16]
            );
        }
        match diverged {
            None => println!("Replayed {} phases: every digest and outcome matches.", steps.len()),
            Some(p) => println!("Replay diverged at phase {p}."),
        }
    }
    if let Some(p) = diverged {
        bail!("{}: replay diverged at phase {p}", path.display());
    }
    Ok(())
}

fn stats_cmd(a: StatsArgs) -> Result<()> {
    let path = log_path(&a.dir)?;
    let (steps, session) = replay_log(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let end = engine::clock::SimTime((steps.last().map_or(0.0, |s| s.hours) * 3600.0).round() as u64);
    let mut report = session.report(end).with_context(|| format!("cannot report on {}", path.display()))?;
    if a.brief {
        for p in &mut report.timeline {
            p.strengths.clear();
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("Field {} ({} phases)", path.display(), report.timeline.len());
    let by = |c: &::field::telemetry::Counts| {
        c.by_agent.iter().map(|(a, n)| format!("{a} {n}")).collect::<Vec<_>>().join(", ")
    };
    println!("  injections   {} ({})", report.injects.total, by(&report.injects));
    println!("  queries      {} ({})", report.queries.total, by(&report.queries));
    println!("  patterns     {} ({} archived)", report.patterns, report.archived);
    let r = &report.resonance;
    println!(
        "  resonance    {} pairs of {} live patterns: mean {:.4}, max {:.4}, {} strongly resonant",
        r.pairs, r.patterns, r.mean, r.max, r.strongly_resonant_pairs
    );
    for b in &r.histogram {
        let hi = if b.hi > b.lo { format!("{:.2}", b.hi) } else { "   +".into() };
        println!("    [{:.2}, {hi})  {}", b.lo, b.count);
    }
    println!("  shared       {} patterns accessed by more than one agent", report.multi_agent_patterns.len());
    for p in report.multi_agent_patterns.iter().take(10) {
        println!(
            "    #{} {} (by {}): {} accesses, {}",
            p.id,
            p.key,
            p.injected_by,
            p.accesses,
            p.accessed_by.join(", ")
        );
    }
    println!("  busiest      {}", busiest_line(report.busiest.as_ref()));
    println!("  lock-in      {}", lock_in_line(&report.lock_in));
    println!("  ratio        {}", monitor_line(&report.monitor));
    let conv = report.convergence_phase.map_or("not reached".to_string(), |p| format!("phase {p}"));
    println!(
        "  stability    {:.3} = 0.6 x {:.3} attractor + 0.4 x {:.3} organisation; convergence: {conv}",
        report.stability.stability, report.stability.attractor_strength, report.stability.organisation
    );
    println!("  timeline     phase: live, total strength, stability, max/min strength ratio");
    for p in &report.timeline {
        let ratio =
            p.strength_ratio.map_or("-".to_string(), |r| format!("{r:.2}{}", if p.alarm { " ALARM" } else { "" }));
        println!(
            "    {:>4}: {:>5} {:>9.3} {:>7.3} {:>9}",
            p.phase, p.live, p.total_strength, p.stability.stability, ratio
        );
    }
    Ok(())
}

/// Calls `f` until `min` has passed (and at least three times); returns
/// seconds per call.
fn time_per_call(min: Duration, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    let mut n = 0u64;
    while n < 3 || start.elapsed() < min {
        f()?;
        n += 1;
    }
    Ok(start.elapsed().as_secs_f64() / n as f64)
}

/// Single-threaded sequential read bandwidth over `bytes` bytes, GB/s: the
/// ceiling a one-query flat scan can approach.
fn read_bandwidth(bytes: usize, min: Duration) -> f64 {
    let buf: Vec<f32> = (0..bytes / 4).map(|i| (i % 7) as f32).collect();
    let mut sink = 0.0f32;
    let per = time_per_call(min, || {
        let mut acc = [0.0f32; 16];
        for chunk in buf.chunks_exact(16) {
            for (a, x) in acc.iter_mut().zip(chunk) {
                *a += x;
            }
        }
        sink += acc.iter().sum::<f32>();
        Ok(())
    })
    .unwrap_or(f64::INFINITY);
    std::hint::black_box(sink);
    bytes as f64 / per / 1e9
}

/// One field size of `field bench`, measured side by side with a bare
/// FAISS flat index on the same vectors.
#[derive(Debug, Serialize, Deserialize)]
struct SizeResult {
    vectors: usize,
    dim: usize,
    inject_us: f64,
    plain_inject_us: f64,
    query_single_us: f64,
    query_single_qps: f64,
    query_batched_qps: f64,
    plain_scan_single_qps: f64,
    plain_scan_batched_qps: f64,
    single_overhead: f64,
    batched_overhead: f64,
    scanned_gb_per_s_single: f64,
    scanned_gb_per_s_batched: f64,
    plain_scanned_gb_per_s_single: f64,
    /// The same batched figure with the process pinned to one core
    /// (`taskset -c 0`), measured in a child; absent without `taskset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pinned_query_batched_qps: Option<f64>,
    /// Unpinned over pinned batched queries per second: at least 1 when the
    /// thread setting does not oversubscribe the cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batched_vs_pinned: Option<f64>,
}

/// A target of the source plan, checked at 5000 x 2048.
#[derive(Debug, Serialize, Deserialize)]
struct Target {
    name: String,
    threshold: f64,
    value: f64,
    pass: bool,
}

/// The `--json` report of `field bench`.
#[derive(Debug, Serialize, Deserialize)]
struct BenchReport {
    k: usize,
    batch: usize,
    /// FAISS's OpenMP threads (0: OpenMP's own choice).
    #[serde(default)]
    threads: u32,
    read_bandwidth_gb_per_s: f64,
    sizes: Vec<SizeResult>,
    targets: Option<Vec<Target>>,
}

fn bench_cmd(a: BenchArgs) -> Result<()> {
    let (dim, k) = (a.dim as usize, a.k as usize);
    let min = Duration::from_millis(a.min_ms);
    let bar = crate::progress::bar(a.vectors.len() as u64 + 1, "field bench");
    let mut sizes = Vec::new();
    for &n in &a.vectors {
        bar.set_message(format!("{n} x {dim}"));
        sizes.push(measure_size(&a, n as usize, min)?);
        bar.inc(1);
    }
    bar.set_message("read bandwidth");
    let largest = a.vectors.iter().max().copied().unwrap_or(1) as usize * dim * 4;
    let bandwidth = read_bandwidth(largest.max(64 << 20), min);
    bar.finish_and_clear();
    if !a.pinned_child {
        pin_compare(&a, &mut sizes)?;
    }
    let targets = targets(&sizes, bandwidth);
    let report = BenchReport { k, batch: 64, threads: a.threads, read_bandwidth_gb_per_s: bandwidth, sizes, targets };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_bench(&report, dim);
    }
    Ok(())
}

/// Measures the same sizes again in a child pinned to one core (`taskset
/// -c 0`) and puts its batched figures beside this process's. Without
/// `taskset` the pinned figures are left out, with a note.
fn pin_compare(a: &BenchArgs, sizes: &mut [SizeResult]) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's path for the pinned run")?;
    let vectors = a.vectors.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let mut cmd = std::process::Command::new("taskset");
    cmd.args(["-c", "0"]).arg(exe).args(["field", "bench", "--pinned-child", "--json", "--vectors", &vectors]);
    for (flag, value) in [("--dim", a.dim), ("--k", a.k), ("--threads", a.threads)] {
        cmd.args([flag, &value.to_string()]);
    }
    cmd.args(["--min-ms", &a.min_ms.to_string(), "--seed", &a.seed.to_string()]);
    let out = match cmd.stderr(std::process::Stdio::null()).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => bail!("the pinned run (taskset -c 0) failed: {}", out.status),
        Err(e) => {
            eprintln!("note: no pinned figures: cannot run taskset ({e})");
            return Ok(());
        }
    };
    let pinned: BenchReport = serde_json::from_slice(&out.stdout).context("the pinned run printed no report")?;
    for (s, p) in sizes.iter_mut().zip(&pinned.sizes) {
        s.pinned_query_batched_qps = Some(p.query_batched_qps);
        s.batched_vs_pinned = Some(s.query_batched_qps / p.query_batched_qps);
    }
    Ok(())
}

/// Injects `n` seeded vectors into a field and into a bare index, then
/// times single and batched queries on both.
fn measure_size(a: &BenchArgs, n: usize, min: Duration) -> Result<SizeResult> {
    let (dim, k) = (a.dim as usize, a.k as usize);
    let faiss_err = |e: faiss::error::Error| anyhow::anyhow!("faiss: {e}");
    let mut s = Stream::derive(a.seed, n as u32, 0, Purpose::Field);
    let data = s.unit_vectors(n, dim);
    let queries = s.unit_vectors(64, dim);
    // Inject: one at a time into the field, and into a bare index.
    let started = Instant::now();
    let mut field = Field::new(dim, FieldConfig { threads: a.threads, ..FieldConfig::default() })?;
    for (i, v) in data.chunks_exact(dim).enumerate() {
        let at = SimTime((i % 12) as u64 * 3600);
        field.inject(&format!("agent-{}", i % 3), &format!("k{i}"), "v", v, 0.5 + (i % 5) as f64 * 0.25, at)?;
    }
    let inject_us = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    let started = Instant::now();
    let mut plain = index_factory(dim as u32, "Flat", MetricType::InnerProduct).map_err(faiss_err)?;
    for v in data.chunks_exact(dim) {
        plain.add(v).map_err(faiss_err)?;
    }
    let plain_inject_us = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    let now = SimTime(12 * 3600);
    let query = |qi: usize| &queries[(qi % 64) * dim..(qi % 64 + 1) * dim];
    let mut qi = 0usize;
    let single = time_per_call(min, || {
        qi += 1;
        field.query_and_reinforce("bench", query(qi - 1), k, now)?;
        Ok(())
    })?;
    let mut qi = 0usize;
    let plain_single = time_per_call(min, || {
        qi += 1;
        plain.search(query(qi - 1), k).map_err(faiss_err)?;
        Ok(())
    })?;
    let batch: Vec<&[f32]> = queries.chunks_exact(dim).collect();
    let batched = time_per_call(min, || {
        field.query_batch(&batch, k, now)?;
        Ok(())
    })? / 64.0;
    let plain_batched = time_per_call(min, || {
        plain.search(&queries, k).map_err(faiss_err)?;
        Ok(())
    })? / 64.0;
    let bytes = (n * dim * 4) as f64;
    Ok(SizeResult {
        vectors: n,
        dim,
        inject_us,
        plain_inject_us,
        query_single_us: single * 1e6,
        query_single_qps: 1.0 / single,
        query_batched_qps: 1.0 / batched,
        plain_scan_single_qps: 1.0 / plain_single,
        plain_scan_batched_qps: 1.0 / plain_batched,
        single_overhead: single / plain_single,
        batched_overhead: batched / plain_batched,
        scanned_gb_per_s_single: bytes / single / 1e9,
        scanned_gb_per_s_batched: bytes / batched / 1e9,
        plain_scanned_gb_per_s_single: bytes / plain_single / 1e9,
        pinned_query_batched_qps: None,
        batched_vs_pinned: None,
    })
}

/// The source plan's targets, when 5000 x 2048 was measured.
fn targets(sizes: &[SizeResult], bandwidth: f64) -> Option<Vec<Target>> {
    let s = sizes.iter().find(|s| s.vectors == 5000 && s.dim == 2048)?;
    let at_least =
        |name: &str, threshold, value| Target { name: name.to_string(), threshold, value, pass: value >= threshold };
    let at_most =
        |name: &str, threshold, value| Target { name: name.to_string(), threshold, value, pass: value <= threshold };
    Some(vec![
        at_least("single queries/s at 5000 x 2048", 400.0, s.query_single_qps),
        at_least("share of read bandwidth, single", 0.8, s.scanned_gb_per_s_single / bandwidth),
        at_least("batched queries/s at 5000 x 2048", 3000.0, s.query_batched_qps),
        at_most("decay + reinforcement overhead over bare FAISS, single", 1.10, s.single_overhead),
        at_most("decay overhead over bare FAISS, batched", 1.10, s.batched_overhead),
    ])
}

fn print_bench(report: &BenchReport, dim: usize) {
    println!(
        "Field vs plain FAISS flat scan, dim {dim}, k {}, batches of 64; single-thread read bandwidth {:.1} GB/s",
        report.k, report.read_bandwidth_gb_per_s
    );
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>8}",
        "vectors", "inject us", "single q/s", "plain q/s", "batch q/s", "plain q/s", "single x", "batch x", "GB/s"
    );
    for s in &report.sizes {
        println!(
            "{:>8} {:>10.1} {:>12.0} {:>12.0} {:>12.0} {:>12.0} {:>9.3} {:>9.3} {:>8.1}",
            s.vectors,
            s.inject_us,
            s.query_single_qps,
            s.plain_scan_single_qps,
            s.query_batched_qps,
            s.plain_scan_batched_qps,
            s.single_overhead,
            s.batched_overhead,
            s.scanned_gb_per_s_single
        );
    }
    let threads = match report.threads {
        0 => "OpenMP's own choice".to_string(),
        n => n.to_string(),
    };
    println!("FAISS OpenMP threads: {threads}");
    for s in &report.sizes {
        if let (Some(p), Some(r)) = (s.pinned_query_batched_qps, s.batched_vs_pinned) {
            println!("  {:>6}: batched q/s pinned to one core {p:.0}; unpinned / pinned {r:.2}", s.vectors);
        }
    }
    if let Some(t) = &report.targets {
        println!("Targets at 5000 x 2048:");
        for c in t {
            let pass = if c.pass { "pass" } else { "FAIL" };
            println!("  {:<55} {:>10.3} (threshold {}) {pass}", c.name, c.value, c.threshold);
        }
    }
}
