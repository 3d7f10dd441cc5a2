//! `sim-cli memory`: memory consolidation in a recorded run. The state is
//! reconstructed from the trace (no model call) and from the operations
//! these commands recorded in the run directory's `memory-ops.jsonl`.

use crate::run::{progress, runtime, trace_path};
use actors::replay::{replay_states, spec_from_header};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use engine::clock::SimTime;
use engine::memory::{Change, ConsolidationConfig, MemoryWorld, Op, RecordId, Tier, Version};
use engine::trace::frame::read_trace_file;
use engine::trace::ReadTrace;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

impl RunDir {
    /// The run directory, however it was given.
    pub fn run(&self) -> &std::path::Path {
        self.dir.as_deref().or(self.run_flag.as_deref()).unwrap_or(std::path::Path::new("."))
    }
}

/// Options shared by the memory commands.
#[derive(Debug, Clone, Args)]
pub struct RunDir {
    /// The run directory (or its trace file).
    #[arg(value_name = "DIR", required_unless_present = "run_flag")]
    dir: Option<PathBuf>,
    /// The same, as an option (the older spelling; kept as an alias).
    #[arg(long = "run", value_name = "DIR", conflicts_with = "dir")]
    run_flag: Option<PathBuf>,
    /// Print as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Only test memories; real ones are neither shown nor touched.
    #[arg(long)]
    pub test_only: bool,
}

/// Memory commands.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Counts per tier, real against test, and energy statistics.
    Status(RunDir),
    /// An energy histogram of live memories.
    Energy {
        /// Only this tier: working, shortTerm or longTerm.
        #[arg(long)]
        tier: Option<String>,
        #[command(flatten)]
        dir: RunDir,
    },
    /// Recent promotions and promotions blocked by the batch size.
    Promotions {
        /// Only the last N ticks of the run (manual passes are always shown).
        #[arg(long, value_name = "N")]
        last_ticks: Option<u32>,
        #[command(flatten)]
        dir: RunDir,
    },
    /// The configuration in force, when each operation last ran, error counts.
    Health(RunDir),
    /// One memory: its record, every version, and its cluster links.
    Inspect {
        /// Memory id, e.g. m-00003-0001 or a test memory's id.
        id: RecordId,
        #[command(flatten)]
        dir: RunDir,
    },
    /// Which memories will expire, and which survive, after some hours.
    Predict {
        /// Simulated hours ahead.
        #[arg(long, default_value_t = 24.0)]
        hours: f64,
        #[command(flatten)]
        dir: RunDir,
    },
    /// Test memories: create, boost, list, delete, scenarios.
    #[command(subcommand)]
    Test(TestCommand),
    /// A manual consolidation pass (all steps unless some are named).
    Consolidate {
        /// Decay energy.
        #[arg(long)]
        decay: bool,
        /// Promote ready memories.
        #[arg(long)]
        promote: bool,
        /// Form clusters.
        #[arg(long)]
        cluster: bool,
        /// Expire memories below the threshold.
        #[arg(long)]
        clean_expired: bool,
        /// Show what would happen; change nothing (no file is written).
        #[arg(long)]
        dry_run: bool,
        /// Simulated hours that pass before the pass.
        #[arg(long, default_value_t = 1.0)]
        hours: f64,
        #[command(flatten)]
        dir: RunDir,
    },
}

/// Test-memory commands.
#[derive(Debug, Subcommand)]
pub enum TestCommand {
    /// Create a test memory.
    Create {
        /// Its text.
        content: String,
        /// Starting energy.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        energy: f64,
        /// Starting tier: working, shortTerm or longTerm.
        #[arg(long, default_value = "working")]
        tier: String,
        #[command(flatten)]
        dir: RunDir,
    },
    /// Access a test memory, raising its energy.
    Boost {
        /// Its id.
        id: RecordId,
        /// Energy added.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        amount: f64,
        #[command(flatten)]
        dir: RunDir,
    },
    /// List test memories.
    List(RunDir),
    /// Close test memories (their versions stay readable).
    Delete {
        /// One id; omit with --all.
        id: Option<RecordId>,
        /// Every test memory.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        dir: RunDir,
    },
    /// Create a scenario: high-access, gradual-decay, promotion-ready, cluster-formation.
    Scenario {
        /// Its name.
        name: String,
        #[command(flatten)]
        dir: RunDir,
    },
}

