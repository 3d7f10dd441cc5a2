//! The field's event log, `field.events`: the magic `SIMFIELD`, a format
//! version, then frames of `len u32 | crc32 u32 | bincode-2 payload`. The
//! first frame is the field's starting state (configuration, team and any
//! initial patterns); each later frame is one phase: its operations in the
//! order they were applied, what each returned, and the field's digest
//! after it. [`replay`] re-applies the phases to a fresh field and checks
//! every step.

use super::pattern::{Field, FieldConfig, FieldError, Pattern};
use super::port::{FieldContexts, FieldSession, PortError, PortOp, PortReply, SharedContextPort, Submitted};
use crate::clock::SimTime;
use crate::digest::Digest;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"SIMFIELD";
const VERSION: u32 = 1;
const MAX_FRAME: usize = 1 << 30;

/// The first event: the field before any phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartEvent {
    /// Dimension.
    pub dim: u64,
    /// Parameters.
    pub config: FieldConfig,
    /// The context's team.
    pub team: Vec<String>,
    /// Patterns present at the start (a context's initial entries).
    pub patterns: Vec<Pattern>,
    /// The field's digest at the start.
    pub digest: Digest,
}

/// An operation as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OpRecord {
    /// An injection.
    Inject {
        /// Key.
        key: String,
        /// Value.
        value: String,
        /// Vector as given.
        vector: Vec<f32>,
        /// Strength as given.
        strength: f64,
    },
    /// A query.
    Query {
        /// Vector as given.
        vector: Vec<f32>,
        /// How many results.
        k: u64,
    },
}

/// One applied operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpEvent {
    /// Agent.
    pub agent: String,
    /// The agent's sequence number.
    pub seq: u64,
    /// The operation.
    pub op: OpRecord,
}

/// What an operation returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OutcomeRecord {
    /// Shared.
    Injected,
    /// Keys and scores, best first.
    Found(Vec<(String, f64)>),
    /// Refused, with the message.
    Failed(String),
}

/// One phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseEvent {
    /// Phase number, from 1.
    pub phase: u64,
    /// Simulated time of the phase.
    pub now: SimTime,
    /// Operations in the order applied, `(agent, seq)`.
    pub ops: Vec<OpEvent>,
    /// Their outcomes, in the same order.
    pub outcomes: Vec<OutcomeRecord>,
    /// The field's digest after the phase.
    pub digest: Digest,
}

impl PhaseEvent {
    /// The record of a phase whose sorted operations returned `outcomes`.
    pub fn new(
        phase: u64,
        now: SimTime,
        ops: &[&Submitted],
        outcomes: &[&Result<PortReply, PortError>],
        digest: Digest,
    ) -> Self {
        let ops = ops
            .iter()
            .map(|s| OpEvent {
                agent: s.agent.clone(),
                seq: s.seq,
                op: match &s.op {
                    PortOp::Inject(e) => OpRecord::Inject {
                        key: e.key.clone(),
                        value: e.value.clone(),
                        vector: e.vector.clone(),
                        strength: e.strength,
                    },
                    PortOp::Query { vector, k } => OpRecord::Query { vector: vector.clone(), k: *k as u64 },
                },
            })
            .collect();
        PhaseEvent { phase, now, ops, outcomes: outcomes.iter().map(|r| outcome_record(r)).collect(), digest }
    }
}

