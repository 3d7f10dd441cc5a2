//! `sim-cli inspect`: what a trace recorded, reconstructed without running
//! any model.

use crate::run::trace_path;
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::persona::profile::label;
use engine::report::Distribution;
use engine::trace::frame::read_trace_file;
use engine::trace::{ReadTrace, TickFrame};
use engine::turn::Status;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Options of `sim-cli inspect`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  sim-cli inspect runs/default-s42-50x3\n  \
    sim-cli inspect runs/default-s42-50x3 --tick 2\n  sim-cli inspect runs/default-s42-50x3 --persona p-00007 --json")]
pub struct InspectArgs {
    /// Run directory (holding trace.bin) or a trace file.
    #[arg(value_name = "DIR|TRACE")]
    pub trace: PathBuf,
    /// Show one tick in detail: intent per stimulus and every failure or refusal.
    #[arg(long, value_name = "N")]
    pub tick: Option<u32>,
    /// Show one persona over time (index or label such as p-00007): reactions and memories.
    #[arg(long, value_name = "ID")]
    pub persona: Option<String>,
    /// Print as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_persona(s: &str, personas: u32) -> Result<u32> {
    let digits = s.strip_prefix("p-").unwrap_or(s);
    let id: u32 =
        digits.parse().with_context(|| format!("--persona {s:?}: expected an index or a label like p-00007"))?;
    if id >= personas {
        bail!("--persona {s}: the run has personas p-00000 to {}", label(personas.saturating_sub(1)));
    }
    Ok(id)
}

fn tick_summary(t: &TickFrame) -> Value {
    let (mut ok, mut failed, mut refused, mut chat, mut spend) = (0, 0, 0, 0, 0u64);
    for o in &t.outcomes {
        match o.status {
            Status::Ok => ok += 1,
            Status::Failed { .. } => failed += 1,
            Status::Refused { .. } => refused += 1,
        }
        chat += o.chat_calls.len();
        spend += o.spend.total().nano_usd;
    }
    json!({
        "tick": t.tick, "jobs": t.outcomes.len(), "ok": ok, "failed": failed, "refused": refused,
        "chat_calls": chat, "embedding_invocations": t.embeddings.len(), "memories": t.memories.len(),
        "allocated_nano_usd": spend, "digest": t.digests.digest.hex(), "full_digest": t.digests.full_digest.hex(),
    })
}

fn tick_detail(t: &TickFrame) -> Value {
    let mut intent: BTreeMap<&str, Distribution> = BTreeMap::new();
    let mut problems = Vec::new();
    for o in &t.outcomes {
        match (&o.status, &o.reaction) {
            (Status::Ok, Some(r)) => {
                let d = intent.entry(&o.stimulus).or_default();
                d.histogram[usize::from(r.intent.clamp(1, 5) - 1)] += 1;
                d.n += 1;
            }
            (Status::Failed { stage, reason }, _) => problems
                .push(json!({"position": o.position, "persona": label(o.persona), "failed": stage, "reason": reason})),
            (Status::Refused { reason }, _) => {
                problems.push(json!({"position": o.position, "persona": label(o.persona), "refused": reason}))
            }
            (Status::Ok, None) => {}
        }
    }
    for d in intent.values_mut() {
        let sum: u64 = d.histogram.iter().enumerate().map(|(i, c)| (i as u64 + 1) * c).sum();
        d.mean = if d.n > 0 { sum as f64 / d.n as f64 } else { 0.0 };
    }
    json!({ "tick": t.tick, "stimuli": t.stimuli, "intent": intent, "problems": problems })
}

fn persona_history(trace: &ReadTrace, id: u32) -> Value {
    let mut rows = Vec::new();
    for t in &trace.ticks {
        for o in t.outcomes.iter().filter(|o| o.persona == id) {
            let memories: Vec<Value> = t
                .memories
                .iter()
                .filter(|m| m.position == o.position)
                .map(|m| json!({"id": m.id.to_string(), "kind": m.kind, "importance": m.importance, "description": m.description}))
                .collect();
            rows.push(json!({
                "tick": t.tick, "stimulus": o.stimulus, "exposure": o.exposure, "status": o.status,
                "intent": o.reaction.as_ref().map(|r| r.intent), "sentiment": o.reaction.as_ref().map(|r| r.sentiment),
                "reaction": o.reaction.as_ref().map(|r| r.text.clone()),
                "retrieved": o.retrieved.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
                "reflection": o.reflection, "probes": o.probes, "new_memories": memories,
            }));
        }
    }
    json!({ "persona": label(id), "turns": rows })
}

