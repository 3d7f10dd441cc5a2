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
    sim-cli bench scale --personas 10000,100000,1000000 --ticks 3 --threads 2 --json\n  \
    sim-cli bench scale --personas 100000,1000000 --shards 1,2,4\n\n\
    With --shards, each panel also runs split into K shards (`run --shard I/K`), one shard after\n\
    another, each measured alone as a node would run it, then `merge`d (measured too); the merged\n\
    digest is checked against the unsharded run's."
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
    /// Shard counts: each panel runs as K shards, one after another, then merged (1: unsharded).
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = "K,...",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub shards: Vec<u32>,
    /// Internal: measure one run of this many personas and print its row as JSON.
    #[arg(long, hide = true, value_name = "N")]
    pub measure_one: Option<u32>,
    /// Internal: with --measure-one, run shard I/K into --run-dir and keep it.
    #[arg(long, hide = true, value_name = "I/K", requires = "run_dir")]
    pub shard_of: Option<String>,
    /// Internal: measure the merge of the K shards in --run-dir and print its row as JSON.
    #[arg(long, hide = true, value_name = "K", requires = "run_dir")]
    pub measure_merge: Option<u32>,
    /// Internal: the run directory of --shard-of and --measure-merge.
    #[arg(long, hide = true, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
}

/// One panel size (or one shard of it), measured.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    personas: u32,
    /// Shards the panel was split into (1: the whole panel in one run).
    #[serde(default = "one")]
    shards: u32,
    /// Which shard this row measures, when split.
    #[serde(default)]
    shard: Option<u32>,
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
    /// Unique texts the run's embedding stages submitted.
    #[serde(default)]
    unique_texts: u64,
    digest: String,
}

fn one() -> u32 {
    1
}

/// The merge of a panel's shards, measured.
#[derive(Debug, Serialize, Deserialize)]
struct MergeRow {
    personas: u32,
    shards: u32,
    wall_seconds: f64,
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    merged_bytes: u64,
    /// Unique texts the shards submitted together (dedup across shards is lost).
    unique_texts: u64,
    digest: String,
    /// The merged digest is the unsharded run's (`None`: no unsharded run measured).
    same_digest: Option<bool>,
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct Report {
    ticks: u32,
    threads: Option<u32>,
    seed: u64,
    results: Vec<Row>,
    merges: Vec<MergeRow>,
}

/// Runs `sim-cli bench scale`.
pub fn scale(args: &ScaleArgs) -> Result<()> {
    let scratch = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
    if let (Some(k), Some(dir)) = (args.measure_merge, &args.run_dir) {
        println!("{}", serde_json::to_string(&measure_merge(k, dir)?)?);
        return Ok(());
    }
    if let Some(n) = args.measure_one {
        let row = measure_one(args, n, &scratch)?;
        println!("{}", serde_json::to_string(&row)?);
        return Ok(());
    }
    let exe = std::env::current_exe().context("cannot find this program's path to run the children")?;
    let (mut results, mut merges) = (Vec::new(), Vec::new());
    for &n in &args.personas {
        let mut whole = None;
        for &k in &args.shards {
            if k > n {
                bail!("--shards {k}: more shards than the {n} personas");
            }
            if k == 1 {
                eprintln!("bench scale: {n} personas x {} ticks", args.ticks);
                let row: Row = measure(args, &exe, &scratch, &[n.to_string().as_str()], &[])?;
                whole = Some(row.digest.clone());
                results.push(row);
                continue;
            }
            let base = scratch.join(format!("sim-bench-scale-{}-{n}-of-{k}", std::process::id()));
            let measured = (|| {
                for i in 0..k {
                    eprintln!("bench scale: {n} personas x {} ticks, shard {i} of {k}", args.ticks);
                    let (spec, dir) = (format!("{i}/{k}"), base.join(format!("shard-{i}")));
                    let extra =
                        ["--shard-of", spec.as_str(), "--run-dir", &dir.display().to_string()].map(String::from);
                    results.push(measure(args, &exe, &scratch, &[n.to_string().as_str()], &extra)?);
                }
                eprintln!("bench scale: merging {k} shards of {n} personas");
                let extra = ["--run-dir".to_string(), base.display().to_string()];
                let mut m: MergeRow =
                    measure_child(args, &exe, &scratch, &["--measure-merge", &k.to_string()], &extra)?;
                m.personas = n;
                m.same_digest = whole.as_ref().map(|d| *d == m.digest);
                merges.push(m);
                anyhow::Ok(())
            })();
            let _ = std::fs::remove_dir_all(&base);
            measured?;
        }
    }
    let report = Report { ticks: args.ticks, threads: args.threads, seed: args.seed, results, merges };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_report(&report);
    Ok(())
}

fn print_report(report: &Report) {
    println!("Scale: {} ticks, seed {}, threads {}", report.ticks, report.seed, thread_label(report.threads));
    println!(
        "  {:>9} {:>7} {:>8} {:>10} {:>7} {:>12} {:>9} {:>11} {:>10} {:>12}",
        "personas",
        "shard",
        "wall s",
        "turns/s",
        "CPU s",
        "turns/CPU s",
        "peak RSS",
        "B/persona",
        "trace B/t",
        "output B/t"
    );
    for r in &report.results {
        let shard = r.shard.map_or("whole".to_string(), |i| format!("{i}/{}", r.shards));
        println!(
            "  {:>9} {:>7} {:>8.2} {:>10.0} {:>7.2} {:>12.0} {:>9} {:>11.0} {:>10.0} {:>12.0}",
            r.personas,
            shard,
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
    if !report.merges.is_empty() {
        println!(
            "  merges:\n  {:>9} {:>7} {:>8} {:>7} {:>9} {:>10} {:>12}  digest",
            "personas", "shards", "wall s", "CPU s", "peak RSS", "merged MB", "unique texts"
        );
    }
    for m in &report.merges {
        let same = match m.same_digest {
            Some(true) => "the unsharded run's",
            Some(false) => "DIFFERS from the unsharded run's",
            None => "(no unsharded run to compare)",
        };
        println!(
            "  {:>9} {:>7} {:>8.2} {:>7.2} {:>9} {:>10.1} {:>12}  {}… {same}",
            m.personas,
            m.shards,
            m.wall_seconds,
            m.cpu_seconds,
            gib(m.peak_rss_bytes),
            m.merged_bytes as f64 / 1e6,
            m.unique_texts,
            &m.digest[..m.digest.len().min(12)]
        );
    }
}

/// Runs this command again as `--measure-one N` (with `extra`) and reads its row.
fn measure(args: &ScaleArgs, exe: &Path, scratch: &Path, n: &[&str], extra: &[String]) -> Result<Row> {
    let mut first = vec!["--measure-one"];
    first.extend_from_slice(n);
    measure_child(args, exe, scratch, &first, extra)
}

/// Runs `bench scale FIRST... EXTRA...` as an intermediate process (its
/// only child the measured one) and reads the JSON row it prints.
fn measure_child<T: serde::de::DeserializeOwned>(
    args: &ScaleArgs,
    exe: &Path,
    scratch: &Path,
    first: &[&str],
    extra: &[String],
) -> Result<T> {
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "scale"]).args(first).args(["--ticks", &args.ticks.to_string()]);
    cmd.args(["--seed", &args.seed.to_string(), "--scratch"]).arg(scratch).args(extra);
    if let Some(t) = args.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let out = cmd.stderr(Stdio::inherit()).output().context("cannot start the measuring process")?;
    if !out.status.success() {
        bail!("measuring {} failed ({})", first.join(" "), out.status);
    }
    serde_json::from_slice(&out.stdout).context("the measuring process printed no row")
}

/// Merges the `k` shards under `dir` as this process's only child, and
/// measures it.
fn measure_merge(k: u32, dir: &Path) -> Result<MergeRow> {
    let exe = std::env::current_exe().context("cannot find this program's path to run the child")?;
    let merged = dir.join("merged");
    let mut cmd = Command::new(exe);
    cmd.args(["merge", "--json", "--quiet", "--out"]).arg(&merged);
    cmd.args((0..k).map(|i| dir.join(format!("shard-{i}"))));
    let started = Instant::now();
    let out = cmd.stderr(Stdio::inherit()).output().context("cannot start the merge")?;
    let wall = started.elapsed().as_secs_f64();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("cannot read the child's resource usage")?;
    if !out.status.success() {
        bail!("the merge exited with {}", out.status);
    }
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).context("the merge printed no summary")?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(MergeRow {
        personas: 0,
        shards: k,
        wall_seconds: wall,
        cpu_seconds: seconds(usage.user_time()) + seconds(usage.system_time()),
        peak_rss_bytes: u64::try_from(usage.max_rss()).unwrap_or(0) * 1024,
        merged_bytes: dir_bytes(&merged)?,
        unique_texts: summary["embedding"]["unique_texts_submitted"].as_u64().unwrap_or(0),
        digest: summary["digest"].as_str().unwrap_or_default().to_string(),
        same_digest: None,
    })
}