fn outcome_record(r: &Result<PortReply, PortError>) -> OutcomeRecord {
    match r {
        Ok(PortReply::Injected) => OutcomeRecord::Injected,
        Ok(PortReply::Found(found)) => OutcomeRecord::Found(found.iter().map(|f| (f.key.clone(), f.score)).collect()),
        Err(e) => OutcomeRecord::Failed(e.to_string()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum FieldEvent {
    Start(Box<StartEvent>),
    Phase(Box<PhaseEvent>),
}

fn files_err(path: &Path, cause: String) -> FieldError {
    FieldError::Files { path: path.display().to_string(), cause }
}

/// Writes a context's events, one synced frame per phase.
pub struct EventLog {
    file: File,
    path: PathBuf,
    started: bool,
}

impl EventLog {
    /// Creates the log at `path` (refusing to overwrite one).
    pub fn create(path: &Path) -> Result<EventLog, FieldError> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| files_err(path, e.to_string()))?;
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&VERSION.to_le_bytes());
        file.write_all(&head).map_err(|e| files_err(path, e.to_string()))?;
        Ok(EventLog { file, path: path.to_path_buf(), started: false })
    }

    /// A log writing to an open file (tests of write failures).
    #[cfg(test)]
    pub(crate) fn on_file(file: File, path: &Path) -> EventLog {
        EventLog { file, path: path.to_path_buf(), started: true }
    }

    fn write(&mut self, event: &FieldEvent) -> Result<(), FieldError> {
        let payload = bincode::serde::encode_to_vec(event, bincode::config::standard())
            .map_err(|e| files_err(&self.path, e.to_string()))?;
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        self.file
            .write_all(&frame)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| files_err(&self.path, e.to_string()))
    }

    /// Writes the starting state (once).
    pub(crate) fn start(&mut self, team: &[String], field: &Field) -> Result<(), FieldError> {
        if self.started {
            return Err(files_err(&self.path, "the log already has a starting state".into()));
        }
        self.started = true;
        let start = StartEvent {
            dim: field.dim() as u64,
            config: field.config().clone(),
            team: team.to_vec(),
            patterns: field.patterns().values().cloned().collect(),
            digest: field.digest(),
        };
        self.write(&FieldEvent::Start(Box::new(start)))
    }

    /// Appends a phase.
    pub fn append(&mut self, phase: &PhaseEvent) -> Result<(), FieldError> {
        self.write(&FieldEvent::Phase(Box::new(phase.clone())))
    }
}

/// A log read back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadLog {
    /// The starting state.
    pub start: StartEvent,
    /// The phases.
    pub phases: Vec<PhaseEvent>,
}

/// Reads a log, failing on any damage with the frame and offset.
pub fn read_log(path: &Path) -> Result<ReadLog, FieldError> {
    let bytes = std::fs::read(path).map_err(|e| files_err(path, e.to_string()))?;
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(files_err(path, "not a field event log (bad magic bytes)".into()));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return Err(files_err(
            path,
            format!("format version {version} is not supported (this engine reads {VERSION})"),
        ));
    }
    let (mut at, mut frame) = (12usize, 0u64);
    let (mut start, mut phases) = (None, Vec::new());
    while at < bytes.len() {
        let bad = |cause: &str| files_err(path, format!("frame {frame} at byte {at}: {cause}"));
        let head = bytes.get(at..at + 8).ok_or_else(|| bad("truncated frame head"))?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME {
            return Err(bad("frame length over the limit"));
        }
        let payload = bytes.get(at + 8..at + 8 + len).ok_or_else(|| bad("truncated frame"))?;
        if crc32fast::hash(payload) != crc {
            return Err(bad("checksum mismatch"));
        }
        let limit = bincode::config::standard().with_limit::<{ 1 << 30 }>();
        let (event, _): (FieldEvent, usize) =
            bincode::serde::decode_from_slice(payload, limit).map_err(|e| bad(&format!("cannot decode: {e}")))?;
        match (event, frame) {
            (FieldEvent::Start(s), 0) => start = Some(*s),
            (FieldEvent::Phase(p), f) if f > 0 && p.phase == f => phases.push(*p),
            (FieldEvent::Phase(p), f) if f > 0 => {
                return Err(bad(&format!("phase {} where phase {f} was expected", p.phase)))
            }
            (FieldEvent::Phase(_) | FieldEvent::Start(_), _) => {
                return Err(bad("the starting state must be the first frame, and only it"))
            }
        }
        at += 8 + len;
        frame += 1;
    }
    let start = start.ok_or_else(|| files_err(path, "the log has no starting state".into()))?;
    Ok(ReadLog { start, phases })
}

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
                    OpRecord::Inject { key, value, vector, strength } => PortOp::Inject(super::Entry {
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