/// A run's memory, with where it came from.
struct Loaded {
    world: MemoryWorld,
    rules: ConsolidationConfig,
    trace: ReadTrace,
    ops: Vec<Op>,
    /// What the recorded operations changed, with when.
    op_changes: Vec<(SimTime, String, Change)>,
    ops_path: PathBuf,
    now: SimTime,
}

fn load(dir: &RunDir) -> Result<Loaded> {
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
    let ops_path = path.parent().map(|p| p.join("memory-ops.jsonl")).unwrap_or_else(|| "memory-ops.jsonl".into());
    let mut ops = Vec::new();
    let mut op_changes = Vec::new();
    if ops_path.exists() {
        let text = std::fs::read_to_string(&ops_path).with_context(|| format!("cannot read {}", ops_path.display()))?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let op: Op = serde_json::from_str(line)
                .with_context(|| format!("{} line {}: not a memory operation", ops_path.display(), n + 1))?;
            let changes = world
                .apply(&op, &rules, false)
                .with_context(|| format!("{} line {}: cannot be applied", ops_path.display(), n + 1))?;
            op_changes.extend(changes.into_iter().map(|(owner, c)| (op.at(), owner, c)));
            ops.push(op);
        }
    }
    let end = SimTime(u64::from(trace.ticks.last().map_or(0, |t| t.tick)) * hours * 3600);
    let now = ops.iter().map(Op::at).fold(end, SimTime::max);
    Ok(Loaded { world, rules, trace, ops, op_changes, ops_path, now })
}

fn emit(json: bool, v: &Value, text: impl FnOnce(&Value)) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        text(v);
    }
    Ok(())
}

fn n(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Number(x) => x.as_f64().filter(|f| f.fract() != 0.0).map_or(x.to_string(), |f| format!("{f:.3}")),
        other @ (Value::Bool(_) | Value::Array(_) | Value::Object(_)) => other.to_string(),
    }
}

const TIERS: [Tier; 5] = [Tier::Working, Tier::ShortTerm, Tier::LongTerm, Tier::Archived, Tier::Expired];

/// Versions that count in the tier tables: current ones, and the versions
/// promotion archived.
fn counted(v: &Version) -> bool {
    v.valid_to.is_none() || v.tier == Tier::Archived
}

fn counts<'a>(versions: impl Iterator<Item = &'a Version>) -> Value {
    let mut c = [0u64; 5];
    for v in versions.filter(|v| counted(v)) {
        c[TIERS.iter().position(|t| *t == v.tier).unwrap_or(0)] += 1;
    }
    json!({"working": c[0], "shortTerm": c[1], "longTerm": c[2], "archived": c[3], "expired": c[4]})
}

fn live(world: &MemoryWorld, test_only: bool) -> Vec<(String, &Version)> {
    world
        .ledgers()
        .flat_map(|(owner, l)| l.currents().map(move |v| (owner.clone(), v)).collect::<Vec<_>>())
        .filter(|(_, v)| v.tier.live() && (!test_only || v.is_test))
        .collect()
}

