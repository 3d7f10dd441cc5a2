//! `sim-cli inspect`: what a trace recorded, reconstructed without running
//! any model.

use crate::prelude::{parse_persona, trace_path};
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::digest::Digest;
use engine::embed::Strategy;
use engine::persona::profile::label;
use engine::persona::MemoryKind;
use engine::store::trace::file::read_trace_file;
use engine::store::trace::{ReadTrace, Split, TickFrame};
use engine::summary::Distribution;
use engine::turn::Status;
use engine::turn::{ProbeAnswer, ReflectionResult, Stage};
use serde::Serialize;
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

/// The `--json` output of `sim-cli inspect`.
#[derive(Debug, Serialize)]
struct Inspected<'a> {
    trace: String,
    header: HeaderView<'a>,
    ticks: Vec<TickSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tick_detail: Option<TickDetail<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persona: Option<PersonaHistory<'a>>,
}

#[derive(Debug, Serialize)]
struct HeaderView<'a> {
    format_version: u32,
    engine_version: &'a str,
    seed: u64,
    personas: u32,
    ticks: u32,
    ticks_recorded: usize,
    scenario: &'a str,
    scenario_hash: &'a str,
    traits_hash: &'a str,
    config_hash: Digest,
    budget_nano_usd: Option<u64>,
    strategy: Strategy,
    status: String,
    /// The embedding model, as the recorded config names it.
    embedding_model: String,
    /// Its identity when the config records one (MiniLM: the SHA-256 of
    /// its weights).
    embedding_model_id: Option<String>,
    /// The chat model.
    chat_model: String,
    /// A `gguf` chat model's file (its SHA-256) and the kernel level the
    /// run computed at.
    #[serde(skip_serializing_if = "Option::is_none")]
    chat_model_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gguf_kernel: Option<&'static str>,
    /// The kernel level a `minilm` embedder computed at.
    #[serde(skip_serializing_if = "Option::is_none")]
    minilm_kernel: Option<&'static str>,
    /// A shard's trace: which shard, and its personas (`first..end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<ShardView>,
    /// A merged trace: how many shards it joins.
    #[serde(skip_serializing_if = "Option::is_none")]
    merged_shards: Option<u32>,
}

#[derive(Debug, Serialize)]
struct ShardView {
    index: u32,
    count: u32,
    first_persona: u32,
    end_persona: u32,
}

#[derive(Debug, Serialize)]
struct TickSummary {
    tick: u32,
    jobs: usize,
    ok: usize,
    failed: usize,
    refused: usize,
    chat_calls: usize,
    embedding_invocations: usize,
    memories: usize,
    allocated_nano_usd: u64,
    digest: Digest,
    full_digest: Digest,
}

#[derive(Debug, Serialize)]
struct TickDetail<'a> {
    tick: u32,
    stimuli: &'a [String],
    intent: BTreeMap<&'a str, Distribution>,
    problems: Vec<Problem<'a>>,
}

/// A job that failed or was refused.
#[derive(Debug, Serialize)]
struct Problem<'a> {
    position: u32,
    persona: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<Stage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct PersonaHistory<'a> {
    persona: String,
    turns: Vec<Turn<'a>>,
}

#[derive(Debug, Serialize)]
struct Turn<'a> {
    tick: u32,
    stimulus: &'a str,
    exposure: u32,
    status: &'a Status,
    intent: Option<u8>,
    sentiment: Option<f32>,
    reaction: Option<&'a str>,
    retrieved: Vec<String>,
    reflection: &'a Option<ReflectionResult>,
    probes: &'a [ProbeAnswer],
    new_memories: Vec<NewMemoryView<'a>>,
}

#[derive(Debug, Serialize)]
struct NewMemoryView<'a> {
    id: String,
    kind: MemoryKind,
    importance: u8,
    description: &'a str,
}

fn tick_summary(t: &TickFrame) -> TickSummary {
    let (mut ok, mut failed, mut refused, mut chat_calls, mut spend) = (0, 0, 0, 0, 0u64);
    for o in &t.outcomes {
        match o.status {
            Status::Ok => ok += 1,
            Status::Failed { .. } => failed += 1,
            Status::Refused { .. } => refused += 1,
        }
        chat_calls += o.chat_calls.len();
        spend += o.spend.total().nano_usd;
    }
    TickSummary {
        tick: t.tick,
        jobs: t.outcomes.len(),
        ok,
        failed,
        refused,
        chat_calls,
        embedding_invocations: t.embeddings.len(),
        memories: t.memories.len(),
        allocated_nano_usd: spend,
        digest: t.digests.digest,
        full_digest: t.digests.full_digest,
    }
}

