//! The field against a plain FAISS flat scan, side by side on the same
//! vectors: single queries (the field's include reinforcement) and batches
//! of 64, at 1,000 and 5,000 patterns of dimension 2,048.
//!
//! `cargo bench -p benches --bench field` (pin one core with `taskset -c 0`
//! to measure the per-core targets). `sim-cli field bench` prints the same
//! comparison over more sizes, with inject latency and bandwidth.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::clock::SimTime;
use engine::rng::{Purpose, Stream};
use faiss::{index_factory, Index, MetricType};
use field::{Field, FieldConfig};
use std::time::Duration;

const DIM: usize = 2048;
const K: usize = 10;

fn field_vs_plain(c: &mut Criterion) {
    let mut g = c.benchmark_group("field");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for n in [1000usize, 5000] {
        let mut s = Stream::derive(42, n as u32, 0, Purpose::Field);
        let data = s.unit_vectors(n, DIM);
        let queries = s.unit_vectors(64, DIM);
        let mut field = Field::new(DIM, FieldConfig::default()).expect("field");
        for (i, v) in data.chunks_exact(DIM).enumerate() {
            field
                .inject("a", &format!("k{i}"), "v", v, 0.5 + (i % 5) as f64 * 0.25, SimTime((i % 12) as u64 * 3600))
                .expect("inject");
        }
        let mut plain = index_factory(DIM as u32, "Flat", MetricType::InnerProduct).expect("index");
        plain.add(&data).expect("add");
        let now = SimTime(12 * 3600);
        let batch: Vec<&[f32]> = queries.chunks_exact(DIM).collect();
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("{n}x{DIM}/single/field"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % 64;
                field.query_and_reinforce("bench", batch[i], K, now).expect("query")
            })
        });
        g.bench_function(format!("{n}x{DIM}/single/plain"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % 64;
                plain.search(batch[i], K).expect("search")
            })
        });
        g.throughput(Throughput::Elements(64));
        g.bench_function(format!("{n}x{DIM}/batch 64/field"), |b| {
            b.iter(|| field.query_batch(&batch, K, now).expect("batch"))
        });
        g.bench_function(format!("{n}x{DIM}/batch 64/plain"), |b| {
            b.iter(|| plain.search(&queries, K).expect("search"))
        });
    }
    g.finish();
}

criterion_group!(benches, field_vs_plain);
criterion_main!(benches);