fn thread_label(t: Option<u32>) -> String {
    t.map_or_else(|| "one per core".to_string(), |t| t.to_string())
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Runs one panel as this process's only child and measures it.
fn measure_one(args: &ScaleArgs, personas: u32, scratch: &Path) -> Result<Row> {
    let keep = args.shard_of.is_some();
    let dir = match &args.run_dir {
        Some(d) if keep => d.clone(),
        _ => scratch.join(format!("sim-bench-scale-{}-{personas}", std::process::id())),
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let exe = std::env::current_exe().context("cannot find this program's path to run the child")?;
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--personas", &personas.to_string(), "--ticks", &args.ticks.to_string()]);
    if let Some(s) = &args.shard_of {
        cmd.args(["--shard", s]);
    }
    let shard = args.shard_of.as_deref().map(|s| engine::shard::Shard::parse(s, |_| None)).transpose();
    let shard = shard.map_err(|e| anyhow::anyhow!("--shard-of {e}"))?.map(|(s, _)| s);
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
        let trace_bytes = std::fs::metadata(runs::RunDir::at(&dir).trace()).map(|m| m.len()).unwrap_or(0);
        let output_bytes = dir_bytes(&dir)?;
        // Linux reports ru_maxrss in KiB.
        let peak = u64::try_from(usage.max_rss()).unwrap_or(0) * 1024;
        let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        let (user, system) = (seconds(usage.user_time()), seconds(usage.system_time()));
        let ran = shard.map_or(personas, |s| s.personas(personas).len() as u32);
        Ok(Row {
            personas,
            shards: shard.map_or(1, |s| s.count),
            shard: shard.map(|s| s.index),
            ticks: args.ticks,
            persona_turns: turns,
            wall_seconds: wall,
            turns_per_second: turns as f64 / wall.max(1e-9),
            cpu_seconds: user + system,
            system_seconds: system,
            turns_per_cpu_second: turns as f64 / (user + system).max(1e-9),
            peak_rss_bytes: peak,
            rss_bytes_per_persona: peak as f64 / f64::from(ran),
            trace_bytes,
            trace_bytes_per_turn: trace_bytes as f64 / turns as f64,
            output_bytes,
            output_bytes_per_turn: output_bytes as f64 / turns as f64,
            unique_texts: summary["embedding"]["unique_texts_submitted"].as_u64().unwrap_or(0),
            digest: summary["digest"].as_str().unwrap_or_default().to_string(),
        })
    })();
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
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