fn status(dir: &RunDir) -> Result<()> {
    let l = load(dir)?;
    let all: Vec<&Version> = l
        .world
        .ledgers()
        .flat_map(|(_, l)| l.versions().iter().collect::<Vec<_>>())
        .filter(|v| !dir.test_only || v.is_test)
        .collect();
    let mut e: Vec<f64> = live(&l.world, dir.test_only).iter().map(|(_, v)| v.energy).collect();
    e.sort_by(f64::total_cmp);
    let k = e.len();
    let energy = if k == 0 {
        json!({"n": 0, "average": null, "median": null, "min": null, "max": null})
    } else {
        let median = if k % 2 == 1 { e[k / 2] } else { (e[k / 2 - 1] + e[k / 2]) / 2.0 };
        json!({"n": k, "average": e.iter().sum::<f64>() / k as f64, "median": median, "min": e[0], "max": e[k - 1]})
    };
    let v = json!({
        "run": dir.run().display().to_string(), "test_only": dir.test_only,
        "tiers": counts(all.iter().copied()),
        "real": counts(all.iter().copied().filter(|v| !v.is_test)),
        "test": counts(all.iter().copied().filter(|v| v.is_test)),
        "energy": energy,
    });
    emit(dir.json, &v, |v| {
        println!("Memory in {}{}", dir.run().display(), if dir.test_only { " (test memories only)" } else { "" });
        println!("  {:<10} {:>10} {:>10} {:>10}", "tier", "all", "real", "test");
        for t in TIERS {
            let k = t.as_str();
            println!("  {:<10} {:>10} {:>10} {:>10}", k, n(&v["tiers"][k]), n(&v["real"][k]), n(&v["test"][k]));
        }
        let e = &v["energy"];
        println!(
            "  energy of live memories: n {}, average {}, median {}, min {}, max {}",
            n(&e["n"]),
            n(&e["average"]),
            n(&e["median"]),
            n(&e["min"]),
            n(&e["max"])
        );
    })
}

fn energy(tier: Option<&str>, dir: &RunDir) -> Result<()> {
    let want = match tier {
        None => None,
        Some(t) => match Tier::parse(t).filter(|t| t.live()) {
            Some(t) => Some(t),
            None => bail!("--tier {t:?}: expected working, shortTerm or longTerm"),
        },
    };
    let l = load(dir)?;
    let mut buckets: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for (_, v) in live(&l.world, dir.test_only).into_iter().filter(|(_, v)| want.is_none_or(|t| v.tier == t)) {
        *buckets.entry(v.energy.max(0.0).floor() as u64).or_default() += 1;
    }
    let rows: Vec<Value> = buckets.iter().map(|(b, c)| json!({"from": b, "to": b + 1, "count": c})).collect();
    let v = json!({"tier": want.map(Tier::as_str), "histogram": rows});
    emit(dir.json, &v, |_| {
        let max = buckets.values().copied().max().unwrap_or(0);
        println!("Energy of live memories{}", want.map_or(String::new(), |t| format!(" in {}", t.as_str())));
        for (b, c) in &buckets {
            let bar = "#".repeat(((*c as f64 / max.max(1) as f64) * 50.0).ceil() as usize);
            println!("  [{b:>3}, {:>3}) {c:>8}  {bar}", b + 1);
        }
    })
}

