//! A recorded run's memory: the personas' ledgers reconstructed from the
//! trace (no model call), with the operations of the run's memory-operation
//! log replayed over them. What the `memory` commands inspect and change,
//! and what [`rows`] lays out as a table.

use crate::dir::RunDir;
use crate::error::{Error, Result};
use crate::export::persona_index;
use crate::start::runtime;
use actors::progress::Progress;
use actors::replay::{replay_states, spec_from_header};
use engine::clock::SimTime;
use engine::maintenance::{MemoryWorld, Op};
use engine::memory::{Change, ConsolidationConfig, Version};
use engine::persona::memory::MemoryKind;
use engine::store::trace::file::read_trace_file;
use engine::store::trace::ReadTrace;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run's memory, with where it came from.
pub struct Memory {
    /// The personas' states and the test memories.
    pub world: MemoryWorld,
    /// The run's consolidation rules.
    pub rules: ConsolidationConfig,
    /// The run's trace.
    pub trace: ReadTrace,
    /// The recorded operations that applied, in order.
    pub ops: Vec<Op>,
    /// What the recorded operations changed, with when and whose.
    pub op_changes: Vec<(SimTime, String, Change)>,
    /// The operation log's path (it may not exist).
    pub ops_path: PathBuf,
    /// Lines of the operation log that do not parse, with why: kept in the
    /// file, skipped here.
    pub rejected: Vec<String>,
    /// Recorded operations that no longer apply, with why.
    pub op_errors: Vec<String>,
    /// The run's end in simulated time, or its last operation's if later.
    pub now: SimTime,
    /// The run's configuration (its embedder embeds test memories).
    pub config: engine::config::Config,
}

impl Memory {
    /// The skipped lines and operations, each with why: what a caller
    /// shows as warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.rejected.iter().chain(&self.op_errors).map(String::as_str)
    }
}

/// Loads the memory of the run in `path` (a run directory or its trace):
/// the trace re-run with no model call, keeping the personas' final
/// states, then the operation log applied. A trace that does not replay is
/// an error, as its states would not be the run's. `progress` is given
/// the run's tick count and returns where the re-run's progress goes.
pub fn load(path: &Path, progress: impl FnOnce(u32) -> Arc<dyn Progress>) -> Result<Memory> {
    let (dir, trace_path) = RunDir::open(path)?;
    let trace = read_trace_file(&trace_path, true)
        .map_err(|e| Error::context(format!("cannot read {}", trace_path.display()), e))?;
    let spec = spec_from_header(&trace.header)?;
    let rules = spec.config.raw.consolidation.rules.clone();
    let hours = u64::from(spec.config.raw.run.hours_per_tick);
    let out = runtime(None)?.block_on(replay_states(&trace, progress(trace.header.ticks)))?;
    if let Some(d) = out.divergence {
        return Err(Error::Diverged(format!(
            "{} does not replay ({d}); its memory state cannot be reconstructed",
            trace_path.display()
        )));
    }
    let mut world =
        MemoryWorld { personas: out.result.final_states.into_iter().flatten().collect(), ..Default::default() };
    let ops_path = dir.memory_ops();
    let (mut ops, mut op_changes, mut rejected, mut op_errors) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if ops_path.exists() {
        let text =
            std::fs::read_to_string(&ops_path).map_err(Error::io(format!("cannot read {}", ops_path.display())))?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let op: Op = match serde_json::from_str(line) {
                Ok(op) => op,
                Err(e) => {
                    rejected.push(format!(
                        "{} line {}: not a memory operation ({e}); skipped",
                        ops_path.display(),
                        n + 1
                    ));
                    continue;
                }
            };
            match world.apply(&op, &rules, false) {
                Ok(changes) => op_changes.extend(changes.into_iter().map(|(owner, c)| (op.at(), owner, c))),
                Err(e) => {
                    op_errors.push(format!(
                        "{} line {}: {} no longer applies ({e}); skipped",
                        ops_path.display(),
                        n + 1,
                        op.name()
                    ));
                    continue;
                }
            }
            ops.push(op);
        }
    }
    let end = SimTime(u64::from(trace.ticks.last().map_or(0, |t| t.tick)) * hours * 3600);
    let now = ops.iter().map(Op::at).fold(end, SimTime::max);
    Ok(Memory { world, rules, trace, ops, op_changes, ops_path, rejected, op_errors, now, config: spec.config })
}

