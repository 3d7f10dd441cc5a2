//! Helpers to run a simulation in-process.

use actors::coordinator::TickReport;
use actors::progress::Silent;
use actors::run::{run, RunResult, RunSpec};
use engine::config::RawConfig;
use std::sync::Arc;

/// Resolves a config from TOML text.
pub fn config(toml: &str) -> engine::config::Config {
    RawConfig::from_toml(toml, "test.toml").and_then(|r| r.resolve("test.toml")).expect("valid test config")
}

/// Runs `spec` on a runtime with `threads` workers; returns the result and
/// every tick report.
pub fn run_with(spec: RunSpec, threads: usize) -> (RunResult, Vec<TickReport>) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().expect("runtime");
    let mut reports = Vec::new();
    let result = rt
        .block_on(run(spec, Arc::new(Silent), true, |r| {
            reports.push(r);
            Ok(())
        }))
        .expect("run succeeds");
    (result, reports)
}
