//! `sim-cli bench scale`: whole runs at growing panel sizes, each in a
//! child process of this binary, measured from outside: wall time, peak
//! resident memory, and the bytes the run leaves on disk.
//!
//! Peak memory and CPU time come from the kernel's accounting of the child
//! (`getrusage(RUSAGE_CHILDREN)`): a run has worker threads and a trace
//! writer beside them, so its turns per CPU-second, not per wall-second,
//! are its throughput per core. That figure is the largest child's, not
//! the last one's, so each size is measured through its own intermediate
//! process (this command again, with `--measure-one`) whose only child is
//! the run.

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Options of `sim-cli bench scale`.
#[derive(Debug, Args)]
#[command(
    after_help = "Runs `sim-cli run --personas N --ticks T` for each N on the embedded defaults, one child process\n\
    at a time, into a scratch directory it deletes afterwards. Reports wall time, persona-turns per\n\
    second, peak resident memory (the kernel's high-water mark of the child), memory per persona, and\n\
    trace and output bytes per persona-turn, and the CPU time the run used (user plus system, so its\n\
    persona-turns per CPU-second are its throughput per core, whatever its threads). Examples:\n\n  \
    sim-cli bench scale\n  \
    sim-cli bench scale --personas 10000,100000,1000000 --ticks 3 --threads 2 --json"
)]
pub struct ScaleArgs {
    /// Panel sizes, comma-separated, each 1 to 1,000,000.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000", value_name = "N,...",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub personas: Vec<u32>,
    /// Ticks per run.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub ticks: u32,
    /// Worker threads of each run (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Where the runs are written (each deleted once measured). Default: the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Internal: measure one run of this many personas and print its row as JSON.
    #[arg(long, hide = true, value_name = "N")]
    pub measure_one: Option<u32>,
}

/// One panel size, measured.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    personas: u32,
    ticks: u32,
    persona_turns: u64,
    wall_seconds: f64,
    turns_per_second: f64,
    /// User plus system CPU time of the run.
    cpu_seconds: f64,
    /// Of which in the kernel (mostly zeroing the pages it first touches).
    system_seconds: f64,
    turns_per_cpu_second: f64,
    peak_rss_bytes: u64,
    rss_bytes_per_persona: f64,
    trace_bytes: u64,
    trace_bytes_per_turn: f64,
    output_bytes: u64,
    output_bytes_per_turn: f64,
    digest: String,
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct Report {
    ticks: u32,
    threads: Option<u32>,
    seed: u64,
    results: Vec<Row>,
}

/// Runs `sim-cli bench scale`.
pub fn scale(args: &ScaleArgs) -> Result<()> {
    let scratch = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
    if let Some(n) = args.measure_one {
        let row = measure_one(args, n, &scratch)?;
        println!("{}", serde_json::to_string(&row)?);
        return Ok(());
    }
    let exe = std::env::current_exe().context("cannot find this program's path to run the children")?;
    let mut results = Vec::new();
    for &n in &args.personas {
        eprintln!("bench scale: {n} personas x {} ticks", args.ticks);
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "scale", "--measure-one", &n.to_string(), "--ticks", &args.ticks.to_string()]);
        cmd.args(["--seed", &args.seed.to_string(), "--scratch"]).arg(&scratch);
        if let Some(t) = args.threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        let out = cmd.stderr(Stdio::inherit()).output().context("cannot start the measuring process")?;
        if !out.status.success() {
            bail!("the run of {n} personas failed ({})", out.status);
        }
        let row: Row = serde_json::from_slice(&out.stdout).context("the measuring process printed no row")?;
        results.push(row);
    }
    let report = Report { ticks: args.ticks, threads: args.threads, seed: args.seed, results };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("Scale: {} ticks, seed {}, threads {}", report.ticks, report.seed, thread_label(report.threads));
    println!(
        "  {:>9} {:>8} {:>10} {:>7} {:>12} {:>9} {:>11} {:>10} {:>12}",
        "personas", "wall s", "turns/s", "CPU s", "turns/CPU s", "peak RSS", "B/persona", "trace B/t", "output B/t"
    );
    for r in &report.results {
        println!(
            "  {:>9} {:>8.2} {:>10.0} {:>7.2} {:>12.0} {:>9} {:>11.0} {:>10.0} {:>12.0}",
            r.personas,
            r.wall_seconds,
            r.turns_per_second,
            r.cpu_seconds,
            r.turns_per_cpu_second,
            gib(r.peak_rss_bytes),
            r.rss_bytes_per_persona,
            r.trace_bytes_per_turn,
            r.output_bytes_per_turn
        );
    }
    Ok(())
}

fn thread_label(t: Option<u32>) -> String {
    t.map_or_else(|| "one per core".to_string(), |t| t.to_string())
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Runs one panel as this process's only child and measures it.
fn measure_one(args: &ScaleArgs, personas: u32, scratch: &Path) -> Result<Row> {
    let dir = scratch.join(format!("sim-bench-scale-{}-{personas}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let exe = std::env::current_exe().context("cannot find this program's path to run the child")?;
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--personas", &personas.to_string(), "--ticks", &args.ticks.to_string()]);
    cmd.args(["--seed", &args.seed.to_string(), "--json", "--quiet", "--out"]).arg(&dir);
    if let Some(t) = args.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let started = Instant::now();
    let out = cmd.stderr(Stdio::inherit()).output().context("cannot start the run")?;
    let wall = started.elapsed().as_secs_f64();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("cannot read the child's resource usage")?;
    let measured = (|| {
        if !out.status.success() {
            bail!("the run exited with {}", out.status);
        }
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).context("the run printed no summary")?;
        let turns = summary["jobs"]["total"].as_u64().unwrap_or(0).max(1);
        let trace_bytes = std::fs::metadata(dir.join("trace.bin")).map(|m| m.len()).unwrap_or(0);
        let output_bytes = dir_bytes(&dir)?;
        // Linux reports ru_maxrss in KiB.
        let peak = u64::try_from(usage.max_rss()).unwrap_or(0) * 1024;
        let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        let (user, system) = (seconds(usage.user_time()), seconds(usage.system_time()));
        Ok(Row {
            personas,
            ticks: args.ticks,
            persona_turns: turns,
            wall_seconds: wall,
            turns_per_second: turns as f64 / wall.max(1e-9),
            cpu_seconds: user + system,
            system_seconds: system,
            turns_per_cpu_second: turns as f64 / (user + system).max(1e-9),
            peak_rss_bytes: peak,
            rss_bytes_per_persona: peak as f64 / f64::from(personas),
            trace_bytes,
            trace_bytes_per_turn: trace_bytes as f64 / turns as f64,
            output_bytes,
            output_bytes_per_turn: output_bytes as f64 / turns as f64,
            digest: summary["digest"].as_str().unwrap_or_default().to_string(),
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

/// The bytes of every file in `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}
