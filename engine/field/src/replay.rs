//! Replay of a field event log: the logged phases re-applied to a fresh
//! field through the field adapter, step by step, each checked against the
//! digest and outcomes the log recorded.

use crate::field::{Field, FieldError};
use crate::log::{files_err, read_log, OpRecord};
use crate::port::{outcome_record, FieldContexts, FieldSession, PortOp, SharedContextPort, Submitted};
use engine::digest::Digest;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One replayed phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayedPhase {
    /// Phase number.
    pub phase: u64,
    /// Simulated hours.
    pub hours: f64,
    /// Injections and queries in it.
    pub injects: usize,
    /// Queries.
    pub queries: usize,
    /// The digest recorded.
    pub recorded: Digest,
    /// The digest replay reached.
    pub replayed: Digest,
    /// Whether digests and every outcome agree.
    pub matches: bool,
    /// Stability after the phase.
    pub stability: f64,
    /// Live patterns after the phase.
    pub live: usize,
}

/// Re-applies a log's phases to a fresh field, step by step; returns the
/// steps and the field with its rebuilt telemetry.
pub fn replay(path: &Path) -> Result<(Vec<ReplayedPhase>, FieldSession), FieldError> {
    let log = read_log(path)?;
    let s = &log.start;
    let field = Field::from_patterns(s.dim as usize, s.config.clone(), s.patterns.clone())?;
    if field.digest() != s.digest {
        return Err(files_err(path, "the starting patterns do not match their recorded digest".into()));
    }
    let mut port = FieldContexts::new(s.dim as usize, s.config.clone());
    let ctx = port.adopt(&s.team, field);
    let mut steps = Vec::with_capacity(log.phases.len());
    for p in &log.phases {
        let ops: Vec<Submitted> = p
            .ops
            .iter()
            .map(|o| Submitted {
                agent: o.agent.clone(),
                seq: o.seq,
                op: match &o.op {
                    OpRecord::Inject { key, value, vector, strength } => PortOp::Inject(crate::Entry {
                        key: key.clone(),
                        value: value.clone(),
                        vector: vector.clone(),
                        strength: *strength,
                    }),
                    OpRecord::Query { vector, k } => PortOp::Query { vector: vector.clone(), k: *k as usize },
                },
            })
            .collect();
        let replies = port.phase(ctx, &ops, p.now).map_err(|e| files_err(path, format!("phase {}: {e}", p.phase)))?;
        let session = port.session(ctx).ok_or_else(|| files_err(path, "the replayed context vanished".into()))?;
        let replayed = session.field.digest();
        let outcomes_match = replies.iter().map(outcome_record).eq(p.outcomes.iter().cloned());
        let point = session.telemetry.timeline().last().cloned();
        steps.push(ReplayedPhase {
            phase: p.phase,
            hours: p.now.0 as f64 / 3600.0,
            injects: ops.iter().filter(|o| matches!(o.op, PortOp::Inject(_))).count(),
            queries: ops.iter().filter(|o| matches!(o.op, PortOp::Query { .. })).count(),
            recorded: p.digest,
            replayed,
            matches: replayed == p.digest && outcomes_match,
            stability: point.as_ref().map_or(0.0, |t| t.stability.stability),
            live: point.as_ref().map_or(0, |t| t.live),
        });
    }
    let session = port.take(ctx).ok_or_else(|| files_err(path, "the replayed context vanished".into()))?;
    Ok((steps, session))
}
