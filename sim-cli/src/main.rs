//! `sim-cli`: run persona panels on the simulation engine.

mod commands;
mod dev;
mod output;
mod preflight;
mod prelude;
mod progress;

use clap::{Parser, Subcommand};
use commands::{embed, export, inspect, intent, memory, merge, replay, report, run, validate};
#[cfg(feature = "agents")]
use commands::{experiment, field};
use dev::{bench, check, soak};

/// mimalloc: the run allocates many short strings on several threads, where
/// glibc malloc spent a fifth of the time (see the `turn` bench).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

/// Deterministic, actor-based simulation of LLM personas with memory.
///
/// Every command runs on embedded defaults: a deterministic local embedder
/// and a scripted persona chat model. No network, no keys, and no live model
/// is ever called unless you configure one.
#[derive(Parser)]
#[command(name = "sim-cli", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Draw no progress bar (bars are drawn only when stderr is a terminal anyway).
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run a persona panel through the ticks of a scenario.
    Run(run::RunArgs),
    /// Re-run a recorded run from its trace, with no model calls, and compare digests tick by tick.
    Replay(replay::ReplayArgs),
    /// Join the shards of one panel (`run --shard I/N`) into one run with the unsharded digest.
    Merge(merge::MergeArgs),
    /// Show a recorded run: its header, each tick, one tick or one persona over time.
    Inspect(inspect::InspectArgs),
    /// Memory consolidation in a recorded run: status, energy, promotions, health, inspect, predict, test memories, consolidate.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// Measure: `bench embed` compares batched with per-persona embedding end to end.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The shared memory field: simulate a mission on the field actor, replay its log, telemetry, benchmarks.
    #[cfg(feature = "agents")]
    #[command(subcommand)]
    Field(field::FieldCommand),
    /// Export a recorded run's outcomes: JSON lines (as outcomes.jsonl) or CSV with persona traits.
    #[command(subcommand)]
    Export(export::ExportCommand),
    /// Write a self-contained HTML report (and report.json) of a recorded run, from its trace alone.
    Report(report::ReportArgs),
    /// Look at an embedding provider: vectors and cosines of texts, and the paraphrase sanity check.
    #[command(subcommand)]
    Embed(embed::EmbedCommand),
    /// Purchase intent by semantic similarity rating: `intent score` rates texts against the anchor sets.
    #[command(subcommand)]
    Intent(intent::IntentCommand),
    /// Compare a run's purchase-intent distributions with a reference survey (CSV of 1-5 counts per stimulus).
    CompareIntent(intent::CompareArgs),
    /// Check a panel against real people: ask survey questions of personas built from respondents, score the answers.
    Validate(validate::ValidateArgs),
    /// The controlled experiment: a researcher, an analyst and a writer sharing a field versus passing messages.
    #[cfg(feature = "agents")]
    Experiment(experiment::ExperimentArgs),
    /// Run the same configuration at 1 thread and at the machine's thread count: `ok`, or the first divergence.
    CheckDeterminism(check::CheckArgs),
    /// Test the engine's promises by campaign: determinism, kills, provider faults, a full disk, bad input.
    Soak(soak::SoakArgs),
    /// List the built-in scenarios.
    Scenarios,
    /// `field` and `experiment` in a build without the `agents` feature.
    #[cfg(not(feature = "agents"))]
    #[command(name = "field", hide = true, aliases = ["experiment"], disable_help_flag = true)]
    Absent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    progress::set_quiet(cli.quiet);
    init_logging();
    no_huge_pages();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Replay(args) => replay::replay(args),
        Command::Merge(args) => merge::merge(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::Bench(cmd) => bench::bench(cmd),
        Command::Memory(cmd) => memory::memory(cmd),
        #[cfg(feature = "agents")]
        Command::Field(cmd) => field::field(cmd),
        #[cfg(feature = "agents")]
        Command::Experiment(args) => experiment::experiment(args),
        Command::Embed(cmd) => embed::embed(cmd),
        Command::Report(args) => report::report(&args),
        Command::Export(cmd) => export::export(cmd),
        Command::Intent(cmd) => intent::intent(cmd),
        Command::CompareIntent(args) => intent::compare(&args),
        Command::Validate(args) => validate::validate(args),
        Command::CheckDeterminism(args) => check::check(args),
        Command::Soak(args) => soak::soak(args),
        #[cfg(not(feature = "agents"))]
        Command::Absent { .. } => Err(anyhow::anyhow!(
            "this sim-cli was built without the `agents` feature, so it has no `field` or `experiment` command: \
             rebuild it with the default features (`cargo install --locked --path sim-cli`)"
        )),
        Command::Scenarios => {
            output::list_scenarios();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(&e),
    }
}

/// Prints an error and picks the exit code: 1 when the input is at fault
/// (or the cause is not known to be internal), 70 (`EX_SOFTWARE`) when the
/// engine says the fault is its own or its environment's (an actor that
/// failed, a disk that refused a write).
fn report(e: &anyhow::Error) -> ExitCode {
    let internal = e.chain().find_map(caller_fault) == Some(false);
    if internal {
        eprintln!("internal error (not a problem with your input): {}", chain(e));
        ExitCode::from(70)
    } else {
        eprintln!("error: {}", chain(e));
        ExitCode::FAILURE
    }
}

/// Whether an error of the libraries' own types is the caller's fault
/// (`None` for any other error).
fn caller_fault(e: &(dyn std::error::Error + 'static)) -> Option<bool> {
    if let Some(e) = e.downcast_ref::<runs::Error>() {
        return Some(e.is_caller_fault());
    }
    if let Some(e) = e.downcast_ref::<actors::Error>() {
        return Some(e.is_caller_fault());
    }
    #[cfg(feature = "agents")]
    if let Some(e) = e.downcast_ref::<agents::Error>() {
        return Some(e.is_caller_fault());
    }
    None
}

/// An error with its causes, `: `-separated, each said once: a cause whose
/// text the message already holds (some errors quote their source) is
/// left out.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Turns transparent huge pages off for this process (and the runs it
/// starts), unless `MIMALLOC_ALLOW_THP` is set, in which case the allocator
/// decides as that variable says. A run's memory is touched sparsely, a
/// persona's records here and there: with huge pages, each first touch has
/// the kernel zero two megabytes, and on this project's reference machine
/// that zeroing was a fifth to a third of a large run's CPU time. Without
/// them a 1,000,000 x 3 run took 31 s instead of 40 to 43 s, at the same
/// peak memory (docs/BENCHMARKS.md). It changes no output.
fn no_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::debug!("transparent huge pages stay as the system sets them: {e}");
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings). A panic
/// inside an actor is logged as an error rather than printed raw, because
/// the engine turns it into a job failure and carries on.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();
    std::panic::set_hook(Box::new(|info| {
        // Output piped into a reader that stopped early (`| head`) is not an
        // error worth a report.
        if info.to_string().contains("Broken pipe") {
            std::process::exit(0);
        }
        tracing::error!("panic: {info}")
    }));
}

#[cfg(test)]
mod tests {
    /// The kernel reports the flag the start-up sets (or leaves it, when
    /// the allocator's own variable is set).
    #[test]
    fn start_up_turns_transparent_huge_pages_off() {
        super::no_huge_pages();
        let off = nix::sys::prctl::get_thp_disable().expect("prctl answers on Linux");
        assert_eq!(off, std::env::var_os("MIMALLOC_ALLOW_THP").is_none());
    }
}
