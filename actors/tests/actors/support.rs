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

/// A config whose embedding and chat providers are both modelled, on the
/// simulated clock, with seeded server errors (20%), rate limits (10%) and
/// `permanent` failures, retried up to `max_retries` times with millisecond
/// backoffs; `extra` is appended TOML.
pub fn faulty(max_retries: u32, permanent: f64, extra: &str) -> engine::config::Config {
    let faults = format!("max_retries = {max_retries}\nbackoff_base_ms = 1\nbackoff_max_ms = 2\n");
    let modelled =
        format!("clock = \"simulated\"\nserver_error = 0.2\nrate_limited = 0.1\npermanent = {permanent:?}\n");
    config(&format!(
        "[embedding]\nprovider = \"modelled\"\n{faults}[embedding.modelled]\n{modelled}\
         [chat]\nprovider = \"modelled\"\n{faults}[chat.modelled]\n{modelled}{extra}"
    ))
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
