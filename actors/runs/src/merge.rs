//! Merging the shards of one panel (`run --shard I/N`) into one run
//! directory whose digest is the unsharded run's.
//!
//! Every shard is checked before anything is written. The merge then
//! streams: tick by tick, each shard's frame is read in turn, its job
//! positions moved past the shards before it, and its parts written to
//! spill files beside the output; the merged frame is written from them.
//! Memory holds one tick of one shard, never the panel.

use crate::dir::{RunDir, CONFIG, MERGE_SPILL, SUMMARY, TRACE};
use crate::error::{refuse, Error, Result};
use actors::progress::Progress;
use engine::shard::Shard;
use engine::store::trace::file::{open_records_buffered, outline, Outline};
use engine::store::trace::record::ShardTick;
use engine::store::trace::spill::TickSpill;
use engine::store::trace::{Header, Record, RunEnd, Split, TraceWriter};
use engine::summary::RunSummary;
use engine::turn::TickDigests;
use std::path::{Path, PathBuf};

/// A merge that came to its end.
#[derive(Debug)]
pub struct Merged {
    /// The merged run's directory.
    pub dir: RunDir,
    /// Its summary.
    pub summary: RunSummary,
    /// How many shards it joined.
    pub shards: usize,
    /// The panel's personas.
    pub personas: u32,
    /// Whether these shards had been merged there already (nothing was done).
    pub already: bool,
}

/// One shard, checked.
struct Input {
    dir: PathBuf,
    trace: PathBuf,
    outline: Outline,
    shard: Shard,
    summary: RunSummary,
}

/// Merges the shards in `shards` (run directories or trace files, in any
/// order) into the new or empty directory `out`. A retried merge of the
/// same shards into a finished merge does nothing; into an unfinished one
/// it starts again.
pub fn merge(shards: &[PathBuf], out: &Path, progress: &dyn Progress) -> Result<Merged> {
    if shards.is_empty() {
        refuse!("merge: no shards given");
    }
    let inputs = check(shards)?;
    let header = &inputs[0].outline.header;
    let personas = header.personas;
    let config = header.config(&inputs[0].trace.display().to_string())?;
    if let Some(summary) = earlier_merge(out, header, progress)? {
        progress.note(&format!("{}: these shards are already merged there; nothing to do", out.display()));
        return Ok(Merged { dir: RunDir::at(out), summary, shards: inputs.len(), personas, already: true });
    }
    let dir = RunDir::create(Some(out), "", "--out")?;
    dir.write_config(&config)?;
    let spill = dir.merge_spill();
    std::fs::create_dir_all(&spill).map_err(Error::io(format!("cannot create {}", spill.display())))?;
    let merged = write(&inputs, &config, &dir, &spill, progress);
    let _ = std::fs::remove_dir_all(&spill);
    let mut summary = match merged {
        Ok(s) => s,
        Err(e) => {
            // The shards are untouched; a half-written merge is not kept.
            let _ = std::fs::remove_file(dir.trace());
            let _ = std::fs::remove_file(dir.config());
            return Err(Error::MergeFailed { out: dir.path().to_path_buf(), source: Box::new(e) });
        }
    };
    summary.out_dir = dir.path().display().to_string();
    dir.write_summary(&summary)?;
    Ok(Merged { dir, summary, shards: inputs.len(), personas, already: false })
}

/// What `out` holds from an earlier merge of the same run: a finished
/// merge gives its summary (a retried merge step has nothing to do); an
/// unfinished one (the merge was killed) is cleared, so that the merge
/// starts again; anything else is left for [`RunDir::create`] to judge.
fn earlier_merge(out: &Path, header: &Header, progress: &dyn Progress) -> Result<Option<RunSummary>> {
    let out = RunDir::at(out);
    let trace = out.trace();
    if !trace.exists() {
        return Ok(None);
    }
    let Ok(earlier) = outline(&trace) else { return Ok(None) };
    let same = earlier.header.differences(header).is_empty();
    if !same || !matches!(earlier.split, Some(Split::Merged { .. })) {
        return Ok(None);
    }
    if let Some(end) = &earlier.end {
        return Ok(out.read_summary().filter(|k| k.digest == end.digests.digest));
    }
    for name in [TRACE, CONFIG, SUMMARY] {
        let _ = std::fs::remove_file(out.path().join(name));
    }
    let _ = std::fs::remove_dir_all(out.path().join(MERGE_SPILL));
    progress.note(&format!(
        "{}: an earlier merge of these shards stopped before its end; merging again",
        out.path().display()
    ));
    Ok(None)
}

