//! `sim-cli soak`: the guarantees of docs/GUIDE.md tested by campaign. Each campaign
//! drives child processes of this binary (`sim-cli run`, `--resume`,
//! `replay`) in a scratch directory and checks their traces from outside:
//!
//! - **determinism**: seeds over the built-in scenarios and a generated one
//!   per seed, on local, faulty modelled embedding and faulty modelled chat
//!   providers, each run at 1 and 2 threads; a mismatch names the first
//!   divergence;
//! - **kills**: SIGKILL at seeded moments (inside a tick's frames, and
//!   during `--resume`), then resume until finished: the committed prefix is
//!   never lost and the digests equal the uninterrupted run's;
//! - **faults**: provider faults at each rate, audited from the trace (one
//!   outcome per job, every billed attempt once, allocation = billing, the
//!   budget held);
//! - **disk**: a disk that fills up mid-run: a clear error, a valid prefix,
//!   and a resume that matches;
//! - **inputs**: seeded mutations of scenarios, configs and memory
//!   operations: each is a named error or valid, never a panic;
//! - **shards**: per seed, a panel in 1 to 8 shards, one shard killed and
//!   its command run again, then `merge`: the unsharded run's digest.
//!
//! A failure prints the command that reproduces it.

mod inputs;
mod kills;
mod runs;
mod shards;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The campaigns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Campaign {
    /// Digests at 1 and 2 threads over seeds, scenarios and providers.
    Determinism,
    /// SIGKILL and resume.
    Kills,
    /// Provider faults, audited.
    Faults,
    /// A disk that fills up mid-run.
    Disk,
    /// Mutated scenarios, configs and memory operations.
    Inputs,
    /// Panels in shards, a shard killed, merged.
    Shards,
}

/// Options of `sim-cli soak`.
#[derive(Debug, Args)]
#[command(
    after_help = "Runs child processes of this binary in a scratch directory (deleted afterwards unless a case\n\
    failed, or with --keep) and prints a table; --json prints the same as one object. Exits non-zero\n\
    when any check failed, with the command that reproduces each failure.\n\n\
    Examples:\n  \
    sim-cli soak                                         the short campaign (as CI runs it)\n  \
    sim-cli soak --seeds 200 --kills 100 --faults 0.1,0.2,0.3 --fault-seeds 10 --mutations 10000 --shard-seeds 200\n  \
    (the full campaign)\n  \
    sim-cli soak --only kills --kills 20 --first-seed 7   one campaign, other seeds"
)]
pub struct SoakArgs {
    /// Seeds of the determinism campaign (each run at 1 and 2 threads).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub seeds: u32,
    /// SIGKILLs of the kill campaign.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub kills: u32,
    /// Fault rates (probability per attempt, split over 429, 5xx, timeouts and permanent errors).
    #[arg(long, value_delimiter = ',', default_value = "0.3", value_name = "P,...")]
    pub faults: Vec<f64>,
    /// Seeds per fault rate (each: faults on embeddings, on chat, on both, and on both under a budget).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub fault_seeds: u32,
    /// Panels of the shards campaign (each split into 1 to 8 shards, one shard killed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub shard_seeds: u32,
    /// Mutated inputs of the input campaign.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub mutations: u32,
    /// The first seed; campaigns draw everything from it on.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Stop starting new cases after this many minutes (each campaign gets its share); the
    /// report says how many ran.
    #[arg(long, value_name = "M")]
    pub minutes: Option<f64>,
    /// Run only these campaigns (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CAMPAIGN,...")]
    pub only: Vec<Campaign>,
    /// Personas of each kill-campaign run (large enough that a kill lands inside a run).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub kill_personas: u32,
    /// Where the children write (a new or empty directory; one it created is deleted after a
    /// passing soak). Default: a new directory under the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Keep the scratch directory.
    #[arg(long)]
    pub keep: bool,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A check that failed, with the command that shows it again.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The campaign.
    pub campaign: &'static str,
    /// What went wrong.
    pub what: String,
    /// A command that reproduces it.
    pub reproduce: String,
}

