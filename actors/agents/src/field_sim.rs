//! A seeded synthetic mission on the field actor, for `sim-cli field
//! simulate`: agents inject findings near a few topic centres and query
//! for them, concurrently, one phase per simulated step. Each agent draws
//! from its own stream (seed, phase, agent), so the field's evolution is a
//! function of the seed alone, whatever the thread count.

use crate::field::{FieldHandle, OpReply};
use crate::{Error, Result};
use ::field::{Entry, FieldConfig, PortOp, PortReply, Submitted, TelemetryReport};
use engine::clock::SimTime;
use engine::digest::Digest;
use engine::rng::{Purpose, Stream};
use std::path::PathBuf;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct FieldSimSpec {
    /// Seed.
    pub seed: u64,
    /// Agents (three are named researcher, analyst, writer).
    pub agents: u32,
    /// Phases.
    pub phases: u32,
    /// Operations per agent per phase.
    pub ops: u32,
    /// Vector dimension.
    pub dim: usize,
    /// Topic centres the vectors cluster around.
    pub topics: u32,
    /// Simulated hours between phases.
    pub hours_per_phase: f64,
    /// Results per query.
    pub k: usize,
    /// Field parameters.
    pub field: FieldConfig,
    /// Where to write `field.events` and the saved field, if anywhere.
    pub out: Option<PathBuf>,
}

/// What the simulation produced.
#[derive(Debug, Clone)]
pub struct FieldSimResult {
    /// The field's digest at the end.
    pub digest: Digest,
    /// Operations that succeeded.
    pub ok: u64,
    /// Operations refused.
    pub failed: u64,
    /// Telemetry at the end.
    pub telemetry: TelemetryReport,
}

/// The agents' names.
pub fn agent_names(n: u32) -> Vec<String> {
    if n == 3 {
        return ["researcher", "analyst", "writer"].map(String::from).to_vec();
    }
    (0..n).map(|i| format!("agent-{i}")).collect()
}

fn near(s: &mut Stream, centre: &[f32], spread: f64) -> Vec<f32> {
    centre.iter().map(|x| x + (spread * s.normal()) as f32).collect()
}

/// The simulated time of phase `p`.
fn at(spec: &FieldSimSpec, p: u32) -> SimTime {
    SimTime((f64::from(p) * spec.hours_per_phase * 3600.0).round() as u64)
}

/// Runs the simulation; `progress` is called after each phase.
pub async fn simulate(spec: &FieldSimSpec, mut progress: impl FnMut(u32)) -> Result<FieldSimResult> {
    if spec.agents == 0 || spec.phases == 0 || spec.topics == 0 || spec.dim == 0 || spec.k == 0 {
        return Err(Error::invalid("field simulation", "agents, phases, topics, dim and k must be at least 1"));
    }
    if !(spec.hours_per_phase.is_finite() && spec.hours_per_phase > 0.0) {
        return Err(Error::invalid(
            "field simulation",
            format!("hours per phase must be a finite number > 0, got {}", spec.hours_per_phase),
        ));
    }
    let mut s = Stream::derive(spec.seed, 0, 0, Purpose::Field);
    let centres: Vec<Vec<f32>> = (0..spec.topics).map(|_| (0..spec.dim).map(|_| s.normal() as f32).collect()).collect();
    let (field, join) = FieldHandle::spawn(spec.dim, spec.field.clone()).await?;
    let result = drive(spec, &field, &centres, &mut progress).await;
    field.stop();
    let _ = join.await;
    result
}

async fn drive(
    spec: &FieldSimSpec,
    field: &FieldHandle,
    centres: &[Vec<f32>],
    progress: &mut impl FnMut(u32),
) -> Result<FieldSimResult> {
    let names = agent_names(spec.agents);
    let log = spec.out.as_ref().map(|d| d.join("field.events"));
    let ctx = field.create(names.clone(), Vec::new(), SimTime(0), log).await?;
    let (mut ok, mut failed) = (0u64, 0u64);
    for p in 1..=spec.phases {
        let mut tasks = Vec::with_capacity(names.len());
        for (a, name) in names.iter().enumerate() {
            let (field, name, spec, centres) = (field.clone(), name.clone(), spec.clone(), centres.to_vec());
            tasks.push(tokio::spawn(async move {
                let mut s = Stream::derive(spec.seed, p, a as u64, Purpose::Field);
                let mut receivers = Vec::new();
                for seq in 0..u64::from(spec.ops) {
                    let centre = &centres[s.below(centres.len())];
                    let op = if s.below(2) == 0 {
                        let key = format!("{name}/p{p}/{seq}");
                        PortOp::Inject(Entry {
                            value: format!("finding {key}"),
                            key,
                            vector: near(&mut s, centre, 0.3),
                            strength: 0.5 + s.unit(),
                        })
                    } else {
                        PortOp::Query { vector: near(&mut s, centre, 0.5), k: spec.k }
                    };
                    receivers.push(field.submit(ctx, Submitted { agent: name.clone(), seq, op })?);
                }
                Ok::<_, Error>(receivers)
            }));
        }
        let mut receivers = Vec::new();
        for t in tasks {
            receivers.extend(t.await.map_err(|e| Error::FieldActor(format!("an agent task failed: {e}")))??);
        }
        field.end_phase(ctx, at(spec, p)).await?;
        for rx in receivers {
            let reply: OpReply = rx.await.map_err(|_| Error::FieldActor("a submission was never answered".into()))?;
            match reply {
                Ok(PortReply::Injected | PortReply::Found(_)) => ok += 1,
                Err(_) => failed += 1,
            }
        }
        progress(p);
    }
    let end = at(spec, spec.phases);
    let (digest, telemetry) = field.report(ctx, end).await?;
    if let Some(e) = &telemetry.log_error {
        return Err(Error::FieldActor(format!("the simulation ran, but {e}")));
    }
    if let Some(dir) = &spec.out {
        field.save(ctx, dir.clone()).await?;
    }
    field.destroy(ctx).await?;
    Ok(FieldSimResult { digest, ok, failed, telemetry })
}