/// Reads and checks every shard: one run, every index once, each
/// finished, all stopped at the same tick. Returns them in shard order.
fn check(dirs: &[PathBuf]) -> Result<Vec<Input>> {
    let mut inputs = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let (_, trace) = RunDir::open(dir)?;
        let outline = outline(&trace).map_err(|e| Error::context(format!("cannot read shard {}", dir.display()), e))?;
        let shard = match outline.split {
            Some(Split::Shard(s)) => s,
            Some(_) => refuse!("{}: a merged run, not a shard; merge the shards themselves", dir.display()),
            None => {
                refuse!("{}: not a shard (it ran the whole panel; shards come from `run --shard I/N`)", dir.display())
            }
        };
        let summary = shard_summary(dir, &outline)?;
        inputs.push(Input { dir: dir.clone(), trace, outline, shard, summary });
    }
    let first = &inputs[0];
    let content = |i: &Input| -> Result<engine::digest::Digest> {
        Ok(i.outline.header.config(&i.trace.display().to_string())?.content_hash())
    };
    let base = content(first)?;
    for i in &inputs[1..] {
        let (a, b) = (&first.outline.header, &i.outline.header);
        let differs: [(bool, &str, String, String); 8] = [
            (content(i)? != base, "configuration content", String::new(), String::new()),
            (a.scenario_hash != b.scenario_hash, "scenario", a.scenario_origin.clone(), b.scenario_origin.clone()),
            (a.traits_hash != b.traits_hash, "trait table", String::new(), String::new()),
            (a.seed != b.seed, "seed", a.seed.to_string(), b.seed.to_string()),
            (a.engine_version != b.engine_version, "engine", a.engine_version.clone(), b.engine_version.clone()),
            (a.personas != b.personas, "panel size", a.personas.to_string(), b.personas.to_string()),
            (a.ticks != b.ticks, "ticks", a.ticks.to_string(), b.ticks.to_string()),
            (
                first.shard.count != i.shard.count,
                "shard count",
                first.shard.count.to_string(),
                i.shard.count.to_string(),
            ),
        ];
        if let Some((_, what, x, y)) = differs.iter().find(|d| d.0) {
            let values = if x.is_empty() { String::new() } else { format!(": {y} against {x}") };
            refuse!(
                "{} is not a shard of the same run as {}: its {what} differs{values}",
                i.dir.display(),
                first.dir.display()
            );
        }
        if a.strategy != b.strategy || a.budget_nano_usd != b.budget_nano_usd {
            refuse!(
                "{} is not a shard of the same run as {}: its embedding strategy or budget differs",
                i.dir.display(),
                first.dir.display()
            );
        }
    }
    let n = first.shard.count;
    let mut by_index: Vec<Option<Input>> = (0..n).map(|_| None).collect();
    for i in inputs {
        let slot = &mut by_index[i.shard.index as usize];
        if let Some(other) = slot {
            refuse!("{} and {} are both {}", other.dir.display(), i.dir.display(), i.shard);
        }
        *slot = Some(i);
    }
    let missing: Vec<String> =
        by_index.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| i.to_string()).collect();
    if !missing.is_empty() {
        refuse!("shard {} of {n} missing: every shard 0 to {} must be given", missing.join(", "), n - 1);
    }
    let inputs: Vec<Input> = by_index.into_iter().flatten().collect();
    let last = |i: &Input| i.outline.end.as_ref().map_or(0, |e| e.ticks_completed);
    if inputs.iter().any(|i| last(i) != last(&inputs[0])) {
        let each: Vec<String> = inputs
            .iter()
            .map(|i| {
                let why = match &i.outline.end.as_ref().and_then(|e| e.stopped.clone()) {
                    Some(s) => format!(" ({})", s.reason),
                    None => String::new(),
                };
                format!("{} after tick {}{why}", i.dir.display(), last(i))
            })
            .collect();
        refuse!("the shards stopped at different ticks, so they are not one run: {}", each.join("; "));
    }
    Ok(inputs)
}

