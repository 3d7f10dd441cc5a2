//! A run directory's layout: every file a run, a merge or a validation
//! writes, named once here.
//!
//! ```text
//! trace.bin         the run: header, one frame per committed tick, the end
//! config.toml       the resolved configuration (for reading; the trace holds it)
//! summary.json      the summary, written when the run stops
//! outcomes.jsonl    one outcome per line, when the run writes it
//! chat.wal          live answers as they are paid for (live chat only)
//! memory-ops.jsonl  what `memory` operator commands did
//! report.html       the HTML report, when one is written
//! report.json       its aggregates
//! shard-000I-of-000N/  a shard's own run directory, under the run's
//!
//! A validation's directory holds validate.json (what it was started
//! with), chat-run1.wal and chat-run2.wal (live answers), answers.csv,
//! summary.json and report.html.
//! ```

use crate::error::{Error, Result};
use actors::coordinator::TickReport;
use engine::config::Config;
use engine::shard::Shard;
use engine::store::trace::{Header, Split, TraceWriter};
use engine::summary::RunSummary;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The trace.
pub const TRACE: &str = "trace.bin";
/// The resolved configuration.
pub const CONFIG: &str = "config.toml";
/// The summary.
pub const SUMMARY: &str = "summary.json";
/// The outcomes, one JSON object per line.
pub const OUTCOMES: &str = "outcomes.jsonl";
/// The chat write-ahead log (live chat providers only).
pub const CHAT_WAL: &str = "chat.wal";
/// The log of the `memory` operator commands.
pub const MEMORY_OPS: &str = "memory-ops.jsonl";
/// The HTML report.
pub const REPORT: &str = "report.html";
/// The report's aggregates, beside the page.
pub const REPORT_JSON: &str = "report.json";
/// A validation's marker: what it was started with.
pub const VALIDATION: &str = "validate.json";
/// A validation's answers, one line per respondent and question.
pub const ANSWERS: &str = "answers.csv";
/// A validation's fitted calibration (`validate --calibrate`).
pub const CALIBRATION: &str = "calibration.json";
/// A comparison of models' validations (`validate --config A --config B`).
pub const COMPARISON: &str = "comparison.json";
/// A merge's spill files, removed when it ends.
pub const MERGE_SPILL: &str = ".merge";

/// A validation's chat log of run `n` (1 or 2) in `dir`.
pub fn validation_chat_wal(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("chat-run{n}.wal"))
}

/// The chat log of a validation's reasons (`[answers] reasons = true`).
pub fn validation_reasons_wal(dir: &Path) -> PathBuf {
    dir.join("chat-reasons.wal")
}

/// The most persona-turns for which [`crate::OutcomesFile::Auto`] writes
/// `outcomes.jsonl`.
pub const AUTO_OUTCOMES_MAX_TURNS: u64 = 10_000;

/// The first of `base`, `base-2`, `base-3`, ... that does not exist: the
/// default directory of a run, an experiment or a validation, so that a
/// second one never trips over the first.
pub fn fresh(base: &str) -> PathBuf {
    let mut candidate = PathBuf::from(base);
    let mut k = 2;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{k}"));
        k += 1;
    }
    candidate
}

/// Where a run is written by default: `runs/<scenario>-s<seed>-<P>x<T>`
/// (with [`fresh`]'s suffix when it exists, except for a shard).
pub fn default_base(scenario: &str, seed: u64, personas: u32, ticks: u32) -> String {
    format!("runs/{scenario}-s{seed}-{personas}x{ticks}")
}

/// A shard's default directory: `shard-000I-of-000N` under the run's
/// default base, the same on every retry.
pub fn shard_dir(scenario: &str, seed: u64, personas: u32, ticks: u32, shard: Shard) -> PathBuf {
    PathBuf::from(default_base(scenario, seed, personas, ticks)).join(shard.dir_name())
}

/// The trace of `arg`: a run directory holding one, or the trace file itself.
pub fn trace_of(arg: &Path) -> Result<PathBuf> {
    let p = if arg.is_dir() { arg.join(TRACE) } else { arg.to_path_buf() };
    if !p.exists() {
        return Err(Error::Input(format!(
            "{}: no trace here (expected a run directory holding {TRACE}, or a trace file)",
            arg.display()
        )));
    }
    Ok(p)
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).map(|mut d| d.next().is_none()).unwrap_or(false)
}

