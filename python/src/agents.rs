//! The agents' workload from Python (the `agents` feature, which brings
//! FAISS): `field_simulate`, the seeded synthetic mission on the shared
//! memory field that `sim-cli field simulate` runs, by the same library
//! function (`agents::field_sim::simulate`).

use crate::errors;
use crate::wait::{drive, Latest};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What the binding's thread hands back: the result, or the library's
/// error with whether the caller is at fault.
type Simulated = Result<String, (bool, String)>;

/// Runs the field simulation (`sim-cli field simulate`); returns its
/// result as JSON: the field's `digest`, the `operations` that succeeded
/// and were refused, and the `telemetry` report (as `telemetry.json`,
/// which is also written to `out` with the field's files when given).
#[pyfunction]
#[pyo3(signature = (*, seed, agents, phases, ops, dim, topics, k, hours_per_phase, lambda_, permeability, out, threads, progress))]
#[allow(clippy::too_many_arguments)]
fn field_simulate(
    py: Python<'_>,
    seed: u64,
    agents: u32,
    phases: u32,
    ops: u32,
    dim: usize,
    topics: u32,
    k: usize,
    hours_per_phase: f64,
    lambda_: f64,
    permeability: f64,
    out: Option<PathBuf>,
    threads: Option<u32>,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<String> {
    if let Some(dir) = &out {
        if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
            let why =
                format!("out {}: the directory exists and is not empty; choose another or remove it", dir.display());
            return Err(errors::refused(py, false, &why));
        }
    }
    let latest = Arc::new(Latest::default());
    let interrupt = Arc::new(AtomicBool::new(false));
    let spec = agents::field_sim::FieldSimSpec {
        seed,
        agents,
        phases,
        ops,
        dim,
        topics,
        hours_per_phase,
        k,
        field: field::FieldConfig { lambda: lambda_, permeability, ..field::FieldConfig::default() },
        out: out.clone(),
    };
    let events = latest.clone();
    let work = move || -> Simulated {
        let fault = |e: agents::Error| (e.is_caller_fault(), e.to_string());
        if let Some(dir) = &spec.out {
            std::fs::create_dir_all(dir).map_err(|e| (true, format!("cannot create {}: {e}", dir.display())))?;
        }
        let runtime = runs::runtime(threads).map_err(|e| (e.is_caller_fault(), e.to_string()))?;
        let report = |p: u32| actors::progress::Progress::stage(&*events, p, "phases", u64::from(p), u64::from(phases));
        let result = runtime.block_on(agents::field_sim::simulate(&spec, report)).map_err(fault)?;
        let telemetry = serde_json::to_value(&result.telemetry)
            .map_err(|e| (false, format!("cannot encode the telemetry: {e}")))?;
        if let Some(dir) = &spec.out {
            let path = dir.join("telemetry.json");
            let text = serde_json::to_string_pretty(&telemetry).unwrap_or_default();
            std::fs::write(&path, text).map_err(|e| (false, format!("cannot write {}: {e}", path.display())))?;
        }
        let summary = serde_json::json!({
            "digest": result.digest.hex(),
            "operations": {"ok": result.ok, "failed": result.failed},
            "out": spec.out.as_ref().map(|d| d.display().to_string()),
            "telemetry": telemetry,
        });
        Ok(summary.to_string())
    };
    let done = drive(py, &latest, progress.as_ref(), &interrupt, work)?;
    match (done.result, done.interrupted) {
        (Err((true, why)), _) => Err(errors::refused(py, false, &why)),
        (Err((false, why)), _) => Err(errors::internal(py, &format!("field simulation failed: {why}"))),
        (Ok(_), Some(keyboard)) => Err(keyboard),
        (Ok(json), None) => Ok(json),
    }
}

/// Adds the workload's functions to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(field_simulate, m)?)
}
