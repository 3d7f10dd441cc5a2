//! `sim-cli bench embed`: both embedding strategies end to end, cold and
//! warm cache, side by side in one process, against the modelled provider.

#[cfg(feature = "local-models")]
mod gguf;
#[cfg(feature = "local-models")]
mod model;

use crate::prelude::runtime;
use ::experiment::stats::median;
use actors::progress::Silent;
use actors::run::{run, RunSpec};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use engine::config::{Provider, RawConfig};
use engine::digest::Digest;
use engine::embed::Strategy;
use engine::summary::RunSummary;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Batched against per-persona embedding, end to end, cold and warm cache.
    Embed(EmbedBenchArgs),
    /// Chat concurrency, end to end, against the modelled chat provider.
    Chat(ChatBenchArgs),
    /// Whole runs at growing panel sizes: wall time, turns per second, peak memory, bytes per turn.
    Scale(super::scale::ScaleArgs),
    /// A local GGUF model's forward pass alone, as llama.cpp's llama-bench measures it (pp, tg, batched tg).
    #[cfg(feature = "local-models")]
    Gguf(gguf::GgufBenchArgs),
}

/// Options of `sim-cli bench chat`.
#[derive(Debug, Args)]
#[command(after_help = "Runs the panel twice against the modelled chat provider (the scripted replies behind\n\
    a fixed latency per call): once one call at a time, once with --concurrency calls in flight.\n\
    Reports persona-turns per second and the ratio. With --config FILE naming a local model\n\
    (provider \"gguf\"), runs the panel on it three times instead: one sequence at a time with no\n\
    prefix cache, one at a time with the config's cache, and a batch of 8 or more sharing each\n\
    forward pass; prompt and generation tokens per second, the mean sequences per decode pass\n\
    (measured), and the three digests.\n\n\
    Example: sim-cli bench chat --config fixtures/configs/smollm2.toml --personas 5 --ticks 2")]
pub struct ChatBenchArgs {
    /// Personas.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub personas: u32,
    /// Ticks.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub ticks: u32,
    /// Modelled latency per chat call, in milliseconds.
    #[arg(long, default_value_t = 40.0)]
    pub latency_ms: f64,
    /// Calls in flight in the concurrent run.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A local-model config (`[chat] provider = "gguf"`, e.g.
    /// fixtures/configs/smollm2.toml): runs the panel on the model instead,
    /// one sequence at a time (without and with the prefix cache) and in a
    /// batch of 8 or more, and reports prompt and generation tokens per
    /// second and the sequences per decode pass. Give a small
    /// panel (`--personas 5 --ticks 2`): a 135M model makes a few replies a
    /// second.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
}

/// One concurrency of `bench chat`.
#[derive(Debug, Serialize)]
struct ChatRow {
    concurrency: u32,
    ms: f64,
    persona_turns: u64,
    turns_per_second: f64,
    chat_requests: u64,
    digest: Digest,
}

/// The `--json` report of `sim-cli bench chat`.
#[derive(Debug, Serialize)]
struct ChatReport {
    personas: u32,
    ticks: u32,
    latency_ms: f64,
    results: Vec<ChatRow>,
    /// Persona-turns per second at `--concurrency` over those at 1.
    speedup_ratio: f64,
}

