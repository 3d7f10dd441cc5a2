//! A recorded run's memory as the `memory` commands see it: the personas'
//! ledgers reconstructed from the trace (no model call), with the operations
//! of `memory-ops.jsonl` replayed over them.

use super::RunDirArgs;
use crate::prelude::{progress, runtime, trace_path};
use actors::replay::{replay_states, spec_from_header};
use anyhow::{bail, Context, Result};
use engine::clock::SimTime;
use engine::maintenance::{MemoryWorld, Op};
use engine::memory::{Change, ConsolidationConfig};
use engine::store::trace::file::read_trace_file;
use engine::store::trace::ReadTrace;
use std::path::PathBuf;

/// A run's memory, with where it came from.
pub(super) struct Loaded {
    pub(super) world: MemoryWorld,
    pub(super) rules: ConsolidationConfig,
    pub(super) trace: ReadTrace,
    pub(super) ops: Vec<Op>,
    /// What the recorded operations changed, with when.
    pub(super) op_changes: Vec<(SimTime, String, Change)>,
    pub(super) ops_path: PathBuf,
    /// Lines of the operation log that do not parse, with why (kept in the
    /// file, skipped here).
    pub(super) rejected: Vec<String>,
    /// Recorded operations that no longer apply, with why.
    pub(super) op_errors: Vec<String>,
    pub(super) now: SimTime,
    /// The run's configuration (its embedder embeds test memories).
    pub(super) config: engine::config::Config,
}

/// `texts` through the run's embedding provider, as its personas'
/// memories were; `None` when the run embeds nothing (`model = "none"`).
pub(super) fn embed_like_the_run(l: &Loaded, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>> {
    if texts.is_empty() || l.config.raw.embedding.model() == engine::config::EmbeddingModel::Disabled {
        return Ok(None);
    }
    let vectors = crate::prelude::embed_texts(&l.config, texts, None)
        .with_context(|| format!("cannot embed through the run's embedder ({})", l.config.raw.embedding.model))?;
    Ok(Some(vectors.iter().map(|v| v.to_vec()).collect()))
}

pub(super) fn load(dir: &RunDirArgs) -> Result<Loaded> {
    let path = trace_path(dir.run())?;
    let trace = read_trace_file(&path, true).with_context(|| format!("cannot read {}", path.display()))?;
    let spec = spec_from_header(&trace.header)?;
    let rules = spec.config.raw.consolidation.rules.clone();
    let hours = u64::from(spec.config.raw.run.hours_per_tick);
    let runtime = runtime(None)?;
    let (terminal, progress) = progress(trace.header.ticks);
    let out = runtime.block_on(replay_states(&trace, progress));
    if let Some(t) = &terminal {
        t.finish();
    }
    let out = out?;
    if let Some(d) = out.divergence {
        bail!("{} does not replay ({d}); its memory state cannot be reconstructed", path.display());
    }
    let mut world =
        MemoryWorld { personas: out.result.final_states.into_iter().flatten().collect(), ..Default::default() };
    let ops_path = runs::RunDir::at(path.parent().unwrap_or(std::path::Path::new("."))).memory_ops();
    let mut ops = Vec::new();
    let mut op_changes = Vec::new();
    let (mut rejected, mut op_errors) = (Vec::new(), Vec::new());
    if ops_path.exists() {
        let text = std::fs::read_to_string(&ops_path).with_context(|| format!("cannot read {}", ops_path.display()))?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let op: Op = match serde_json::from_str(line) {
                Ok(op) => op,
                Err(e) => {
                    let why = format!("{} line {}: not a memory operation ({e}); skipped", ops_path.display(), n + 1);
                    eprintln!("warning: {why}");
                    rejected.push(why);
                    continue;
                }
            };
            match world.apply(&op, &rules, false) {
                Ok(changes) => op_changes.extend(changes.into_iter().map(|(owner, c)| (op.at(), owner, c))),
                Err(e) => {
                    let why = format!(
                        "{} line {}: {} no longer applies ({e}); skipped",
                        ops_path.display(),
                        n + 1,
                        op.name()
                    );
                    eprintln!("warning: {why}");
                    op_errors.push(why);
                    continue;
                }
            }
            ops.push(op);
        }
    }
    let end = SimTime(u64::from(trace.ticks.last().map_or(0, |t| t.tick)) * hours * 3600);
    let now = ops.iter().map(Op::at).fold(end, SimTime::max);
    Ok(Loaded { world, rules, trace, ops, op_changes, ops_path, rejected, op_errors, now, config: spec.config })
}