fn promotions(last_ticks: Option<u32>, dir: &RunDir) -> Result<()> {
    let l = load(dir)?;
    let last = l.trace.ticks.last().map_or(0, |t| t.tick);
    let from = last_ticks.map_or(1, |k| last.saturating_sub(k) + 1);
    let mut rows = Vec::new();
    for t in l.trace.ticks.iter().filter(|t| t.tick >= from) {
        for (p, changes) in &t.consolidation {
            for c in changes {
                if let Change::Promoted { record, tier, energy, .. } = c {
                    rows.push(json!({"tick": t.tick, "persona": engine::persona::profile::label(*p), "record": record, "to": tier.as_str(), "energy": energy}));
                } else if let Change::PromotionBlocked { record, energy } = c {
                    rows.push(json!({"tick": t.tick, "persona": engine::persona::profile::label(*p), "record": record, "blocked": true, "energy": energy}));
                }
            }
        }
    }
    if dir.test_only {
        rows.clear();
    }
    // Manual passes (`memory consolidate`), with their simulated hour.
    for (at, owner, c) in &l.op_changes {
        if dir.test_only && owner != "test" {
            continue;
        }
        let hour = at.0 as f64 / 3600.0;
        if let Change::Promoted { record, tier, energy, .. } = c {
            rows.push(json!({"tick": null, "hour": hour, "persona": owner, "record": record, "to": tier.as_str(), "energy": energy}));
        } else if let Change::PromotionBlocked { record, energy } = c {
            rows.push(json!({"tick": null, "hour": hour, "persona": owner, "record": record, "blocked": true, "energy": energy}));
        }
    }
    let promoted = rows.iter().filter(|r| r.get("to").is_some()).count();
    let v = json!({"from_tick": from, "to_tick": last, "promoted": promoted, "blocked": rows.len() - promoted, "events": rows});
    emit(dir.json, &v, |v| {
        println!(
            "Promotions in ticks {from} to {last}: {} promoted, {} blocked by the batch size",
            v["promoted"], v["blocked"]
        );
        for r in v["events"].as_array().into_iter().flatten().take(40) {
            let what = if r.get("blocked").is_some() { "blocked".to_string() } else { format!("-> {}", n(&r["to"])) };
            let when =
                if r["tick"].is_null() { format!("hour {}", n(&r["hour"])) } else { format!("tick {}", n(&r["tick"])) };
            println!(
                "  {when:<10} {:<8} {:<24} {what:<13} energy {}",
                n(&r["persona"]),
                n(&r["record"]),
                n(&r["energy"])
            );
        }
    })
}

fn health(dir: &RunDir) -> Result<()> {
    let l = load(dir)?;
    let config = spec_from_header(&l.trace.header)?.config.raw.consolidation;
    let last_tick = l.trace.ticks.last().map(|t| t.tick);
    let mut last_ops = std::collections::BTreeMap::new();
    for op in &l.ops {
        last_ops.insert(op.name(), op.at().0 as f64 / 3600.0);
    }
    let failed_jobs: usize = l
        .trace
        .ticks
        .iter()
        .map(|t| t.outcomes.iter().filter(|o| matches!(o.status, engine::turn::Status::Failed { .. })).count())
        .sum();
    let v = json!({
        "config": config,
        "consolidation_at_commit": {"enabled": config.enabled, "dry_run": config.dry_run, "last_tick": last_tick},
        "operations_last_ran_at_hour": last_ops,
        "errors": {"failed_jobs": failed_jobs, "ops_log_lines_rejected": 0},
        "ops_log": l.ops_path.display().to_string(),
    });
    emit(dir.json, &v, |v| {
        println!("Consolidation config in force:\n  {}", v["config"]);
        println!(
            "At each commit: enabled {}, dry run {}, last ran at tick {}",
            config.enabled,
            config.dry_run,
            n(&v["consolidation_at_commit"]["last_tick"])
        );
        for (op, at) in &last_ops {
            println!("  {op}: last at simulated hour {at:.1}");
        }
        println!("Errors: {failed_jobs} failed jobs in the run; every recorded operation applied");
    })
}