fn bench_chat(args: &ChatBenchArgs) -> Result<()> {
    if let Some(path) = &args.config {
        #[cfg(feature = "local-models")]
        return model::bench_model(args, path);
        #[cfg(not(feature = "local-models"))]
        anyhow::bail!(
            "--config {}: bench chat on a local model needs the `local-models` feature, which this build leaves out",
            path.display()
        );
    }
    if !(args.latency_ms.is_finite() && (0.0..=10_000.0).contains(&args.latency_ms)) {
        anyhow::bail!("--latency-ms {}: must be between 0 and 10000", args.latency_ms);
    }
    let rt = runtime(None)?;
    let mut results = Vec::new();
    for concurrency in [1, args.concurrency] {
        let toml = format!(
            "[chat]\nprovider = \"modelled\"\nconcurrency = {concurrency}\n\
             [chat.modelled]\nlatency_ms = {}\nlatency_per_token_us = 0.0\nconcurrency = {concurrency}\n",
            args.latency_ms
        );
        let config = RawConfig::from_toml(&toml, "bench config")?.resolve("bench config")?;
        let mut spec = RunSpec::defaults(args.seed, args.personas, args.ticks);
        spec.config = config;
        eprintln!("bench chat: concurrency {concurrency}");
        let started = Instant::now();
        let s = rt.block_on(run(spec, Arc::new(Silent), false, |_| Ok(())))?.summary;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let turns = s.jobs.total;
        results.push(ChatRow {
            concurrency,
            ms,
            persona_turns: turns,
            turns_per_second: turns as f64 / (ms / 1000.0).max(1e-9),
            chat_requests: s.chat.requests,
            digest: s.digest,
        });
    }
    let speedup_ratio = results[1].turns_per_second / results[0].turns_per_second.max(1e-9);
    let report =
        ChatReport { personas: args.personas, ticks: args.ticks, latency_ms: args.latency_ms, results, speedup_ratio };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "Chat concurrency, end to end: {} personas x {} ticks, modelled provider at {} ms per call\n",
        report.personas, report.ticks, report.latency_ms
    );
    println!("  {:>11} {:>10} {:>8} {:>10} {:>12}", "concurrency", "ms", "turns", "requests", "turns/s");
    for r in &report.results {
        println!(
            "  {:>11} {:>10.1} {:>8} {:>10} {:>12.1}",
            r.concurrency, r.ms, r.persona_turns, r.chat_requests, r.turns_per_second
        );
    }
    println!("\nconcurrency {} / 1: {:.1}x persona-turns per second", args.concurrency, report.speedup_ratio);
    Ok(())
}

/// Options of `sim-cli bench embed`.
#[derive(Debug, Args)]
#[command(after_help = "Two baselines: per-persona makes one port call per text and awaits each in turn,\n\
    as the original system's embedding calls blocked each loop; per-persona-concurrent makes the same\n\
    calls concurrently under the client's concurrency cap, rate limits and cache. Chat uses the scripted model,\n\
    so the difference is the embedding work. Every workload is reported, neutral or not. Repetitions are\n\
    interleaved (each round runs every strategy once, from a different one each round).\n\n\
    Without --config the provider is the modelled one (--latency-ms per request). With --config, its\n\
    [embedding] section decides, e.g. the local MiniLM model:\n\n  \
    sim-cli bench embed --config fixtures/configs/minilm.toml")]