/// A finished shard's summary, checked against its trace.
fn shard_summary(dir: &Path, outline: &Outline) -> Result<RunSummary> {
    let Some(end) = &outline.end else {
        refuse!(
            "{}: unfinished ({} of {} ticks committed); run its command again (or `sim-cli run --resume {}`) to finish it",
            dir.display(),
            outline.ticks,
            outline.header.ticks,
            dir.display()
        );
    };
    let path = RunDir::at(dir).summary();
    let again = format!("run its command again (or `sim-cli run --resume {}`) to write it", dir.display());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            refuse!("{}: finished, but its {SUMMARY} is missing (it was stopped as it ended); {again}", dir.display())
        }
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()))(e)),
    };
    let summary: RunSummary = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => refuse!("{}: not a run summary; {again}: {e}", path.display()),
    };
    if summary.digest != end.digests.digest || summary.full_digest != end.digests.full_digest {
        refuse!("{}: its digests are not its trace's (it belongs to another run); {again}", path.display());
    }
    Ok(summary)
}

/// Writes the merged trace into `dir` and returns the merged summary.
fn write(
    inputs: &[Input],
    config: &engine::config::Config,
    dir: &RunDir,
    spill: &Path,
    progress: &dyn Progress,
) -> Result<RunSummary> {
    let header: &Header = &inputs[0].outline.header;
    let n = inputs.len() as u32;
    let mut trace = TraceWriter::create_split(&dir.trace(), header, Some(&Split::Merged { shards: n }))?;
    let mut readers = Vec::with_capacity(inputs.len());
    for i in inputs {
        let mut r = open_records_buffered(&i.trace, 64 << 10)?;
        // The header and the shard record come first (checked above).
        r.next_record()?;
        r.next_record()?;
        readers.push(r);
    }
    let mut prev = TickDigests::genesis(config, &header.scenario_hash, header.seed, header.personas);
    let scenario = engine::scenario::Scenario::from_toml(&header.scenario_source, "the shards' scenario")?;
    let mut summary = RunSummary::merge_base(&inputs[0].summary, header.personas, n, &scenario);
    let ticks = inputs[0].outline.end.as_ref().map_or(0, |e| e.ticks_completed);
    for tick in 1..=ticks {
        let mut spilled = TickSpill::create(spill)?;
        let mut shards = Vec::with_capacity(inputs.len());
        for (input, reader) in inputs.iter().zip(&mut readers) {
            let frame = match reader.next_record()? {
                Some(Record::Tick(t)) if t.tick == tick => t,
                _ => refuse!("{}: tick {tick} is not where its outline put it", input.trace.display()),
            };
            let zero = (&Default::default(), &Default::default());
            summary.add_tick(&frame.outcomes, zero, zero);
            summary.add_consolidation(&frame.consolidation);
            shards.push(ShardTick { embeddings: frame.embeddings.len() as u32, digests: frame.digests });
            spilled.add(*frame)?;
        }
        let spilled = spilled.close()?;
        let digests = spilled.digests(&prev, tick, shards.iter().map(|s| s.digests.full_digest))?;
        trace.append(&Record::Split(Split::Tick { tick, shards }))?;
        spilled.write(&mut trace, tick, digests)?;
        prev = digests;
        progress.stage(tick, "merging", u64::from(tick), u64::from(ticks));
    }
    let shards: Vec<RunSummary> = inputs.iter().map(|i| i.summary.clone()).collect();
    summary.finish_merge(ticks, prev, &shards, header.budget_nano_usd);
    let end = RunEnd { ticks_completed: ticks, stopped: summary.stopped.clone(), digests: prev };
    trace.append(&Record::End(end))?;
    Ok(summary)
}
