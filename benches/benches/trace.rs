//! The cost of recording a trace, and the speed of replaying one, each
//! measured side by side with a plain run in the same process.
//!
//! `cargo bench -p benches --bench trace`
//!
//! - `trace/record/{off,on}`: the same run without and with `trace.bin`
//!   (every tick framed, checksummed and synced).
//! - `trace/replay/{run,replay}`: the original run against its replay, every
//!   answer served from the trace.
//!
//! Bytes per persona-tick of the trace are printed once at start-up.

use actors::progress::Silent;
use actors::replay::rerun;
use actors::run::{run, RunSpec};
use actors::sink::TraceSink;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::config::Config;
use engine::persona::profile::DEFAULT_TRAITS;
use engine::scenario::BUILTIN;
use engine::store::trace::file::read_trace_file;
use engine::store::trace::record::FORMAT_VERSION;
use engine::store::trace::{Header, Record, TraceWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PERSONAS: u32 = 1_000;
const TICKS: u32 = 3;

fn header() -> Header {
    let cfg = Config::defaults();
    let source = BUILTIN[0].1;
    Header {
        format_version: FORMAT_VERSION,
        engine_version: "bench".into(),
        config_toml: cfg.to_toml(),
        config_hash: cfg.hash(),
        seed: 42,
        personas: PERSONAS,
        ticks: TICKS,
        budget_nano_usd: None,
        strategy: Default::default(),
        scenario_origin: "built-in:default".into(),
        scenario_source: source.into(),
        scenario_hash: blake3::hash(source.as_bytes()).to_hex().to_string(),
        traits_source: DEFAULT_TRAITS.into(),
        traits_hash: blake3::hash(DEFAULT_TRAITS.as_bytes()).to_hex().to_string(),
    }
}

/// One run; with a path, its trace is written as `sim-cli run` writes it.
fn run_once(rt: &tokio::runtime::Runtime, trace: Option<&Path>) {
    let mut sink = trace.map(|p| TraceSink::new(TraceWriter::create(p, &header()).expect("create trace")));
    rt.block_on(run(RunSpec::defaults(42, PERSONAS, TICKS), Arc::new(Silent), false, |report| match sink.as_mut() {
        Some(s) => s.send(Record::Tick(Box::new(report.into_frame()))),
        None => Ok(()),
    }))
    .expect("run succeeds");
    if let Some(s) = sink {
        s.finish().expect("trace written");
    }
}

fn trace(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let dir: PathBuf = std::env::temp_dir().join(format!("sim-bench-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = runs::RunDir::at(&dir).trace();
    run_once(&rt, Some(&path));
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "trace of {PERSONAS} personas x {TICKS} ticks: {size} bytes, {:.0} bytes per persona-tick",
        size as f64 / f64::from(PERSONAS * TICKS)
    );
    let recorded = read_trace_file(&path, false).expect("trace reads");

    let mut group = c.benchmark_group("trace");
    group.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(u64::from(PERSONAS * TICKS)));
    let id = |what: &str| BenchmarkId::new(what.to_string(), format!("{PERSONAS}personas x{TICKS}ticks"));
    group.bench_function(id("record/off"), |b| b.iter(|| run_once(&rt, None)));
    let scratch = dir.join("scratch.bin");
    group.bench_function(id("record/on"), |b| b.iter(|| run_once(&rt, Some(&scratch))));
    group.bench_function(id("replay/run"), |b| b.iter(|| run_once(&rt, None)));
    group.bench_function(id("replay/replay"), |b| {
        b.iter(|| {
            let out = rt.block_on(rerun(&recorded, false, Arc::new(Silent), |_, _| Ok(()))).expect("replays");
            assert!(out.divergence.is_none() && out.cassette.provider_calls == 0);
        })
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, trace);
criterion_main!(benches);