/// A run directory: the paths of its files, and their writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Refuses `out` when it holds a run or is not empty: checked before
    /// anything is bought, and again by [`RunDir::create`].
    pub fn check_out(out: Option<&Path>, option: &str) -> Result<()> {
        if let Some(p) = out {
            if p.join(TRACE).exists() {
                return Err(Error::Refused(format!(
                    "output directory {} already holds a run ({TRACE}), and a run is never overwritten. If it was \
                 interrupted, continue it with `sim-cli run --resume {}`; otherwise choose another {option}",
                    p.display(),
                    p.display()
                )));
            }
            if p.exists() && !(p.is_dir() && is_empty_dir(p)) {
                return Err(Error::Refused(format!(
                "output directory {} already exists and is not empty; a run is never overwritten. Choose another {option} or remove it",
                p.display()
            )));
            }
        }
        Ok(())
    }

    /// Creates a run directory: `out` if given (it must not exist or be
    /// empty; a run is never overwritten), else the first free
    /// [`fresh`]`(default)`. `option` names `out` in a refusal (`--out`).
    pub fn create(out: Option<&Path>, default: &str, option: &str) -> Result<RunDir> {
        Self::check_out(out, option)?;
        let path = match out {
            Some(p) => p.to_path_buf(),
            None => fresh(default),
        };
        std::fs::create_dir_all(&path)
            .map_err(Error::io(format!("cannot create output directory {}", path.display())))?;
        let probe = path.join(".write-test");
        File::create(&probe).map_err(Error::io(format!("output directory {} is not writable", path.display())))?;
        let _ = std::fs::remove_file(&probe);
        Ok(RunDir { path })
    }

    /// A run directory that exists (or is about to), as it is.
    pub fn at(path: impl Into<PathBuf>) -> RunDir {
        RunDir { path: path.into() }
    }

    /// The run directory of `arg`, a directory or the trace file in one,
    /// with the trace's path; refused when there is no trace.
    pub fn open(arg: &Path) -> Result<(RunDir, PathBuf)> {
        let trace = trace_of(arg)?;
        let dir = trace.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok((RunDir { path: dir }, trace))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trace.
    pub fn trace(&self) -> PathBuf {
        self.path.join(TRACE)
    }

    /// The resolved configuration.
    pub fn config(&self) -> PathBuf {
        self.path.join(CONFIG)
    }

    /// The summary.
    pub fn summary(&self) -> PathBuf {
        self.path.join(SUMMARY)
    }

    /// The outcomes file.
    pub fn outcomes(&self) -> PathBuf {
        self.path.join(OUTCOMES)
    }

    /// The chat write-ahead log.
    pub fn chat_wal(&self) -> PathBuf {
        self.path.join(CHAT_WAL)
    }

    /// The memory operator commands' log.
    pub fn memory_ops(&self) -> PathBuf {
        self.path.join(MEMORY_OPS)
    }

    /// The HTML report.
    pub fn report(&self) -> PathBuf {
        self.path.join(REPORT)
    }

    /// A merge's spill directory.
    pub fn merge_spill(&self) -> PathBuf {
        self.path.join(MERGE_SPILL)
    }

    /// Creates the trace with its header (and a shard's or a merge's split
    /// record, in the same write).
    pub fn create_trace(&self, header: &Header, split: Option<&Split>) -> Result<TraceWriter> {
        Ok(TraceWriter::create_split(&self.trace(), header, split)?)
    }

    /// Writes the resolved configuration.
    pub fn write_config(&self, config: &Config) -> Result<()> {
        let p = self.config();
        let text = format!("# Resolved configuration of this run; hash {}\n{}", config.hash(), config.to_toml());
        std::fs::write(&p, text).map_err(Error::io(format!("cannot write {}", p.display())))
    }

    /// Writes the summary, atomically: a run killed as it writes it leaves
    /// the old file or none, never a part.
    pub fn write_summary(&self, summary: &RunSummary) -> Result<()> {
        let p = self.summary();
        let text = serde_json::to_string_pretty(summary)
            .map_err(|e| Error::Input(format!("cannot encode the summary: {e}")))?;
        Ok(engine::store::frame::write_atomic(&p, (text + "\n").as_bytes())?)
    }

    /// The summary, if there is one that reads as a run's summary.
    pub fn read_summary(&self) -> Option<RunSummary> {
        let text = std::fs::read_to_string(self.summary()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Opens the outcomes file for writing, one JSON outcome per line,
    /// written per tick, when `write` is set; otherwise a writer that
    /// writes nothing.
    pub fn outcome_writer(&self, write: bool) -> Result<OutcomeWriter> {
        if !write {
            return Ok(OutcomeWriter(None));
        }
        let path = self.outcomes();
        let file = File::create(&path).map_err(Error::io(format!("cannot create {}", path.display())))?;
        Ok(OutcomeWriter(Some((path, BufWriter::new(file)))))
    }

    /// A shard stopped before its trace existed left at most its
    /// configuration and a chat log with no answer in it: nothing was paid
    /// for, so a retry clears them and starts. Anything else stays, and the
    /// directory is refused as any non-empty one is. Says whether it
    /// cleared anything.
    pub fn clear_unstarted(&self) -> Result<bool> {
        let Ok(entries) = std::fs::read_dir(&self.path) else { return Ok(false) };
        let mut ours = Vec::new();
        for e in entries {
            let path = e.map_err(Error::io(format!("cannot list {}", self.path.display())))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let unpaid = match name {
                CONFIG => true,
                CHAT_WAL => engine::store::trace::wal::read_wal(&path).is_ok_and(|(answers, _)| answers.is_empty()),
                _ => false,
            };
            if !unpaid {
                return Ok(false);
            }
            ours.push(path);
        }
        for p in &ours {
            std::fs::remove_file(p).map_err(Error::io(format!("cannot clear {}", p.display())))?;
        }
        Ok(!ours.is_empty())
    }
}

/// Streams outcomes to `outcomes.jsonl`, or nowhere.
pub struct OutcomeWriter(Option<(PathBuf, BufWriter<File>)>);

impl OutcomeWriter {
    /// Appends one tick's outcomes and flushes.
    pub fn write_tick(&mut self, report: &TickReport) -> engine::Result<()> {
        let Some((path, file)) = &mut self.0 else { return Ok(()) };
        let err = |e: std::io::Error| engine::Error::Io { file: path.display().to_string(), source: e };
        for o in &report.outcomes {
            serde_json::to_writer(&mut *file, o).map_err(|e| err(e.into()))?;
            file.write_all(b"\n").map_err(err)?;
        }
        file.flush().map_err(err)
    }
}
