//! `sim-cli bench chat --config FILE`: a panel on a local GGUF model, as a
//! single stream with no prefix cache and then as configured, side by side
//! in one process: prompt and generation tokens per second, what the
//! prefix cache served, and the two digests (the cache changes no byte).

use super::ChatBenchArgs;
use crate::prelude::{load_config, runtime};
use actors::progress::Silent;
use actors::run::{run, RunSpec};
use anyhow::{bail, Result};
use engine::config::{ChatProvider, Config};
use engine::digest::Digest;
use providers::gguf::throughput;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// One setting of the model bench.
#[derive(Debug, Serialize)]
struct ModelRow {
    setting: String,
    workers: usize,
    prefix_cache_mib: u64,
    wall_ms: f64,
    chat_requests: u64,
    /// Prompt tokens billed (the real tokenizer's count).
    prompt_tokens: u64,
    /// Of those, run through the model here (the rest came from the cache).
    prompt_tokens_run: u64,
    prompt_tokens_per_second: f64,
    generated_tokens: u64,
    generated_tokens_per_second: f64,
    cache_hits: u64,
    cached_tokens: u64,
    digest: Digest,
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct ModelReport {
    model: String,
    personas: u32,
    ticks: u32,
    results: Vec<ModelRow>,
    /// Whole-run wall time of the single uncached stream over the configured one.
    speedup_ratio: f64,
    same_digest: bool,
}

fn per_second(tokens: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        tokens as f64 / (ns as f64 / 1e9)
    }
}

fn measure(config: Config, setting: &str, args: &ChatBenchArgs) -> Result<ModelRow> {
    let g = config.raw.chat.gguf.clone();
    let rt = runtime(None)?;
    let mut spec = RunSpec::defaults(args.seed, args.personas, args.ticks);
    spec.config = config;
    eprintln!("bench chat: {setting}");
    let before = throughput();
    let started = Instant::now();
    let s = rt.block_on(run(spec, Arc::new(Silent), false, |_| Ok(())))?.summary;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let after = throughput();
    let d = after.since(&before);
    Ok(ModelRow {
        setting: setting.into(),
        workers: g.workers,
        prefix_cache_mib: g.prefix_cache_mib,
        wall_ms,
        chat_requests: s.chat.requests,
        prompt_tokens: s.tokens.chat_input,
        prompt_tokens_run: d.prompt_tokens,
        prompt_tokens_per_second: per_second(d.prompt_tokens, d.prompt_ns),
        generated_tokens: d.generated_tokens,
        generated_tokens_per_second: per_second(d.generated_tokens, d.generate_ns),
        cache_hits: d.cache_hits,
        cached_tokens: d.cached_tokens,
        digest: s.digest,
    })
}

/// The bench of `--config FILE`.
pub fn bench_model(args: &ChatBenchArgs, path: &Path) -> Result<()> {
    let config = load_config(Some(&path.to_path_buf()))?;
    if config.raw.chat.provider != ChatProvider::Gguf {
        bail!(
            "--config {}: bench chat --config measures a local model (chat.provider = \"gguf\"); \
             without --config it benches the modelled provider",
            path.display()
        );
    }
    let mut single = config.clone();
    single.raw.chat.gguf.workers = 1;
    single.raw.chat.gguf.prefix_cache_mib = 0;
    let uncached = measure(single, "one stream, no prefix cache", args)?;
    let configured = measure(config.clone(), "as configured", args)?;
    let speedup_ratio = uncached.wall_ms / configured.wall_ms.max(1e-9);
    let same_digest = uncached.digest == configured.digest;
    let report = ModelReport {
        model: config.raw.chat.model.clone(),
        personas: args.personas,
        ticks: args.ticks,
        results: vec![uncached, configured],
        speedup_ratio,
        same_digest,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !same_digest {
        bail!("the prefix cache changed the replies: the two digests differ (a bug)");
    }
    Ok(())
}

fn print_report(r: &ModelReport) {
    println!("{} on the CPU: {} personas x {} ticks, the same panel twice\n", r.model, r.personas, r.ticks);
    println!(
        "  {:<28} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "setting", "wall s", "requests", "prompt", "run", "prompt/s", "generated", "gen/s", "cached"
    );
    for row in &r.results {
        println!(
            "  {:<28} {:>9.1} {:>8} {:>9} {:>9} {:>9.1} {:>9} {:>9.1} {:>9}",
            row.setting,
            row.wall_ms / 1000.0,
            row.chat_requests,
            row.prompt_tokens,
            row.prompt_tokens_run,
            row.prompt_tokens_per_second,
            row.generated_tokens,
            row.generated_tokens_per_second,
            row.cached_tokens
        );
    }
    println!(
        "\nas configured / one uncached stream: {:.2}x faster end to end; digests {}",
        r.speedup_ratio,
        if r.same_digest { "equal (the cache changes no byte)" } else { "DIFFER" }
    );
}
