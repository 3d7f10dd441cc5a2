//! One embedding stage of a turn batch, batched against per-persona, on the
//! modelled provider (40 ms per request, concurrency 4, batch size 64).
//!
//! `cargo bench -p benches --bench embed_batching`
//!
//! IDs read `<strategy>/<cache>/<personas>p <dup>% dup`: 20, 50 and 200
//! personas; 0%, 50% and 90% of texts duplicated; a cold cache (a fresh
//! client each iteration) and a warm one (every text cached). Two
//! baselines: `per-persona` awaits each persona's call in turn, as the
//! original system's loop did (expect it to be slow: its cold cases dominate
//! the run); `per-persona-concurrent` makes the same calls concurrently
//! through the same client (concurrency 4, the same cache), a user's real
//! alternative to batching.
//!
//! The `minilm` group runs the real model (all-MiniLM-L6-v2 on the
//! project's kernels; `bash
//! scripts/fetch-minilm` first, else the group is skipped with a note):
//! - `minilm/run/<strategy>`: a 50-persona, 3-tick panel end to end, cold
//!   cache, batched against both per-persona baselines;
//! - `minilm/batch/<n>`: 64 texts through the inference client at batch
//!   size 1, 8, 32 and 64 (throughput in texts per second);
//! - `minilm/exact/{one-by-one,packed}`: each text alone, and all of them
//!   packed into one pass (what requests run; the same bits), on 32 texts
//!   of mixed length;
//! - `minilm/tokenise`: the tokeniser's share.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::config::Config;
use engine::embed::upstream::ModelledSettings;
use engine::embed::{embed_stage, EmbedKey, EmbedRole, Plan, Strategy};
use providers::{InferenceClient, ModelledProvider, TextCache};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn client() -> InferenceClient {
    let provider =
        Arc::new(ModelledProvider::new(ModelledSettings { latency_ms: 40.0, concurrency: 4, ..Default::default() }));
    // The defaults: batch size 64, concurrency 4, three retries.
    let settings = Config::defaults().raw.embedding;
    InferenceClient::new(provider, settings, Config::defaults().embedding_price, Some(TextCache::in_memory()), 0)
}

/// One request per persona; `dup` percent of them repeat an earlier text.
fn plan(personas: u32, dup: u32) -> Plan {
    let unique = (personas * (100 - dup)).div_ceil(100).max(1);
    Plan::new(
        (0..personas)
            .map(|p| {
                (p, format!("Stimulus {} seen by the panel: a product with several claims and a price.", p % unique))
            })
            .collect(),
    )
}

fn stage(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let key = EmbedKey { role: EmbedRole::Retrieval, model: "local-hash-v1".into(), dim: 256 };
    let mut group = c.benchmark_group("embed_batching");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for personas in [20u32, 50, 200] {
        for dup in [0u32, 50, 90] {
            let plan = plan(personas, dup);
            group.throughput(Throughput::Elements(u64::from(personas)));
            let strategies = [
                (Strategy::Batched, "batched"),
                (Strategy::PerConsumer, "per-persona"),
                (Strategy::PerConsumerConcurrent, "per-persona-concurrent"),
            ];
            for (strategy, sname) in strategies {
                let id = |cache: &str| BenchmarkId::new(format!("{sname}/{cache}"), format!("{personas}p {dup}% dup"));
                group.bench_function(id("cold"), |b| {
                    b.iter(|| rt.block_on(embed_stage(&client(), &key, &plan, strategy)));
                });
                let warm = client();
                rt.block_on(embed_stage(&warm, &key, &plan, Strategy::Batched));
                group.bench_function(id("warm"), |b| {
                    b.iter(|| rt.block_on(embed_stage(&warm, &key, &plan, strategy)));
                });
            }
        }
    }
    group.finish();
}

/// The model directory `scripts/fetch-minilm` fills, if it is there.
fn minilm_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2");
    dir.join("model.safetensors").exists().then_some(dir)
}

/// `n` texts spread evenly over the exactness corpus (single words to past
/// the truncation limit).
fn corpus(n: usize) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/minilm/corpus.txt");
    let text = std::fs::read_to_string(path).expect("fixtures/minilm/corpus.txt");
    let all: Vec<&str> = text.lines().skip(1).filter(|l| !l.is_empty()).collect();
    (0..n).map(|i| all[i * all.len() / n].to_string()).collect()
}

fn minilm(c: &mut Criterion) {
    let Some(dir) = minilm_dir() else {
        eprintln!("minilm: skipped; run `bash scripts/fetch-minilm` to fetch the model");
        return;
    };
    let toml = format!(
        "[embedding]\nprovider = \"minilm\"\n[embedding.minilm]\nmodel_dir = {:?}\n",
        dir.display().to_string()
    );
    let config = engine::config::RawConfig::from_toml(&toml, "bench").and_then(|r| r.resolve("bench")).expect("config");
    let model = providers::embed::minilm::load_shared(&dir).expect("the model loads");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("minilm");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    let strategies = [
        (Strategy::Batched, "batched"),
        (Strategy::PerConsumer, "per-persona"),
        (Strategy::PerConsumerConcurrent, "per-persona-concurrent"),
    ];
    for (strategy, name) in strategies {
        group.throughput(Throughput::Elements(150));
        group.bench_function(BenchmarkId::new("run", name), |b| {
            b.iter(|| {
                // A fresh client per iteration: a cold cache.
                let mut spec = actors::run::RunSpec::defaults(42, 50, 3);
                spec.config = config.clone();
                spec.strategy = strategy;
                let silent = Arc::new(actors::progress::Silent);
                rt.block_on(actors::run::run(spec, silent, false, |_| Ok(()))).expect("the run")
            });
        });
    }
    let texts = corpus(64);
    let key = EmbedKey { role: EmbedRole::Memory, model: config.raw.embedding.model.clone(), dim: 384 };
    for batch in [1usize, 8, 32, 64] {
        let mut settings = config.raw.embedding.clone();
        settings.batch_size = batch;
        let provider = Arc::new(providers::MiniLmProvider::new(model.clone()));
        let client = InferenceClient::new(provider, settings, config.embedding_price, None, 0);
        group.throughput(Throughput::Elements(texts.len() as u64));
        group.bench_function(BenchmarkId::new("batch", batch), |b| {
            b.iter(|| rt.block_on(engine::embed::EmbeddingPort::embed(&client, &key, &texts)).expect("embeds"));
        });
    }
    let short = corpus(32);
    group.throughput(Throughput::Elements(short.len() as u64));
    group.bench_function(BenchmarkId::new("exact", "one-by-one"), |b| {
        b.iter(|| short.iter().map(|t| model.embed_one(t).expect("embeds")).collect::<Vec<_>>());
    });
    group.bench_function(BenchmarkId::new("exact", "packed"), |b| {
        b.iter(|| model.embed_packed(&short).expect("embeds"));
    });
    group.bench_function("tokenise", |b| {
        b.iter(|| short.iter().map(|t| model.token_count(t).expect("tokenises")).sum::<usize>());
    });
    group.finish();
}

criterion_group!(benches, stage, minilm);
criterion_main!(benches);