/// Everything a soak found.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Determinism campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub determinism: Option<runs::DeterminismReport>,
    /// Kill campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kills: Option<kills::KillReport>,
    /// Fault campaign, one row per rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<Vec<runs::FaultRow>>,
    /// Full-disk campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<kills::DiskReport>,
    /// Input campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<inputs::InputReport>,
    /// Shards campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<shards::ShardsReport>,
    /// Every failed check.
    pub failures: Vec<Failure>,
    /// Wall time.
    pub wall_seconds: f64,
    /// No check failed.
    pub pass: bool,
}

/// The child processes' world: the binary, the scratch directory and the
/// deadline.
pub struct Soak {
    exe: PathBuf,
    scratch: PathBuf,
    deadline: Option<Instant>,
    failures: Vec<Failure>,
}

impl Soak {
    /// True once the time budget is spent.
    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// `sim-cli ARGS` in the scratch directory, quiet, waited for.
    fn sim(&self, args: &[String]) -> Result<Output> {
        self.command(args).output().with_context(|| format!("cannot start {}", self.exe.display()))
    }

    /// `sim-cli ARGS` in the scratch directory, quiet, not yet started.
    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("--quiet").args(args).current_dir(&self.scratch).stdin(Stdio::null());
        c
    }

    /// A path in the scratch directory.
    fn path(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    fn fail(&mut self, campaign: &'static str, what: String, reproduce: String) {
        self.failures.push(Failure { campaign, what, reproduce });
    }
}

/// The digests a `run --json` printed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
struct Digests {
    digest: String,
    full_digest: String,
}

