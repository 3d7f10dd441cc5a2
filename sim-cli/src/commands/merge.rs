//! `sim-cli merge`: the shards of one panel (`run --shard I/N`) joined into
//! one run directory whose digest is the unsharded run's.
//!
//! Every shard is checked before anything is written. The merge then
//! streams: tick by tick, each shard's frame is read in turn, its job
//! positions moved past the shards before it, and its parts written to
//! spill files beside the output; the merged frame is written from them.
//! Memory holds one tick of one shard, never the panel.

use crate::output::{print_summary, OutputDir};
use crate::prelude::trace_path;
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::report::RunSummary;
use engine::shard::Shard;
use engine::store::trace::file::{open_records_buffered, outline, Outline};
use engine::store::trace::record::ShardTick;
use engine::store::trace::spill::TickSpill;
use engine::store::trace::{Header, Record, RunEnd, Split, TraceWriter};
use engine::turn::TickDigests;
use std::path::{Path, PathBuf};

/// Options of `sim-cli merge`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli merge runs/study/shard-* --out runs/study/merged\n  \
    sim-cli replay runs/study/merged              every shard re-run from the merged trace\n\n\
    Every shard must be of one run (configuration, scenario, seed, engine, panel size, ticks and\n\
    shard count), each index 0 to N-1 given once, and each finished; a budget-stopped shard\n\
    merges only with shards stopped at the same tick. The merged digest is the unsharded\n\
    run's; its costs are what the shards paid (see docs/GUIDE.md, \"Panels past one machine\").")]
pub struct MergeArgs {
    /// The shards' run directories (or trace files), in any order.
    #[arg(value_name = "DIR", required = true, num_args = 1..)]
    pub shards: Vec<PathBuf>,
    /// The merged run's directory: new, or empty.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the merged summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// One shard, checked.
struct Input {
    dir: PathBuf,
    trace: PathBuf,
    outline: Outline,
    shard: Shard,
    summary: RunSummary,
}

/// Runs `sim-cli merge`.
pub fn merge(args: MergeArgs) -> Result<()> {
    let inputs = check(&args.shards)?;
    let header = &inputs[0].outline.header;
    let config = header.config(&inputs[0].trace.display().to_string())?;
    if let Some(done) = earlier_merge(&args.out, header)? {
        eprintln!("{}: these shards are already merged there; nothing to do", args.out.display());
        return finish(&done, args.json, inputs.len(), header.personas, &args.out);
    }
    let out = OutputDir::create(Some(&args.out), "", 0, 0, 0)?;
    out.write_config(&config)?;
    let spill = out.path().join(".merge");
    std::fs::create_dir_all(&spill).with_context(|| format!("cannot create {}", spill.display()))?;
    let merged = write(&inputs, &config, out.path(), &spill);
    let _ = std::fs::remove_dir_all(&spill);
    let mut summary = match merged {
        Ok(s) => s,
        Err(e) => {
            // The shards are untouched; a half-written merge is not kept.
            let _ = std::fs::remove_file(out.path().join("trace.bin"));
            let _ = std::fs::remove_file(out.path().join("config.toml"));
            let kept = "the shards are untouched and nothing is kept in the output directory";
            return Err(e.context(format!("the merge into {} failed; {kept}", out.path().display())));
        }
    };
    summary.out_dir = out.path().display().to_string();
    out.write_summary(&summary)?;
    finish(&summary, args.json, inputs.len(), header.personas, out.path())
}

fn finish(summary: &RunSummary, json: bool, shards: usize, personas: u32, out: &Path) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary).context("cannot encode the summary")?);
    } else {
        println!("Merged {shards} shards of {personas} personas into {}.", out.display());
        print_summary(summary);
    }
    Ok(())
}

/// What `out` holds from an earlier merge of the same run: a finished
/// merge gives its summary (a retried merge step has nothing to do); an
/// unfinished one (the merge was killed) is cleared, so that the merge
/// starts again; anything else is left for [`OutputDir::create`] to judge.
fn earlier_merge(out: &Path, header: &engine::store::trace::Header) -> Result<Option<RunSummary>> {
    let trace = out.join("trace.bin");
    if !trace.exists() {
        return Ok(None);
    }
    let Ok(earlier) = outline(&trace) else { return Ok(None) };
    let same = earlier.header.differences(header).is_empty();
    if !same || !matches!(earlier.split, Some(Split::Merged { .. })) {
        return Ok(None);
    }
    if let Some(end) = &earlier.end {
        let kept = std::fs::read_to_string(out.join("summary.json")).ok();
        let kept = kept.and_then(|t| serde_json::from_str::<RunSummary>(&t).ok());
        return Ok(kept.filter(|k| k.digest == end.digests.digest));
    }
    for name in ["trace.bin", "config.toml", "summary.json"] {
        let _ = std::fs::remove_file(out.join(name));
    }
    let _ = std::fs::remove_dir_all(out.join(".merge"));
    eprintln!("{}: an earlier merge of these shards stopped before its end; merging again", out.display());
    Ok(None)
}