fn inspect(id: &RecordId, dir: &RunDir) -> Result<()> {
    let l = load(dir)?;
    let found = l.world.ledgers().find(|(_, ledger)| !ledger.history(id).is_empty());
    let Some((owner, ledger)) = found else { bail!("memory id {id}: no such memory in {}", dir.run().display()) };
    let history = ledger.history(id);
    if dir.test_only && !history.iter().any(|v| v.is_test) {
        bail!("memory id {id} is not a test memory (--test-only)");
    }
    let record = id
        .memory()
        .and_then(|m| l.world.personas.iter().find(|p| p.profile.id == m.persona).and_then(|p| p.memory.get(m)));
    let text = record.map(|r| r.description.clone()).or_else(|| l.world.test_content.get(id).cloned());
    let v = json!({
        "id": id, "owner": owner, "description": text,
        "kind": record.map(|r| r.kind), "tick": record.map(|r| r.tick), "importance": record.map(|r| r.importance),
        "versions": history, "cluster_links": ledger.cluster_links(id),
    });
    emit(dir.json, &v, |v| {
        println!("{id} ({owner})\n  {}", n(&v["description"]));
        println!(
            "  {:>7} {:<10} {:>8} {:>7} {:>10} {:>10}  previous",
            "version", "tier", "energy", "access", "from hour", "to hour"
        );
        for h in &history {
            let to = h.valid_to.map_or("current".into(), |t| (t.0 / 3600).to_string());
            let prev = h.previous.map_or("-".into(), |p| p.to_string());
            println!(
                "  {:>7} {:<10} {:>8.3} {:>7} {:>10} {:>10}  {prev}",
                h.version,
                h.tier.as_str(),
                h.energy,
                h.access_count,
                h.valid_from.0 / 3600,
                to
            );
        }
        println!("  cluster links: {}", n(&v["cluster_links"]));
    })
}

fn predict(hours: f64, dir: &RunDir) -> Result<()> {
    if !(hours.is_finite() && hours >= 0.0) {
        bail!("--hours {hours}: must be a non-negative number");
    }
    let l = load(dir)?;
    let rows: Vec<Value> = live(&l.world, dir.test_only)
        .into_iter()
        .map(|(owner, v)| {
            let predicted = v.energy * (-l.rules.decay_rate(v.tier) * hours).exp();
            let verdict = if predicted < l.rules.expire_below { "will expire" } else { "will survive" };
            json!({"record": v.record, "owner": owner, "tier": v.tier.as_str(), "energy": v.energy, "predicted": predicted, "prediction": verdict})
        })
        .collect();
    let expire = rows.iter().filter(|r| r["prediction"] == "will expire").count();
    let v = json!({"hours": hours, "will_expire": expire, "will_survive": rows.len() - expire, "records": rows});
    emit(dir.json, &v, |v| {
        println!("In {hours} simulated hours without access: {expire} will expire, {} will survive", v["will_survive"]);
        for r in v["records"].as_array().into_iter().flatten().filter(|r| r["prediction"] == "will expire").take(30) {
            println!("  {:<16} {:<10} {} -> {}", n(&r["record"]), n(&r["tier"]), n(&r["energy"]), n(&r["predicted"]));
        }
    })
}

/// Applies (and, unless a dry run, records) one operation.
fn operate(dir: &RunDir, op: impl FnOnce(&Loaded) -> Result<Op>, dry_run: bool) -> Result<()> {
    let mut l = load(dir)?;
    let op = op(&l)?;
    let changes = l.world.apply(&op, &l.rules, dry_run).with_context(|| format!("{} refused", op.name()))?;
    if !dry_run {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&l.ops_path)
            .with_context(|| format!("cannot open {}", l.ops_path.display()))?;
        writeln!(f, "{}", serde_json::to_string(&op)?)
            .and_then(|_| f.sync_data())
            .with_context(|| format!("cannot write {}", l.ops_path.display()))?;
    }
    let changes: Vec<Value> = changes
        .iter()
        .filter(|(_, c)| !matches!(c, Change::Decayed { .. }))
        .map(|(o, c)| json!({"owner": o, "change": c}))
        .collect();
    let decayed = l.world.ledgers().count();
    let v = json!({"op": op, "dry_run": dry_run, "changes": changes});
    emit(dir.json, &v, |v| {
        println!(
            "{}{}: {} changes{}",
            op.name(),
            if dry_run { " (dry run, nothing written)" } else { "" },
            changes.len(),
            if matches!(op, Op::Consolidate { decay: true, .. }) {
                format!(" besides decay over {decayed} ledgers")
            } else {
                String::new()
            }
        );
        for c in v["changes"].as_array().into_iter().flatten().take(50) {
            println!("  {} {}", n(&c["owner"]), c["change"]);
        }
    })
}

