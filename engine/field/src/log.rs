//! The field's event log, `field.events`: a [`engine::store::frame`] container
//! (magic `SIMFIELD`) of events encoded by [`engine::store::codec`]. The first
//! frame is the field's starting state (configuration, team and any
//! initial patterns); each later frame is one phase: its operations in the
//! order they were applied, what each returned, and the field's digest
//! after it. The field adapter ([`crate::port::FieldContexts`]) writes
//! it; [`crate::replay`] re-applies the phases to a fresh field and checks
//! every step.

use crate::field::{Field, FieldConfig, FieldError, Pattern};
use engine::clock::SimTime;
use engine::digest::Digest;
use engine::store::frame::{Format, FrameWriter};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// The container format of `field.events`. Version 3: patterns hold a
/// co-access count and a bounded amplification, and the configuration a
/// ratio alarm (version 2's patterns held a self-feeding bonus; see
/// CHANGELOG).
pub const FIELD_EVENTS_FORMAT: Format = Format { magic: *b"SIMFIELD", version: 3, what: "field event log" };

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum FieldEvent {
    Start(Box<StartEvent>),
    Phase(Box<PhaseEvent>),
}

pub(crate) fn files_err(path: &Path, cause: String) -> FieldError {
    FieldError::Files { path: path.display().to_string(), cause }
}

fn stored(e: engine::Error) -> FieldError {
    FieldError::Stored(Arc::new(e))
}

/// Writes a context's events, one synced frame per phase. The file is
/// created with the starting state as its first frame.
pub struct EventLog {
    path: std::path::PathBuf,
    frames: Option<FrameWriter>,
}

impl EventLog {
    /// A log to be created at `path` (an existing file is refused) when the
    /// starting state is written.
    pub fn create(path: &Path) -> Result<EventLog, FieldError> {
        if path.exists() {
            return Err(files_err(path, "the event log exists; it is never overwritten".into()));
        }
        Ok(EventLog { path: path.to_path_buf(), frames: None })
    }

    /// A log appending to an open file (tests of write failures).
    #[cfg(test)]
    pub(crate) fn on_file(file: std::fs::File, path: &Path) -> EventLog {
        EventLog { path: path.to_path_buf(), frames: Some(FrameWriter::on_file(file, path)) }
    }

    fn encode(&self, event: &FieldEvent) -> Result<Vec<u8>, FieldError> {
        engine::store::codec::encode(event).map_err(|e| files_err(&self.path, e.to_string()))
    }

    /// Writes the starting state (once).
    pub(crate) fn start(&mut self, team: &[String], field: &Field) -> Result<(), FieldError> {
        if self.frames.is_some() {
            return Err(files_err(&self.path, "the log already has a starting state".into()));
        }
        let start = StartEvent {
            dim: field.dim() as u64,
            config: field.config().clone(),
            team: team.to_vec(),
            patterns: field.patterns().values().cloned().collect(),
            digest: field.digest(),
        };
        let payload = self.encode(&FieldEvent::Start(Box::new(start)))?;
        self.frames = Some(FrameWriter::create(&self.path, &FIELD_EVENTS_FORMAT, &payload, false).map_err(stored)?);
        Ok(())
    }

    /// Appends a phase.
    pub fn append(&mut self, phase: &PhaseEvent) -> Result<(), FieldError> {
        let payload = self.encode(&FieldEvent::Phase(Box::new(phase.clone())))?;
        let frames =
            self.frames.as_mut().ok_or_else(|| files_err(&self.path, "a phase before the starting state".into()))?;
        frames.append(&payload).map(|_| ()).map_err(stored)
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

/// Reads a log, failing on any damage with the file, the frame and its
/// offset.
pub fn read_log(path: &Path) -> Result<ReadLog, FieldError> {
    let mut r = engine::store::frame::open(path, &FIELD_EVENTS_FORMAT).map_err(stored)?;
    let (mut start, mut phases) = (None, Vec::new());
    while let Some(f) = r.next_frame().map_err(stored)? {
        let event: FieldEvent = engine::store::codec::decode(&f.payload).map_err(|e| stored(r.corrupt(&f, e)))?;
        match (event, f.index) {
            (FieldEvent::Start(s), 0) => start = Some(*s),
            (FieldEvent::Phase(p), i) if i > 0 && p.phase == i => phases.push(*p),
            (FieldEvent::Phase(p), i) if i > 0 => {
                return Err(stored(r.corrupt(&f, format!("phase {} where phase {i} was expected", p.phase))))
            }
            (FieldEvent::Phase(_) | FieldEvent::Start(_), _) => {
                return Err(stored(r.corrupt(&f, "the starting state must be the first frame, and only it")))
            }
        }
    }
    let start = start.ok_or_else(|| files_err(path, "the log has no starting state".into()))?;
    Ok(ReadLog { start, phases })
}