pub struct EmbedBenchArgs {
    /// Personas.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub personas: u32,
    /// Ticks.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub ticks: u32,
    /// Repetitions per strategy and cache condition.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Modelled latency per upstream request, in milliseconds (the modelled provider only).
    #[arg(long, default_value_t = 40.0)]
    pub latency_ms: f64,
    /// A config whose `[embedding]` section names the provider to measure (batch size, concurrency and
    /// model included); the cache settings are the bench's own.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

struct Cell {
    strategy: &'static str,
    cache: &'static str,
    ms: Vec<f64>,
    last: RunSummary,
}

/// One strategy and cache condition, as reported.
#[derive(Debug, Serialize)]
struct Row {
    strategy: &'static str,
    cache: &'static str,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    port_invocations: u64,
    upstream_requests: u64,
    unique_texts_submitted: u64,
    texts_requested: u64,
    cache_hits: u64,
    embedding_tokens: u64,
    billed_nano_usd: u64,
    allocated_nano_usd: u64,
    digest: Digest,
}

/// The workload both strategies ran.
#[derive(Debug, Serialize)]
struct Workload {
    personas: u32,
    ticks: u32,
    reps: u32,
    /// The embedding provider and model measured.
    provider: String,
    model: String,
    /// The modelled provider's latency per request; `null` for another provider.
    latency_ms: Option<f64>,
    batch_size: usize,
    concurrency: usize,
    scenario: &'static str,
    seed: u64,
}

/// The `--json` report of `sim-cli bench embed`.
#[derive(Debug, Serialize)]
struct Report {
    workload: Workload,
    baseline: &'static str,
    results: Vec<Row>,
    /// Sequential per-persona over batched median time, cold cache.
    speedup_ratio: f64,
    /// The same, warm cache.
    warm_speedup_ratio: f64,
    /// Concurrent per-persona over batched median time, cold cache.
    concurrent_speedup_ratio: f64,
    /// The same, warm cache.
    warm_concurrent_speedup_ratio: f64,
}

const BASELINE: &str = "per-persona: one port call per text, no dedup, each awaited in turn (the original blocking \
     loop); per-persona-concurrent: one port call per text, no dedup, issued concurrently under the same client's \
     concurrency cap, rate limits and cache (a user's real alternative to batching)";

/// Runs `sim-cli bench embed`.
pub fn bench(cmd: BenchCommand) -> Result<()> {
    let args = match cmd {
        BenchCommand::Embed(args) => args,
        BenchCommand::Chat(args) => return bench_chat(&args),
        BenchCommand::Scale(args) => return super::scale::scale(&args),
        #[cfg(feature = "local-models")]
        BenchCommand::Gguf(args) => return gguf::bench_gguf(&args),
    };
    if !(args.latency_ms.is_finite() && (0.0..=10_000.0).contains(&args.latency_ms)) {
        anyhow::bail!("--latency-ms {}: must be between 0 and 10000", args.latency_ms);
    }
    let base = base_config(&args)?;
    let cells = measure(&args, &base)?;
    let cell = |s: &str, c: &str| cells.iter().find(|x| x.strategy == s && x.cache == c).map(|x| median(&x.ms));
    let ratio = |baseline: &str, c: &str| match (cell(baseline, c), cell("batched", c)) {
        (Some(p), Some(b)) if b > 0.0 => p / b,
        _ => 0.0,
    };
    let report = Report {
        workload: Workload {
            personas: args.personas,
            ticks: args.ticks,
            reps: args.reps,
            provider: format!("{:?}", base.embedding.provider).to_lowercase(),
            model: base.embedding.model.clone(),
            latency_ms: (base.embedding.provider == Provider::Modelled).then_some(args.latency_ms),
            batch_size: base.embedding.batch_size,
            concurrency: base.embedding.concurrency,
            scenario: "default",
            seed: args.seed,
        },
        baseline: BASELINE,
        results: cells.iter().map(row).collect(),
        speedup_ratio: ratio("per-persona", "cold"),
        warm_speedup_ratio: ratio("per-persona", "warm"),
        concurrent_speedup_ratio: ratio("per-persona-concurrent", "cold"),
        warm_concurrent_speedup_ratio: ratio("per-persona-concurrent", "warm"),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// The configuration measured: `--config`'s, or the modelled provider at
/// `--latency-ms` (batch size 64, concurrency 4).
fn base_config(args: &EmbedBenchArgs) -> Result<RawConfig> {
    if let Some(path) = &args.config {
        let cfg = crate::prelude::load_config(Some(path))?;
        if cfg.raw.embedding.model() == engine::config::EmbeddingModel::Disabled {
            anyhow::bail!("--config {}: embedding.model = \"none\" leaves nothing to measure", path.display());
        }
        return Ok(cfg.raw);
    }
    let toml = format!(
        "[embedding]\nprovider = \"modelled\"\nbatch_size = 64\nconcurrency = 4\n[embedding.modelled]\nlatency_ms = {}\nconcurrency = 4\n",
        args.latency_ms
    );
    Ok(RawConfig::from_toml(&toml, "bench config")?)
}

/// Runs each strategy cold and warm, `reps` times each, in one process, the
/// repetitions interleaved: each round runs every strategy once, starting
/// from a different one each round, so a slow spell of this shared machine
/// falls on all of them alike.
fn measure(args: &EmbedBenchArgs, base: &RawConfig) -> Result<Vec<Cell>> {
    let dir = std::env::temp_dir().join(format!("sim-bench-embed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rt = runtime(None)?;
    let mut cells = Vec::new();
    let strategies = [
        (Strategy::Batched, "batched"),
        (Strategy::PerConsumer, "per-persona"),
        (Strategy::PerConsumerConcurrent, "per-persona-concurrent"),
    ];
    for cache in ["cold", "warm"] {
        let mut configs = Vec::new();
        for (_, name) in strategies {
            let cache_file = dir.join(format!("{name}.cache"));
            let _ = std::fs::remove_file(&cache_file);
            let mut raw = base.clone();
            raw.embedding.cache = true;
            raw.embedding.cache_file = if cache == "warm" { cache_file.display().to_string() } else { String::new() };
            configs.push(raw.resolve("bench config")?);
        }
        let make = |s: usize| {
            let mut spec = RunSpec::defaults(args.seed, args.personas, args.ticks);
            spec.config = configs[s].clone();
            spec.strategy = strategies[s].0;
            spec
        };
        if cache == "warm" {
            // Warm each cache with its strategy's own execution shape.
            for (s, (_, name)) in strategies.iter().enumerate() {
                eprintln!("bench embed: warming the {name} cache");
                rt.block_on(run(make(s), Arc::new(Silent), false, |_| Ok(())))?;
            }
        }
        let first = cells.len();
        for (_, name) in strategies {
            cells.push(Cell { strategy: name, cache, ms: Vec::new(), last: RunSummary::default() });
        }
        for rep in 0..args.reps as usize {
            for turn in 0..strategies.len() {
                let s = (rep + turn) % strategies.len();
                eprintln!("bench embed: {cache} cache, round {} of {}: {}", rep + 1, args.reps, strategies[s].1);
                let started = Instant::now();
                let summary = rt.block_on(run(make(s), Arc::new(Silent), false, |_| Ok(())))?.summary;
                let cell = &mut cells[first + s];
                cell.ms.push(started.elapsed().as_secs_f64() * 1000.0);
                cell.last = summary;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(cells)
}

fn row(c: &Cell) -> Row {
    let s = &c.last;
    Row {
        strategy: c.strategy,
        cache: c.cache,
        median_ms: median(&c.ms),
        min_ms: c.ms.iter().copied().fold(f64::INFINITY, f64::min),
        max_ms: c.ms.iter().copied().fold(0.0, f64::max),
        port_invocations: s.embedding.port_invocations,
        upstream_requests: s.embedding.upstream_requests,
        unique_texts_submitted: s.embedding.unique_texts_submitted,
        texts_requested: s.embedding.texts_requested,
        cache_hits: s.embedding.cache_hits,
        embedding_tokens: s.tokens.embedding,
        billed_nano_usd: s.cost.provider_total_nano_usd,
        allocated_nano_usd: s.cost.allocated_total_nano_usd,
        digest: s.digest,
    }
}

fn print_report(report: &Report) {
    let w = &report.workload;
    let provider = match w.latency_ms {
        Some(ms) => format!("modelled provider at {ms} ms per request"),
        None => format!("{} provider ({})", w.provider, w.model),
    };
    println!(
        "Embedding strategies, end to end: {} personas x {} ticks, {} reps, {provider},\n\
         batch {}, concurrency {}. Baseline: {}.\n",
        w.personas, w.ticks, w.reps, w.batch_size, w.concurrency, report.baseline
    );
    println!(
        "  {:<22} {:<5} {:>10} {:>10} {:>10} {:>8} {:>9} {:>7} {:>6} {:>8} {:>12} {:>12}",
        "strategy",
        "cache",
        "median ms",
        "min ms",
        "max ms",
        "port",
        "upstream",
        "unique",
        "hits",
        "tokens",
        "billed nUSD",
        "alloc nUSD"
    );
    for r in &report.results {
        println!(
            "  {:<22} {:<5} {:>10.1} {:>10.1} {:>10.1} {:>8} {:>9} {:>7} {:>6} {:>8} {:>12} {:>12}",
            r.strategy,
            r.cache,
            r.median_ms,
            r.min_ms,
            r.max_ms,
            r.port_invocations,
            r.upstream_requests,
            r.unique_texts_submitted,
            r.cache_hits,
            r.embedding_tokens,
            r.billed_nano_usd,
            r.allocated_nano_usd
        );
    }
    println!(
        "\nper-persona (sequential) / batched median time: cold {:.2}x, warm {:.2}x",
        report.speedup_ratio, report.warm_speedup_ratio
    );
    println!(
        "per-persona (concurrent) / batched median time: cold {:.2}x, warm {:.2}x",
        report.concurrent_speedup_ratio, report.warm_concurrent_speedup_ratio
    );
}
