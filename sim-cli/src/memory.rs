//! `sim-cli memory`: the state of memory consolidation in a recorded run,
//! reconstructed from its trace without any model call.

use crate::run::{progress, runtime, trace_path};
use actors::replay::replay_states;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use engine::memory::{Tier, Version};
use engine::persona::PersonaState;
use engine::trace::frame::read_trace_file;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Options shared by the memory commands.
#[derive(Debug, Args)]
pub struct RunDir {
    /// The run directory (or its trace file).
    #[arg(long = "run", value_name = "DIR")]
    pub run: PathBuf,
    /// Print as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Only test memories.
    #[arg(long)]
    pub test_only: bool,
}

/// Memory commands.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Counts per tier, real against test, and energy statistics.
    Status(RunDir),
    /// One memory: its record, every version, and its cluster links.
    Inspect {
        /// Memory id, e.g. m-00003-0001.
        id: String,
        #[command(flatten)]
        dir: RunDir,
    },
}

fn load(dir: &RunDir) -> Result<Vec<PersonaState>> {
    let path = trace_path(&dir.run)?;
    let read = read_trace_file(&path, true).with_context(|| format!("cannot read {}", path.display()))?;
    let runtime = runtime(None)?;
    let (terminal, progress) = progress(read.header.ticks);
    let out = runtime.block_on(replay_states(&read, progress));
    if let Some(t) = &terminal {
        t.finish();
    }
    let out = out?;
    if let Some(d) = out.divergence {
        bail!("{} does not replay ({d}); its memory state cannot be reconstructed", path.display());
    }
    Ok(out.result.final_states.into_iter().flatten().collect())
}

const TIERS: [Tier; 5] = [Tier::Working, Tier::ShortTerm, Tier::LongTerm, Tier::Archived, Tier::Expired];

fn counts<'a>(versions: impl Iterator<Item = &'a Version>) -> Value {
    let mut c = [0u64; 5];
    for v in versions {
        // A closed version counts only when promotion archived it.
        if v.valid_to.is_none() || v.tier == Tier::Archived {
            c[TIERS.iter().position(|t| *t == v.tier).unwrap_or(0)] += 1;
        }
    }
    json!({"working": c[0], "shortTerm": c[1], "longTerm": c[2], "archived": c[3], "expired": c[4]})
}

fn energy_stats<'a>(versions: impl Iterator<Item = &'a Version>) -> Value {
    let mut e: Vec<f64> = versions.filter(|v| v.valid_to.is_none() && v.tier.live()).map(|v| v.energy).collect();
    if e.is_empty() {
        return json!({"n": 0, "average": null, "median": null, "min": null, "max": null});
    }
    e.sort_by(f64::total_cmp);
    let n = e.len();
    let median = if n % 2 == 1 { e[n / 2] } else { (e[n / 2 - 1] + e[n / 2]) / 2.0 };
    json!({"n": n, "average": e.iter().sum::<f64>() / n as f64, "median": median, "min": e[0], "max": e[n - 1]})
}

fn status(dir: &RunDir) -> Result<()> {
    let states = load(dir)?;
    let all: Vec<&Version> = states.iter().flat_map(|s| s.ledger.versions()).filter(|v| !dir.test_only || v.is_test).collect();
    let v = json!({
        "run": dir.run.display().to_string(),
        "test_only": dir.test_only,
        "tiers": counts(all.iter().copied()),
        "real": counts(all.iter().copied().filter(|v| !v.is_test)),
        "test": counts(all.iter().copied().filter(|v| v.is_test)),
        "energy": energy_stats(all.iter().copied()),
    });
    if dir.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("Memory in {}{}", dir.run.display(), if dir.test_only { " (test memories only)" } else { "" });
    println!("  {:<10} {:>10} {:>10} {:>10}", "tier", "all", "real", "test");
    for t in TIERS {
        let k = t.as_str();
        println!("  {:<10} {:>10} {:>10} {:>10}", k, v["tiers"][k].to_string(), v["real"][k].to_string(), v["test"][k].to_string());
    }
    let e = &v["energy"];
    let f = |x: &Value| x.as_f64().map_or("-".to_string(), |x| format!("{x:.3}"));
    println!(
        "  energy of live memories: n {}, average {}, median {}, min {}, max {}",
        e["n"], f(&e["average"]), f(&e["median"]), f(&e["min"]), f(&e["max"])
    );
    Ok(())
}

fn inspect(id: &str, dir: &RunDir) -> Result<()> {
    let parsed = id
        .strip_prefix("m-")
        .and_then(|r| r.split_once('-'))
        .and_then(|(p, s)| Some((p.parse::<u32>().ok()?, s.parse::<u32>().ok()?)));
    let Some((persona, seq)) = parsed else {
        bail!("memory id {id:?}: expected the form m-PPPPP-SSSS, e.g. m-00003-0001");
    };
    let states = load(dir)?;
    let state = states.iter().find(|s| s.profile.id == persona);
    let record = state.and_then(|s| s.memory.records().get(seq as usize));
    let (Some(state), Some(record)) = (state, record) else {
        bail!("memory id {id}: no such memory in {}", dir.run.display());
    };
    let history = state.ledger.history(id);
    if dir.test_only && !history.iter().any(|v| v.is_test) {
        bail!("memory id {id} is not a test memory (--test-only)");
    }
    let v = json!({
        "id": id,
        "persona": state.profile.label(),
        "kind": record.kind,
        "description": record.description,
        "importance": record.importance,
        "tick": record.tick,
        "sources": record.sources,
        "versions": history,
        "cluster_links": state.ledger.cluster_links(id),
    });
    if dir.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("{id} ({}, {:?}, tick {}, importance {})", state.profile.label(), record.kind, record.tick, record.importance);
    println!("  {}", record.description);
    println!("  {:>7} {:<10} {:>8} {:>7} {:>12} {:>12}  from", "version", "tier", "energy", "access", "valid from h", "valid to h");
    for h in &history {
        println!(
            "  {:>7} {:<10} {:>8.3} {:>7} {:>12} {:>12}  {}",
            h.version,
            h.tier.as_str(),
            h.energy,
            h.access_count,
            h.valid_from.0 / 3600,
            h.valid_to.map_or("current".into(), |t| (t.0 / 3600).to_string()),
            h.previous.map_or("-".into(), |p| p.to_string())
        );
    }
    let links = state.ledger.cluster_links(id);
    println!("  cluster links: {}", if links.is_empty() { "none".to_string() } else { links.join(", ") });
    Ok(())
}

/// Runs a memory command.
pub fn memory(cmd: MemoryCommand) -> Result<()> {
    match cmd {
        MemoryCommand::Status(dir) => status(&dir),
        MemoryCommand::Inspect { id, dir } => inspect(&id, &dir),
    }
}
