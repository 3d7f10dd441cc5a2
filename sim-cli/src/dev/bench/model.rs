//! `sim-cli bench chat --config FILE`: a panel on a local GGUF model three
//! times, side by side in one process: one sequence at a time with no
//! prefix cache, one sequence at a time with the config's cache, and a
//! batch of eight or more (the config's `batch` when larger) sharing each
//! forward pass. Prompt and generation tokens per second, the mean number
//! of sequences that shared a decode pass (measured), what the prefix
//! cache served, and the three digests (neither the cache nor the batch
//! changes a byte).

use super::ChatBenchArgs;
use crate::prelude::{load_config, runtime};
use actors::progress::Silent;
use actors::run::{run, RunSpec};
use anyhow::{bail, Result};
use engine::config::{ChatProvider, Config};
use engine::digest::Digest;
use providers::chat::gguf::throughput;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// One setting of the model bench.
#[derive(Debug, Serialize)]
struct ModelRow {
    setting: String,
    /// `[chat.gguf] batch`: the most sequences in one pass.
    batch: usize,
    /// The mean number of sequences in the passes that generated a token.
    sequences: f64,
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
    /// Of the generated tokens, those generated in passes that held a full
    /// batch (`batch` sequences).
    full_batch_generated_tokens: u64,
    /// Their tokens per second: the aggregate rate with the batch full.
    full_batch_generated_tokens_per_second: f64,
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
    /// Whole-run wall time of the single uncached stream over the batched one.
    speedup_ratio: f64,
    /// Generated tokens per second of the batch over the single cached stream's.
    batch_generation_ratio: f64,
    /// The same in the batch's full passes alone (`batch` sequences in each).
    full_batch_generation_ratio: f64,
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
        batch: g.batch,
        sequences: if d.decode_passes == 0 { 0.0 } else { d.decode_sequences as f64 / d.decode_passes as f64 },
        prefix_cache_mib: g.prefix_cache_mib,
        wall_ms,
        chat_requests: s.chat.requests,
        prompt_tokens: s.tokens.chat_input,
        prompt_tokens_run: d.prompt_tokens,
        prompt_tokens_per_second: per_second(d.prompt_tokens, d.prompt_ns),
        generated_tokens: d.generated_tokens,
        generated_tokens_per_second: per_second(d.generated_tokens, d.generate_ns),
        full_batch_generated_tokens: d.full_generated_tokens,
        full_batch_generated_tokens_per_second: per_second(d.full_generated_tokens, d.full_generate_ns),
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
    let with = |batch: usize, cache: bool| {
        let mut c = config.clone();
        c.raw.chat.gguf.batch = batch;
        if !cache {
            c.raw.chat.gguf.prefix_cache_mib = 0;
        }
        c
    };
    let uncached = measure(with(1, false), "one sequence, no prefix cache", args)?;
    let single = measure(with(1, true), "one sequence", args)?;
    let n = config.raw.chat.gguf.batch.max(8);
    let batched = measure(with(n, true), &format!("batch of {n}"), args)?;
    let speedup_ratio = uncached.wall_ms / batched.wall_ms.max(1e-9);
    let batch_generation_ratio = batched.generated_tokens_per_second / single.generated_tokens_per_second.max(1e-9);
    let full_batch_generation_ratio =
        batched.full_batch_generated_tokens_per_second / single.generated_tokens_per_second.max(1e-9);
    let same_digest = uncached.digest == single.digest && single.digest == batched.digest;
    let report = ModelReport {
        model: config.raw.chat.model.clone(),
        personas: args.personas,
        ticks: args.ticks,
        results: vec![uncached, single, batched],
        speedup_ratio,
        batch_generation_ratio,
        full_batch_generation_ratio,
        same_digest,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !same_digest {
        bail!("the prefix cache or the batch changed the replies: the digests differ (a bug)");
    }
    Ok(())
}

fn print_report(r: &ModelReport) {
    println!("{} on the CPU: {} personas x {} ticks, the same panel three times\n", r.model, r.personas, r.ticks);
    println!(
        "  {:<30} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9}",
        "setting", "wall s", "requests", "prompt", "run", "prompt/s", "generated", "gen/s", "seqs", "cached"
    );
    for row in &r.results {
        println!(
            "  {:<30} {:>7.1} {:>8} {:>9} {:>9} {:>9.1} {:>9} {:>9.1} {:>6.2} {:>9}",
            row.setting,
            row.wall_ms / 1000.0,
            row.chat_requests,
            row.prompt_tokens,
            row.prompt_tokens_run,
            row.prompt_tokens_per_second,
            row.generated_tokens,
            row.generated_tokens_per_second,
            row.sequences,
            row.cached_tokens
        );
    }
    println!(
        "\nbatched / one uncached sequence: {:.2}x faster end to end; generation {:.2}x the single cached \
         sequence's; digests {}",
        r.speedup_ratio,
        r.batch_generation_ratio,
        if r.same_digest { "equal (neither the cache nor the batch changes a byte)" } else { "DIFFER" }
    );
    if let Some(b) = r.results.last() {
        let share = b.full_batch_generated_tokens as f64 / (b.generated_tokens.max(1)) as f64;
        println!(
            "with the batch full ({} sequences in a pass): {:.1} generated tokens/s, {:.2}x the single cached \
             sequence's ({:.0}% of the batch's generated tokens)",
            b.batch,
            b.full_batch_generated_tokens_per_second,
            r.full_batch_generation_ratio,
            100.0 * share
        );
    }
    println!("(seqs: the mean number of sequences that shared a pass that generated a token, as measured)");
}
