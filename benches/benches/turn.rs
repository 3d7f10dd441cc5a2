//! Persona-turns per second on the embedded defaults, end to end through the
//! actors: spawning the panel, three ticks of the default scenario (so
//! retrieval runs over real memories from tick 2), and tear-down.
//!
//! `cargo bench -p benches --bench turn`

use actors::progress::Silent;
use actors::run::{run, RunSpec};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::sync::Arc;
use std::time::Duration;

const TICKS: u32 = 3;

/// The same allocator as `sim-cli`, so the bench measures what users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn turns(c: &mut Criterion) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("turn");
    group.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(2));
    for personas in [50u32, 1_000, 10_000] {
        group.throughput(Throughput::Elements(u64::from(personas * TICKS)));
        let id = BenchmarkId::new(format!("{threads}threads"), format!("{personas}personas x{TICKS}ticks"));
        group.bench_with_input(id, &personas, |b, &personas| {
            b.iter(|| {
                let spec = RunSpec::defaults(42, personas, TICKS);
                let result = rt.block_on(run(spec, Arc::new(Silent), false, |_| Ok(()))).expect("run succeeds");
                assert_eq!(result.summary.jobs.total, u64::from(personas * TICKS));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, turns);
criterion_main!(benches);