fn tick_detail(t: &TickFrame) -> TickDetail<'_> {
    let mut intent: BTreeMap<&str, Distribution> = BTreeMap::new();
    let mut problems = Vec::new();
    for o in &t.outcomes {
        let problem = |failed, refused, reason| Problem {
            position: o.position,
            persona: label(o.persona),
            failed,
            refused,
            reason,
        };
        match (&o.status, &o.reaction) {
            (Status::Ok, Some(r)) => {
                intent.entry(&o.stimulus).or_default().add(r.intent.clamp(1, 5));
            }
            (Status::Failed { stage, reason }, _) => problems.push(problem(Some(*stage), None, Some(reason))),
            (Status::Refused { reason }, _) => problems.push(problem(None, Some(reason), None)),
            (Status::Ok, None) => {}
        }
    }
    TickDetail { tick: t.tick, stimuli: &t.stimuli, intent, problems }
}

fn persona_history(trace: &ReadTrace, id: u32) -> PersonaHistory<'_> {
    let mut turns = Vec::new();
    for t in &trace.ticks {
        for o in t.outcomes.iter().filter(|o| o.persona == id) {
            let new_memories = t
                .memories
                .iter()
                .filter(|m| m.position == o.position)
                .map(|m| NewMemoryView {
                    id: m.id.to_string(),
                    kind: m.kind,
                    importance: m.importance,
                    description: &m.description,
                })
                .collect();
            turns.push(Turn {
                tick: t.tick,
                stimulus: &o.stimulus,
                exposure: o.exposure,
                status: &o.status,
                intent: o.reaction.as_ref().map(|r| r.intent),
                sentiment: o.reaction.as_ref().map(|r| r.sentiment),
                reaction: o.reaction.as_ref().map(|r| r.text.as_str()),
                retrieved: o.retrieved.iter().map(|m| m.to_string()).collect(),
                reflection: &o.reflection,
                probes: &o.probes,
                new_memories,
            });
        }
    }
    PersonaHistory { persona: label(id), turns }
}

/// Runs `sim-cli inspect`.
pub fn inspect(args: InspectArgs) -> Result<()> {
    let path = trace_path(&args.trace)?;
    let read = read_trace_file(&path, true).with_context(|| format!("cannot inspect {}", path.display()))?;
    let h = &read.header;
    let status = match (&read.end, &read.tail) {
        (Some(e), _) => match &e.stopped {
            Some(s) => format!("finished early: {} after tick {}", s.reason, s.after_tick),
            None => "finished".to_string(),
        },
        (None, Some(t)) => format!("unfinished; {} (resume to continue)", t.describe()),
        (None, None) => "unfinished (resume to continue)".to_string(),
    };
    let config = h.config(&path.display().to_string())?;
    let header = HeaderView {
        format_version: h.format_version,
        engine_version: &h.engine_version,
        seed: h.seed,
        personas: h.personas,
        ticks: h.ticks,
        ticks_recorded: read.ticks.len(),
        scenario: &h.scenario_origin,
        scenario_hash: &h.scenario_hash,
        traits_hash: &h.traits_hash,
        config_hash: h.config_hash,
        budget_nano_usd: h.budget_nano_usd,
        strategy: h.strategy,
        status,
        embedding_model: config.raw.embedding.model.clone(),
        embedding_model_id: Some(config.raw.embedding.minilm.weights_sha256.clone()).filter(|s| !s.is_empty()),
        chat_model: config.raw.chat.model.clone(),
        chat_model_id: Some(config.raw.chat.gguf.sha256.clone()).filter(|s| !s.is_empty()),
        gguf_kernel: (config.raw.chat.provider == engine::config::ChatProvider::Gguf)
            .then(|| config.raw.chat.gguf.kernel.name()),
        // A trace recorded before MiniLM's kernels had levels records none.
        minilm_kernel: (config.raw.embedding.provider == engine::config::Provider::Minilm
            && !config.raw.embedding.minilm.kernel.is_auto())
        .then(|| config.raw.embedding.minilm.kernel.name()),
        shard: match &read.split {
            Some(Split::Shard(s)) => {
                let r = s.personas(h.personas);
                Some(ShardView { index: s.index, count: s.count, first_persona: r.start, end_persona: r.end })
            }
            _ => None,
        },
        merged_shards: match &read.split {
            Some(Split::Merged { shards }) => Some(*shards),
            _ => None,
        },
    };
    let tick_detail = match args.tick {
        None => None,
        Some(n) => match read.ticks.get((n as usize).wrapping_sub(1)) {
            Some(t) => Some(tick_detail(t)),
            None => bail!("--tick {n}: the trace holds ticks 1 to {}", read.ticks.len()),
        },
    };
    let persona = match &args.persona {
        Some(p) => Some(persona_history(&read, parse_persona(p, h.personas)?)),
        None => None,
    };
    let out = Inspected {
        trace: path.display().to_string(),
        header,
        ticks: read.ticks.iter().map(tick_summary).collect(),
        tick_detail,
        persona,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&out);
    }
    Ok(())
}