/// What a finished child run said: its summary, or why it failed. A panic
/// (exit 101) is always a failure.
fn summary_of(out: &Output) -> std::result::Result<serde_json::Value, String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(101) || stderr.contains("panicked") || stderr.contains("panic:") {
        return Err(format!("panicked: {}", stderr.trim()));
    }
    if !out.status.success() {
        return Err(format!("exited with {}: {}", out.status, stderr.trim()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("printed no JSON summary ({e})"))
}

fn digests_of(summary: &serde_json::Value) -> Option<Digests> {
    serde_json::from_value(summary.clone()).ok()
}

/// A command line as a user would type it.
fn shell(args: &[String]) -> String {
    let quote = |a: &String| {
        if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:".contains(c)) {
            a.clone()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("sim-cli".to_string()).chain(args.iter().map(quote)).collect::<Vec<_>>().join(" ")
}

/// Turns string literals into owned arguments.
fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Runs `sim-cli soak`.
pub fn soak(a: SoakArgs) -> Result<()> {
    if let Some(r) = a.faults.iter().find(|r| !(r.is_finite() && (0.0..=0.9).contains(*r))) {
        bail!("--faults {r}: each rate must be between 0 and 0.9 (a probability per attempt)");
    }
    if let Some(m) = a.minutes.filter(|m| !(m.is_finite() && *m > 0.0)) {
        bail!("--minutes {m}: must be a positive number");
    }
    let exe = std::env::current_exe().context("cannot find this program's own binary")?;
    let scratch = match &a.scratch {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("sim-soak-{}", std::process::id())),
    };
    let made = !scratch.exists();
    if scratch.exists() && std::fs::read_dir(&scratch).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("--scratch {}: exists and is not empty (the soak never writes over files)", scratch.display());
    }
    std::fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    let started = Instant::now();
    let on = |c: Campaign| a.only.is_empty() || a.only.contains(&c);
    let campaigns =
        [Campaign::Determinism, Campaign::Kills, Campaign::Faults, Campaign::Disk, Campaign::Inputs, Campaign::Shards];
    let total = campaigns.iter().filter(|c| on(**c)).count().max(1) as f64;
    let share = a.minutes.map(|m| Duration::from_secs_f64(m * 60.0 / total));
    let mut s = Soak { exe, scratch: scratch.clone(), deadline: None, failures: Vec::new() };
    let mut report = Report::default();
    for c in campaigns.into_iter().filter(|c| on(*c)) {
        s.deadline = share.map(|d| Instant::now() + d);
        eprintln!("soak: {} ...", format!("{c:?}").to_lowercase());
        match c {
            Campaign::Determinism => report.determinism = Some(runs::determinism(&mut s, a.first_seed, a.seeds)?),
            Campaign::Kills => report.kills = Some(kills::kills(&mut s, a.first_seed, a.kills, a.kill_personas)?),
            Campaign::Faults => report.faults = Some(runs::faults(&mut s, a.first_seed, &a.faults, a.fault_seeds)?),
            Campaign::Disk => report.disk = Some(kills::disk(&mut s, a.first_seed)?),
            Campaign::Inputs => report.inputs = Some(inputs::inputs(&mut s, a.first_seed, a.mutations)?),
            Campaign::Shards => {
                report.shards = Some(shards::shards(&mut s, a.first_seed, a.shard_seeds, a.kill_personas)?);
            }
        }
    }
    report.failures = std::mem::take(&mut s.failures);
    report.wall_seconds = started.elapsed().as_secs_f64();
    report.pass = report.failures.is_empty();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    let keep = a.keep || !report.pass;
    if made && !keep {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    if !report.pass {
        bail!(
            "{} check(s) failed; the runs are kept in {} (each failure above names its command)",
            report.failures.len(),
            scratch.display()
        );
    }
    Ok(())
}

fn print_report(r: &Report) {
    println!("{:<12} {:<74} result", "campaign", "what was checked");
    let row = |name: &str, what: String, ok: bool| {
        println!("{name:<12} {what:<74} {}", if ok { "ok" } else { "FAILED" });
    };
    let failed = |c: &str| r.failures.iter().any(|f| f.campaign == c);
    if let Some(d) = &r.determinism {
        let what = format!("{} seeds x threads 1,2 ({} runs): {} divergences", d.seeds, d.runs, d.divergences);
        row("determinism", what, !failed("determinism"));
    }
    if let Some(k) = &r.kills {
        let what = format!(
            "{} kills ({} mid-tick, {} mid-frame, {} in resume): {} lost, {} mismatches",
            k.kills, k.mid_tick, k.mid_frame, k.during_resume, k.lost_committed_ticks, k.digest_mismatches
        );
        row("kills", what, !failed("kills"));
    }
    for f in r.faults.iter().flatten() {
        let what = format!(
            "faults {:.0}%: {} runs, {} attempts, {} conservation errors, {} missing",
            f.rate * 100.0,
            f.runs,
            f.chat_attempts + f.embed_attempts,
            f.conservation_errors,
            f.missing_outcomes
        );
        row("faults", what, f.conservation_errors == 0 && f.missing_outcomes == 0 && f.other_errors == 0);
    }
    if let Some(d) = &r.disk {
        for c in &d.cases {
            let what = format!(
                "{}: full at {} B, {} ticks kept, resume matches: {}",
                c.how, c.at_bytes, c.kept_ticks, c.resumed
            );
            row("disk", what, c.ok);
        }
        if let Some(why) = &d.tmpfs_skipped {
            println!("{:<12} tmpfs: skipped ({why})", "disk");
        }
    }
    if let Some(i) = &r.inputs {
        let what = format!(
            "{} mutated inputs: {} errors, {} valid ({} run), {} panics",
            i.mutated, i.errors, i.valid, i.ran, i.panics
        );
        row("inputs", what, i.panics == 0 && !failed("inputs"));
    }
    if let Some(s) = &r.shards {
        let what = format!(
            "{} panels in {} shards, {} kills ({} mid-run): {} merged digests differ",
            s.seeds, s.shards, s.kills, s.mid_run, s.mismatches
        );
        row("shards", what, !failed("shards"));
    }
    for f in &r.failures {
        println!("\nFAILED ({}): {}\n  reproduce: {}", f.campaign, f.what, f.reproduce);
    }
    println!("\n{} in {:.1} s", if r.pass { "all checks passed" } else { "some checks FAILED" }, r.wall_seconds);
}

/// Removes a case's directory once it passed.
fn clean(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}
