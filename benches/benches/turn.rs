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
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("turn");
    group.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(2));
    // One worker thread gives the per-core figure; all cores the machine's.
    let mut thread_counts = vec![1];
    if cores > 1 {
        thread_counts.push(cores);
    }
    for threads in thread_counts {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().expect("runtime");
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
    }
    group.finish();
}

criterion_group!(benches, turns);
criterion_main!(benches);
