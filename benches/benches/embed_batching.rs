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
    let settings = Config::defaults().raw.embedding.client_settings();
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

criterion_group!(benches, stage);
criterion_main!(benches);