/// Which versions [`rows`] lays out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Only this persona's memories: an index or a label such as
    /// `p-00007`, or `test` for the test memories.
    pub persona: Option<String>,
    /// Every version of every record (closed ones included), not only the
    /// current ones.
    pub history: bool,
}

/// One version of one memory record: its ledger entry beside the memory it
/// is of. Times are simulated hours from the run's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The owner's label (`p-00007`), or `test` for a test memory.
    pub persona: String,
    /// The record's id (`p-00007/m-00003`, a promoted node's, or a test
    /// memory's name).
    pub record: String,
    /// The version's number, increasing in its ledger.
    pub version: u64,
    /// Whether it is the record's current version.
    pub current: bool,
    /// `working`, `shortTerm`, `longTerm`, `archived` or `expired`.
    pub tier: String,
    /// For an archived or expired version, the tier it was in.
    pub from_tier: Option<String>,
    /// Energy.
    pub energy: f64,
    /// The highest energy it reached.
    pub peak_energy: f64,
    /// Retrievals.
    pub access_count: u32,
    /// The decay rate per simulated hour last applied.
    pub decay_rate: f64,
    /// `observation` or `reflection`; empty for a test memory.
    pub kind: Option<String>,
    /// The memory's text.
    pub text: Option<String>,
    /// Importance 1-10, from the reply that made it.
    pub importance: Option<u8>,
    /// Sentiment in [-1, 1].
    pub sentiment: Option<f32>,
    /// The tick that made it.
    pub tick: Option<u32>,
    /// The stimulus or memories it came from.
    pub sources: Vec<String>,
    /// When the record was made.
    pub created_hour: f64,
    /// Its last retrieval (or creation).
    pub last_accessed_hour: f64,
    /// When this version began.
    pub valid_from_hour: f64,
    /// When it ended; `None` for a current version.
    pub valid_to_hour: Option<f64>,
    /// The version it follows, if any.
    pub previous: Option<u64>,
    /// Whether it is a test memory.
    pub is_test: bool,
}

fn hours(t: SimTime) -> f64 {
    t.0 as f64 / 3600.0
}

/// The versions of `memory` that `select` asks for, in order: by owner
/// (personas by id, then the test memories), then by version.
pub fn rows(memory: &Memory, select: &Select) -> Result<Vec<Row>> {
    let personas = memory.world.personas.len() as u32;
    let owner = match select.persona.as_deref() {
        None => None,
        Some("test") => Some("test".to_string()),
        Some(p) => Some(engine::persona::profile::label(persona_index(p, personas)?)),
    };
    let mut out = Vec::new();
    for (label, ledger) in memory.world.ledgers() {
        if owner.as_ref().is_some_and(|o| *o != label) {
            continue;
        }
        let stream = memory.world.personas.iter().find(|p| p.profile.label() == label).map(|p| &p.memory);
        let versions: Vec<&Version> = match select.history {
            true => ledger.versions().iter().collect(),
            false => ledger.currents().collect(),
        };
        for v in versions {
            let record = v.record.memory().and_then(|m| stream.and_then(|s| s.get(m)));
            let text = record
                .map(|r| r.description.to_string())
                .or_else(|| memory.world.test_content.get(&v.record.origin()).cloned());
            out.push(Row {
                persona: label.clone(),
                record: v.record.to_string(),
                version: v.version,
                current: v.valid_to.is_none(),
                tier: v.tier.as_str().to_string(),
                from_tier: v.from_tier.map(|t| t.as_str().to_string()),
                energy: v.energy,
                peak_energy: v.peak_energy,
                access_count: v.access_count,
                decay_rate: v.decay_rate,
                kind: record.map(|r| {
                    match r.kind {
                        MemoryKind::Observation => "observation",
                        MemoryKind::Reflection => "reflection",
                    }
                    .to_string()
                }),
                text,
                importance: record.map(|r| r.importance),
                sentiment: record.map(|r| r.sentiment),
                tick: record.map(|r| r.tick),
                sources: record.map(|r| r.sources.iter().map(|s| s.to_string()).collect()).unwrap_or_default(),
                created_hour: hours(v.created),
                last_accessed_hour: hours(v.last_accessed),
                valid_from_hour: hours(v.valid_from),
                valid_to_hour: v.valid_to.map(hours),
                previous: v.previous,
                is_test: v.is_test,
            });
        }
    }
    Ok(out)
}