/// Reads and checks every shard: one run, every index once, each
/// finished, all stopped at the same tick. Returns them in shard order.
fn check(dirs: &[PathBuf]) -> Result<Vec<Input>> {
    let mut inputs = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let trace = trace_path(dir)?;
        let outline = outline(&trace).with_context(|| format!("cannot read shard {}", dir.display()))?;
        let shard = match outline.split {
            Some(Split::Shard(s)) => s,
            Some(_) => bail!("{}: a merged run, not a shard; merge the shards themselves", dir.display()),
            None => {
                bail!("{}: not a shard (it ran the whole panel; shards come from `run --shard I/N`)", dir.display())
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
            bail!(
                "{} is not a shard of the same run as {}: its {what} differs{values}",
                i.dir.display(),
                first.dir.display()
            );
        }
        if a.strategy != b.strategy || a.budget_nano_usd != b.budget_nano_usd {
            bail!(
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
            bail!("{} and {} are both {}", other.dir.display(), i.dir.display(), i.shard);
        }
        *slot = Some(i);
    }
    let missing: Vec<String> =
        by_index.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| i.to_string()).collect();
    if !missing.is_empty() {
        bail!("shard {} of {n} missing: every shard 0 to {} must be given", missing.join(", "), n - 1);
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
        bail!("the shards stopped at different ticks, so they are not one run: {}", each.join("; "));
    }
    Ok(inputs)
}

/// A finished shard's summary, checked against its trace.
fn shard_summary(dir: &Path, outline: &Outline) -> Result<RunSummary> {
    let Some(end) = &outline.end else {
        bail!(
            "{}: unfinished ({} of {} ticks committed); run its command again (or `sim-cli run --resume {}`) to finish it",
            dir.display(),
            outline.ticks,
            outline.header.ticks,
            dir.display()
        );
    };
    let path = dir.join("summary.json");
    let again = format!("run its command again (or `sim-cli run --resume {}`) to write it", dir.display());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{}: finished, but its summary.json is missing (it was stopped as it ended); {again}", dir.display())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let summary: RunSummary =
        serde_json::from_str(&text).with_context(|| format!("{}: not a run summary; {again}", path.display()))?;
    if summary.digest != end.digests.digest || summary.full_digest != end.digests.full_digest {
        bail!("{}: its digests are not its trace's (it belongs to another run); {again}", path.display());
    }
    Ok(summary)
}

/// Writes the merged trace into `dir` and returns the merged summary.
fn write(inputs: &[Input], config: &engine::config::Config, dir: &Path, spill: &Path) -> Result<RunSummary> {
    let header: &Header = &inputs[0].outline.header;
    let n = inputs.len() as u32;
    let mut trace = TraceWriter::create_split(&dir.join("trace.bin"), header, Some(&Split::Merged { shards: n }))?;
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
    let bar = crate::progress::bar(u64::from(ticks), "merging ticks");
    for tick in 1..=ticks {
        let mut spilled = TickSpill::create(spill)?;
        let mut shards = Vec::with_capacity(inputs.len());
        for (input, reader) in inputs.iter().zip(&mut readers) {
            let frame = match reader.next_record()? {
                Some(Record::Tick(t)) if t.tick == tick => t,
                _ => bail!("{}: tick {tick} is not where its outline put it", input.trace.display()),
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
        bar.inc(1);
    }
    bar.finish_and_clear();
    let shards: Vec<RunSummary> = inputs.iter().map(|i| i.summary.clone()).collect();
    summary.finish_merge(ticks, prev, &shards, header.budget_nano_usd);
    let end = RunEnd { ticks_completed: ticks, stopped: summary.stopped.clone(), digests: prev };
    trace.append(&Record::End(end))?;
    Ok(summary)
}