/// Runs `sim-cli inspect`.
pub fn inspect(args: InspectArgs) -> Result<()> {
    let path = trace_path(&args.trace)?;
    let read = read_trace_file(&path, true).with_context(|| format!("cannot inspect {}", path.display()))?;
    let h = &read.header;
    let status = match (&read.end, &read.torn) {
        (Some(e), _) => match &e.stopped {
            Some(s) => format!("finished early: {} after tick {}", s.reason, s.after_tick),
            None => "finished".to_string(),
        },
        (None, Some(t)) => format!("unfinished; a torn frame at byte offset {} (resume to continue)", t.offset),
        (None, None) => "unfinished (resume to continue)".to_string(),
    };
    let header = json!({
        "format_version": h.format_version, "engine_version": h.engine_version, "seed": h.seed,
        "personas": h.personas, "ticks": h.ticks, "ticks_recorded": read.ticks.len(),
        "scenario": h.scenario_origin, "scenario_hash": h.scenario_hash, "traits_hash": h.traits_hash,
        "config_hash": h.config_hash.hex(), "budget_nano_usd": h.budget_nano_usd, "strategy": h.strategy, "status": status,
    });
    let mut out = json!({ "trace": path.display().to_string(), "header": header,
        "ticks": read.ticks.iter().map(tick_summary).collect::<Vec<_>>() });
    if let Some(n) = args.tick {
        let Some(t) = read.ticks.get((n as usize).wrapping_sub(1)) else {
            bail!("--tick {n}: the trace holds ticks 1 to {}", read.ticks.len());
        };
        out["tick_detail"] = tick_detail(t);
    }
    if let Some(p) = &args.persona {
        out["persona"] = persona_history(&read, parse_persona(p, h.personas)?);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&out);
    }
    Ok(())
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other @ (Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_)) => other.to_string(),
    }
}

fn print_text(v: &Value) {
    let h = &v["header"];
    println!("Trace {}", s(&v["trace"]));
    println!(
        "  format {} (engine {}), seed {}, {} personas, {} of {} ticks recorded, {}",
        h["format_version"],
        s(&h["engine_version"]),
        h["seed"],
        h["personas"],
        h["ticks_recorded"],
        h["ticks"],
        s(&h["status"])
    );
    println!(
        "  scenario {} ({}), config {}",
        s(&h["scenario"]),
        &s(&h["scenario_hash"])[..16],
        &s(&h["config_hash"])[..16]
    );
    println!(
        "\n  {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>14}  digest",
        "tick", "jobs", "ok", "failed", "refused", "chat", "embed", "memories", "nano-USD"
    );
    for t in v["ticks"].as_array().into_iter().flatten() {
        println!(
            "  {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>14}  {}",
            s(&t["tick"]),
            s(&t["jobs"]),
            s(&t["ok"]),
            s(&t["failed"]),
            s(&t["refused"]),
            s(&t["chat_calls"]),
            s(&t["embedding_invocations"]),
            s(&t["memories"]),
            s(&t["allocated_nano_usd"]),
            &s(&t["digest"])[..16]
        );
    }
    if let Some(d) = v.get("tick_detail") {
        println!("\nTick {}: stimuli {}", d["tick"], d["stimuli"]);
        for (id, dist) in d["intent"].as_object().into_iter().flatten() {
            let mean = dist["mean"].as_f64().unwrap_or(0.0);
            println!("  {:<24} n {:>6}  mean {mean:.2}  histogram {}", id, s(&dist["n"]), dist["histogram"]);
        }
        for p in d["problems"].as_array().into_iter().flatten() {
            println!("  {p}");
        }
    }
    if let Some(p) = v.get("persona") {
        println!("\nPersona {}", s(&p["persona"]));
        for t in p["turns"].as_array().into_iter().flatten() {
            let sentiment = t["sentiment"].as_f64().map_or("-".to_string(), |x| format!("{x:+.2}"));
            println!(
                "  tick {} {} (exposure {}): {}, intent {}, sentiment {sentiment}",
                t["tick"],
                s(&t["stimulus"]),
                t["exposure"],
                s(&t["status"]),
                s(&t["intent"])
            );
            println!("    reaction: {}", s(&t["reaction"]));
            if let Some(r) = t["retrieved"].as_array().filter(|r| !r.is_empty()) {
                println!("    recalled: {}", r.iter().map(s).collect::<Vec<_>>().join(", "));
            }
            for m in t["new_memories"].as_array().into_iter().flatten() {
                println!("    + {} [{} {}] {}", s(&m["id"]), s(&m["kind"]), m["importance"], s(&m["description"]));
            }
        }
    }
}