fn test(cmd: TestCommand) -> Result<()> {
    match cmd {
        TestCommand::Create { content, energy, tier, dir } => {
            let tier = Tier::parse(&tier)
                .filter(|t| t.live())
                .with_context(|| format!("--tier {tier:?}: expected working, shortTerm or longTerm"))?;
            if !(energy.is_finite() && energy >= 0.0) {
                bail!("--energy {energy}: must be a non-negative number");
            }
            operate(
                &dir,
                |l| {
                    Ok(Op::TestCreate {
                        id: RecordId::Named(format!(
                            "t-{:04}",
                            l.world
                                .test
                                .versions()
                                .iter()
                                .map(|v| &v.record)
                                .collect::<std::collections::BTreeSet<_>>()
                                .len()
                                + 1
                        )),
                        content,
                        energy,
                        tier,
                        at: l.now,
                    })
                },
                false,
            )
        }
        TestCommand::Boost { id, amount, dir } => {
            if !(amount.is_finite() && amount >= 0.0) {
                bail!("--amount {amount}: must be a non-negative number");
            }
            operate(&dir, |l| Ok(Op::TestBoost { id, amount, at: l.now }), false)
        }
        TestCommand::Delete { id, all, dir } => {
            if id.is_some() == all {
                bail!("name one test memory, or pass --all");
            }
            operate(&dir, |l| Ok(Op::TestDelete { id, at: l.now }), false)
        }
        TestCommand::Scenario { name, dir } => {
            if !engine::memory::scenarios::NAMES.contains(&name.as_str()) {
                bail!("scenario {name:?}: expected one of {}", engine::memory::scenarios::NAMES.join(", "));
            }
            operate(&dir, |l| Ok(Op::TestScenario { name, at: l.now }), false)
        }
        TestCommand::List(dir) => {
            let l = load(&dir)?;
            let rows: Vec<Value> = l.world.test.currents().map(|v| json!({"id": v.record, "tier": v.tier.as_str(), "energy": v.energy, "content": l.world.test_content.get(&v.record)})).collect();
            emit(dir.json, &json!({"test_memories": rows}), |v| {
                for r in v["test_memories"].as_array().into_iter().flatten() {
                    println!(
                        "  {:<24} {:<10} {:>8}  {}",
                        n(&r["id"]),
                        n(&r["tier"]),
                        n(&r["energy"]),
                        n(&r["content"])
                    );
                }
            })
        }
    }
}

/// Runs a memory command.
pub fn memory(cmd: MemoryCommand) -> Result<()> {
    match cmd {
        MemoryCommand::Status(dir) => status(&dir),
        MemoryCommand::Energy { tier, dir } => energy(tier.as_deref(), &dir),
        MemoryCommand::Promotions { last_ticks, dir } => promotions(last_ticks, &dir),
        MemoryCommand::Health(dir) => health(&dir),
        MemoryCommand::Inspect { id, dir } => inspect(&id, &dir),
        MemoryCommand::Predict { hours, dir } => predict(hours, &dir),
        MemoryCommand::Test(cmd) => test(cmd),
        MemoryCommand::Consolidate { decay, promote, cluster, clean_expired, dry_run, hours, dir } => {
            if !(hours.is_finite() && hours >= 0.0) {
                bail!("--hours {hours}: must be a non-negative number");
            }
            let all = !(decay || promote || cluster || clean_expired);
            let test_only = dir.test_only;
            operate(
                &dir,
                |l| {
                    let at = SimTime(l.now.0 + (hours * 3600.0).round() as u64);
                    Ok(Op::Consolidate {
                        decay: decay || all,
                        promote: promote || all,
                        cluster: cluster || all,
                        clean_expired: clean_expired || all,
                        test_only,
                        at,
                    })
                },
                dry_run,
            )
        }
    }
}