fn print_text(v: &Inspected<'_>) {
    let h = &v.header;
    println!("Trace {}", v.trace);
    println!(
        "  format {} (engine {}), seed {}, {} personas, {} of {} ticks recorded, {}",
        h.format_version, h.engine_version, h.seed, h.personas, h.ticks_recorded, h.ticks, h.status
    );
    if let Some(s) = &h.shard {
        let (first, last) = (label(s.first_persona), label(s.end_persona.saturating_sub(1)));
        println!("  shard {} of {}: personas {first} to {last} of the panel's {}", s.index, s.count, h.personas);
    }
    if let Some(n) = h.merged_shards {
        println!("  merged from {n} shards (`sim-cli merge`)");
    }
    let short = |s: &str| s.get(..16).unwrap_or(s).to_string();
    println!("  scenario {} ({}), config {}", h.scenario, short(h.scenario_hash), short(&h.config_hash.hex()));
    let id = h.embedding_model_id.as_deref().map(|id| format!(" (weights SHA-256 {})", short(id))).unwrap_or_default();
    let id = match h.minilm_kernel {
        Some(kernel) => format!("{id}, computed on the {kernel} kernels"),
        None => id,
    };
    println!("  embedding model {}{id}, chat model {}", h.embedding_model, h.chat_model);
    if let (Some(sha), Some(kernel)) = (&h.chat_model_id, h.gguf_kernel) {
        println!("  chat model file SHA-256 {}, computed on the {kernel} kernels", short(sha));
    }
    println!(
        "\n  {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>14}  digest",
        "tick", "jobs", "ok", "failed", "refused", "chat", "embed", "memories", "nano-USD"
    );
    for t in &v.ticks {
        println!(
            "  {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>14}  {}",
            t.tick,
            t.jobs,
            t.ok,
            t.failed,
            t.refused,
            t.chat_calls,
            t.embedding_invocations,
            t.memories,
            t.allocated_nano_usd,
            short(&t.digest.hex())
        );
    }
    if let Some(d) = &v.tick_detail {
        println!("\nTick {}: stimuli {}", d.tick, d.stimuli.join(", "));
        for (id, dist) in &d.intent {
            println!("  {:<24} n {:>6}  mean {:.2}  histogram {:?}", id, dist.n, dist.mean, dist.histogram);
        }
        for p in &d.problems {
            match (p.failed, p.refused) {
                (Some(stage), _) => {
                    println!("  {} (job {}): failed at {stage:?}: {}", p.persona, p.position, p.reason.unwrap_or(""))
                }
                (None, r) => println!("  {} (job {}): refused: {}", p.persona, p.position, r.unwrap_or("")),
            }
        }
    }
    if let Some(p) = &v.persona {
        println!("\nPersona {}", p.persona);
        for t in &p.turns {
            let sentiment = t.sentiment.map_or("-".to_string(), |x| format!("{x:+.2}"));
            let status = match t.status {
                Status::Ok => "ok".to_string(),
                Status::Failed { stage, reason } => format!("failed at {stage:?}: {reason}"),
                Status::Refused { reason } => format!("refused: {reason}"),
            };
            let intent = t.intent.map_or("-".to_string(), |i| i.to_string());
            println!(
                "  tick {} {} (exposure {}): {status}, intent {intent}, sentiment {sentiment}",
                t.tick, t.stimulus, t.exposure
            );
            println!("    reaction: {}", t.reaction.unwrap_or("-"));
            if !t.retrieved.is_empty() {
                println!("    recalled: {}", t.retrieved.join(", "));
            }
            for m in &t.new_memories {
                println!("    + {} [{:?} {}] {}", m.id, m.kind, m.importance, m.description);
            }
        }
    }
}
