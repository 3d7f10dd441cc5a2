//! `sim-cli memory`: memory consolidation in a recorded run. The state is
//! reconstructed from the trace (no model call) and from the operations
//! these commands recorded in the run directory's `memory-ops.jsonl`.

use actors::replay::spec_from_header;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use engine::clock::SimTime;
use engine::maintenance::{MemoryWorld, Op};
use engine::memory::{Change, RecordId, Tier, Version};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

mod loaded;
mod test_memories;
mod views;
use loaded::{embed_like_the_run, load, Loaded};
use test_memories::test;
use views::*;

impl RunDirArgs {
    /// The run directory, however it was given.
    pub fn run(&self) -> &std::path::Path {
        self.dir.as_deref().or(self.run_flag.as_deref()).unwrap_or(std::path::Path::new("."))
    }
}

/// Options shared by the memory commands.
#[derive(Debug, Clone, Args)]
pub struct RunDirArgs {
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
    Status(RunDirArgs),
    /// Live memories with their energy (id, tier, energy, last access), and the energy histogram.
    Energy {
        /// Only this tier: working, shortTerm or longTerm.
        #[arg(long)]
        tier: Option<String>,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Recent promotions and promotions blocked by the batch size.
    Promotions {
        /// Promotions of the last N simulated hours before the run's end (tick commits and manual passes).
        #[arg(long, value_name = "N", default_value_t = 24, conflicts_with = "last_ticks")]
        last_hours: u32,
        /// Instead: the last N ticks of the run (manual passes are always shown).
        #[arg(long, value_name = "N")]
        last_ticks: Option<u32>,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// The configuration in force, when each operation last ran, error counts.
    Health(RunDirArgs),
    /// One memory: its record, every version, and its cluster links.
    Inspect {
        /// Memory id, e.g. m-00003-0001 or a test memory's id.
        id: RecordId,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Each memory's energy after its hours since last access, and which will expire.
    Predict {
        /// Simulated hours past the run's end to forecast to (whole hours; 0: at the run's end).
        #[arg(long = "hours-ahead", value_name = "H", default_value_t = 0)]
        hours_ahead: u32,
        #[command(flatten)]
        dir: RunDirArgs,
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
        /// Promote only this tier: working or shortTerm.
        #[arg(long, value_name = "TIER", requires = "promote")]
        tier: Option<String>,
        /// Whole simulated hours that pass before the pass (the plan counts hours whole).
        #[arg(long, value_name = "H", default_value_t = 1)]
        hours: u32,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Promote one memory a tier up, whatever its energy (a new version).
    ForcePromote {
        /// Memory id.
        id: RecordId,
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Set one memory's energy (a new version).
    ResetEnergy {
        /// Memory id.
        id: RecordId,
        /// The new energy.
        #[arg(long, allow_negative_numbers = true)]
        energy: f64,
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Promotion readiness per tier: ready, not ready, and how far below the threshold.
    Ready(RunDirArgs),
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
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Access a test memory, raising its energy.
    Boost {
        /// Its id.
        id: RecordId,
        /// Energy added.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        amount: f64,
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// List test memories.
    List(RunDirArgs),
    /// Close test memories (their versions stay readable).
    Delete {
        /// One id; omit with --all.
        id: Option<RecordId>,
        /// Every test memory.
        #[arg(long)]
        all: bool,
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
    /// Create a scenario: high-access, gradual-decay, promotion-ready, cluster-formation.
    Scenario {
        /// Its name.
        name: String,
        /// Show what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        dir: RunDirArgs,
    },
}

fn emit<T: Serialize>(json: bool, v: &T, text: impl FnOnce(&T)) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        text(v);
    }
    Ok(())
}

/// A number for the text output, `-` when there is none.
fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

const TIERS: [Tier; 5] = [Tier::Working, Tier::ShortTerm, Tier::LongTerm, Tier::Archived, Tier::Expired];

/// Versions that count in the tier tables: current ones, and the versions
/// promotion archived.
fn counted(v: &Version) -> bool {
    v.valid_to.is_none() || v.tier == Tier::Archived
}

fn counts<'a>(versions: impl Iterator<Item = &'a Version>) -> TierCounts {
    let mut c = TierCounts::default();
    for v in versions.filter(|v| counted(v)) {
        c.add(v.tier);
    }
    c
}

fn live(world: &MemoryWorld, test_only: bool) -> Vec<(String, &Version)> {
    world
        .ledgers()
        .flat_map(|(owner, l)| l.currents().map(move |v| (owner.clone(), v)).collect::<Vec<_>>())
        .filter(|(_, v)| v.tier.live() && (!test_only || v.is_test))
        .collect()
}

fn status(dir: &RunDirArgs) -> Result<()> {
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
        EnergyStats { n: 0, average: None, median: None, min: None, max: None }
    } else {
        let median = if k % 2 == 1 { e[k / 2] } else { (e[k / 2 - 1] + e[k / 2]) / 2.0 };
        let average = e.iter().sum::<f64>() / k as f64;
        EnergyStats { n: k, average: Some(average), median: Some(median), min: Some(e[0]), max: Some(e[k - 1]) }
    };
    let current = live(&l.world, dir.test_only);
    let tier_stats = [Tier::Working, Tier::ShortTerm, Tier::LongTerm]
        .into_iter()
        .map(|t| {
            (t.as_str(), TierStats::of(current.iter().filter(|(_, v)| v.tier == t).map(|(_, v)| v.energy).collect()))
        })
        .collect();
    let all_current: Vec<&Version> = l
        .world
        .ledgers()
        .flat_map(|(_, l)| l.currents().collect::<Vec<_>>())
        .filter(|v| !dir.test_only || v.is_test)
        .collect();
    let tests = all_current.iter().filter(|v| v.is_test).count();
    let test_ratio = (!all_current.is_empty()).then(|| tests as f64 / all_current.len() as f64);
    let v = Status {
        run: dir.run().display().to_string(),
        test_only: dir.test_only,
        tier_stats,
        test_ratio,
        tiers: counts(all.iter().copied()),
        real: counts(all.iter().copied().filter(|v| !v.is_test)),
        test: counts(all.iter().copied().filter(|v| v.is_test)),
        energy,
    };
    emit(dir.json, &v, |v| {
        println!("Memory in {}{}", dir.run().display(), if dir.test_only { " (test memories only)" } else { "" });
        println!("  {:<10} {:>10} {:>10} {:>10}", "tier", "all", "real", "test");
        for t in TIERS {
            println!("  {:<10} {:>10} {:>10} {:>10}", t.as_str(), v.tiers.get(t), v.real.get(t), v.test.get(t));
        }
        let e = &v.energy;
        println!(
            "  energy of live memories: n {}, average {}, median {}, min {}, max {}",
            e.n,
            num(e.average),
            num(e.median),
            num(e.min),
            num(e.max)
        );
    })
}

fn energy(tier: Option<&str>, dir: &RunDirArgs) -> Result<()> {
    let want = match tier {
        None => None,
        Some(t) => match Tier::parse(t).filter(|t| t.live()) {
            Some(t) => Some(t),
            None => bail!("--tier {t:?}: expected working, shortTerm or longTerm"),
        },
    };
    let l = load(dir)?;
    let mut buckets: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    let mut records = Vec::new();
    for (owner, v) in live(&l.world, dir.test_only).into_iter().filter(|(_, v)| want.is_none_or(|t| v.tier == t)) {
        *buckets.entry(v.energy.max(0.0).floor() as u64).or_default() += 1;
        let last_accessed_hour = v.last_accessed.0 / 3600;
        records.push(EnergyRecord {
            record: &v.record,
            owner,
            tier: v.tier.as_str(),
            energy: v.energy,
            last_accessed_hour,
        });
    }
    let average = (!records.is_empty()).then(|| records.iter().map(|r| r.energy).sum::<f64>() / records.len() as f64);
    let histogram = buckets.iter().map(|(b, c)| Bucket { from: *b, to: b + 1, count: *c }).collect();
    let v = EnergyHistogram { tier: want.map(Tier::as_str), count: records.len(), average, records, histogram };
    emit(dir.json, &v, |v| {
        let scope = want.map_or(String::new(), |t| format!(" in {}", t.as_str()));
        println!("Live memories{scope}: {} (average energy {})", v.count, num(v.average));
        println!("  {:<24} {:<10} {:<10} {:>8} {:>12}", "id", "owner", "tier", "energy", "last access");
        for r in v.records.iter().take(ENERGY_LISTED) {
            let hour = format!("hour {}", r.last_accessed_hour);
            println!("  {:<24} {:<10} {:<10} {:>8.3} {hour:>12}", r.record.to_string(), r.owner, r.tier, r.energy);
        }
        if v.count > ENERGY_LISTED {
            println!("  ... and {} more (--json lists every one)", v.count - ENERGY_LISTED);
        }
        let max = buckets.values().copied().max().unwrap_or(0);
        println!("Energy histogram{scope}");
        for (b, c) in &buckets {
            let bar = "#".repeat(((*c as f64 / max.max(1) as f64) * 50.0).ceil() as usize);
            println!("  [{b:>3}, {:>3}) {c:>8}  {bar}", b + 1);
        }
    })
}

/// How many memories `memory energy` lists on the terminal.
const ENERGY_LISTED: usize = 100;

fn ready(dir: &RunDirArgs) -> Result<()> {
    let l = load(dir)?;
    let current = live(&l.world, dir.test_only);
    let readiness = |tier: Tier, threshold: f64| {
        let energies: Vec<f64> = current.iter().filter(|(_, v)| v.tier == tier).map(|(_, v)| v.energy).collect();
        let gaps: Vec<f64> = energies.iter().filter(|e| **e <= threshold).map(|e| threshold - e).collect();
        Readiness {
            threshold,
            ready: energies.len() - gaps.len(),
            not_ready: gaps.len(),
            closest_gap: gaps.iter().copied().reduce(f64::min),
            mean_gap: (!gaps.is_empty()).then(|| gaps.iter().sum::<f64>() / gaps.len() as f64),
        }
    };
    let v = Ready {
        working: readiness(Tier::Working, l.rules.working_to_short),
        short_term: readiness(Tier::ShortTerm, l.rules.short_to_long),
    };
    emit(dir.json, &v, |v| {
        println!("Promotion readiness (energy must be above the threshold)");
        println!(
            "  {:<10} {:>9} {:>7} {:>9} {:>11} {:>9}",
            "tier", "threshold", "ready", "not ready", "closest gap", "mean gap"
        );
        for (name, r) in [("working", &v.working), ("shortTerm", &v.short_term)] {
            println!(
                "  {name:<10} {:>9.3} {:>7} {:>9} {:>11} {:>9}",
                r.threshold,
                r.ready,
                r.not_ready,
                num(r.closest_gap),
                num(r.mean_gap)
            );
        }
    })
}

/// `memory promotions`: by default those of the last `last_hours` whole
/// simulated hours before the run's end (its last tick, or its latest
/// operation), as the plan's `--memory-promotions [--last-hours=24]`; with
/// `last_ticks`, those of the last ticks and every manual pass.
fn promotions(last_hours: u32, last_ticks: Option<u32>, dir: &RunDirArgs) -> Result<()> {
    let l = load(dir)?;
    let last = l.trace.ticks.last().map_or(0, |t| t.tick);
    let hour = |t: SimTime| t.0 / 3600;
    let end_hour = hour(l.now);
    let since_hour = end_hour.saturating_sub(u64::from(last_hours));
    let tick_hours = u64::from(l.config.raw.run.hours_per_tick);
    // The first tick in the window: tick t happens at hour t x hours_per_tick.
    let from = match last_ticks {
        Some(k) => last.saturating_sub(k) + 1,
        None => (1..=last).find(|t| u64::from(*t) * tick_hours >= since_hour).unwrap_or(last + 1),
    };
    let in_window = |at: SimTime| last_ticks.is_some() || hour(at) >= since_hour;
    fn event(tick: Option<u32>, hour: Option<f64>, persona: String, c: &Change) -> Option<PromotionEvent<'_>> {
        match c {
            Change::Promoted { record, tier, energy, .. } => Some(PromotionEvent {
                tick,
                hour,
                persona,
                record,
                to: Some(tier.as_str()),
                node: c.node(),
                blocked: false,
                energy: *energy,
            }),
            Change::PromotionBlocked { record, energy } => Some(PromotionEvent {
                tick,
                hour,
                persona,
                record,
                to: None,
                node: None,
                blocked: true,
                energy: *energy,
            }),
            Change::Created { .. }
            | Change::Decayed { .. }
            | Change::Accessed { .. }
            | Change::Expired { .. }
            | Change::Reset { .. }
            | Change::Queued { .. }
            | Change::Closed { .. }
            | Change::Clustered { .. } => None,
        }
    }
    let mut events = Vec::new();
    if !dir.test_only {
        for t in l.trace.ticks.iter().filter(|t| t.tick >= from) {
            for (p, changes) in &t.consolidation {
                let label = engine::persona::profile::label(*p);
                events.extend(changes.iter().filter_map(|c| event(Some(t.tick), None, label.clone(), c)));
            }
        }
    }
    // Manual passes (`memory consolidate`), with their simulated hour.
    for (at, owner, c) in &l.op_changes {
        if (dir.test_only && owner != "test") || !in_window(*at) {
            continue;
        }
        events.extend(event(None, Some(at.0 as f64 / 3600.0), owner.clone(), c));
    }
    let promoted = events.iter().filter(|e| e.to.is_some()).count();
    let blocked = events.len() - promoted;
    let success_rate = (!events.is_empty()).then(|| promoted as f64 / events.len() as f64);
    let window = last_ticks.is_none().then_some([since_hour, end_hour]);
    let v = Promotions { from_tick: from, to_tick: last, hours: window, promoted, blocked, success_rate, events };
    emit(dir.json, &v, |v| {
        let span = match window {
            Some([a, b]) => {
                let unit = if last_hours == 1 { "hour" } else { "hours" };
                format!("the last {last_hours} simulated {unit} (hours {a} to {b})")
            }
            None => format!("ticks {from} to {last}"),
        };
        println!(
            "Promotions in {span}: {} promoted, {} blocked by the batch size (success rate {})",
            v.promoted,
            v.blocked,
            v.success_rate.map_or("-".to_string(), |r| format!("{:.1}%", 100.0 * r))
        );
        for r in v.events.iter().take(40) {
            let what = r.to.map_or("blocked".to_string(), |t| format!("-> {t}"));
            let when = match (r.tick, r.hour) {
                (Some(t), _) => format!("tick {t}"),
                (None, h) => format!("hour {}", num(h)),
            };
            println!("  {when:<10} {:<8} {:<24} {what:<13} energy {:.3}", r.persona, r.record.to_string(), r.energy);
        }
    })
}

fn health(dir: &RunDirArgs) -> Result<()> {
    let l = load(dir)?;
    let config = spec_from_header(&l.trace.header)?.config.raw.consolidation;
    let last_tick = l.trace.ticks.last().map(|t| t.tick);
    let mut last_ops = BTreeMap::new();
    for op in &l.ops {
        last_ops.insert(op.name(), op.at().0 as f64 / 3600.0);
    }
    let failed_jobs: usize = l
        .trace
        .ticks
        .iter()
        .map(|t| t.outcomes.iter().filter(|o| matches!(o.status, engine::turn::Status::Failed { .. })).count())
        .sum();
    let v = Health {
        config: &config,
        consolidation_at_commit: AtCommit { enabled: config.enabled, dry_run: config.dry_run, last_tick },
        operations_last_ran_at_hour: &last_ops,
        errors: HealthErrors {
            failed_jobs,
            ops_log_lines_rejected: l.rejected.len(),
            consolidation_errors: l.op_errors.len(),
            details: l.rejected.iter().chain(&l.op_errors).map(String::as_str).collect(),
        },
        ops_log: l.ops_path.display().to_string(),
    };
    emit(dir.json, &v, |v| {
        println!("Consolidation config in force:\n  {}", serde_json::to_string(v.config).unwrap_or_default());
        println!(
            "At each commit: enabled {}, dry run {}, last ran at tick {}",
            config.enabled,
            config.dry_run,
            last_tick.map_or("-".to_string(), |t| t.to_string())
        );
        for (op, at) in &last_ops {
            println!("  {op}: last at simulated hour {at:.1}");
        }
        let e = &v.errors;
        println!(
            "Errors: {} failed jobs in the run, {} operation log lines rejected, {} recorded operations that no longer apply",
            e.failed_jobs, e.ops_log_lines_rejected, e.consolidation_errors
        );
        for d in &e.details {
            println!("  {d}");
        }
    })
}

/// `memory inspect`: a record's lineage, the record it began as and the
/// nodes promotion made from it, with every version and the plan's
/// `PROMOTED_TO` links between the nodes.
fn inspect(id: &RecordId, dir: &RunDirArgs) -> Result<()> {
    let l = load(dir)?;
    let found = l.world.ledgers().find(|(_, ledger)| !ledger.history(id).is_empty());
    let Some((owner, ledger)) = found else { bail!("memory id {id}: no such memory in {}", dir.run().display()) };
    let history = ledger.lineage(id);
    if dir.test_only && !history.iter().any(|v| v.is_test) {
        bail!("memory id {id} is not a test memory (--test-only)");
    }
    let record = id
        .memory()
        .and_then(|m| l.world.personas.iter().find(|p| p.profile.id == m.persona).and_then(|p| p.memory.get(m)));
    let text = record.map(|r| r.description.to_string()).or_else(|| l.world.test_content.get(&id.origin()).cloned());
    let promotions: Vec<PromotionLink<'_>> = history
        .iter()
        .filter_map(|v| {
            let from = ledger.promoted_from(v)?;
            Some(PromotionLink { from, to: &v.record, at_hour: v.valid_from.0 / 3600, energy: v.energy })
        })
        .collect();
    let v = RecordView {
        id,
        owner: &owner,
        description: text,
        kind: record.map(|r| r.kind),
        tick: record.map(|r| r.tick),
        importance: record.map(|r| r.importance),
        current: ledger.current(id).map(|v| &v.record),
        versions: &history,
        promoted_to: promotions,
        cluster_links: ledger.cluster_links(id),
    };
    emit(dir.json, &v, |v| {
        println!("{id} ({owner})\n  {}", v.description.as_deref().unwrap_or("-"));
        println!(
            "  {:<24} {:>7} {:<10} {:>8} {:>7} {:>10} {:>10}  previous",
            "node", "version", "tier", "energy", "access", "from hour", "to hour"
        );
        for h in &history {
            let to = h.valid_to.map_or("current".into(), |t| (t.0 / 3600).to_string());
            let prev = h.previous.map_or("-".into(), |p| p.to_string());
            println!(
                "  {:<24} {:>7} {:<10} {:>8.3} {:>7} {:>10} {:>10}  {prev}",
                h.record.to_string(),
                h.version,
                h.tier.as_str(),
                h.energy,
                h.access_count,
                h.valid_from.0 / 3600,
                to
            );
        }
        for p in &v.promoted_to {
            println!("  promoted: {} -> {} at hour {}, energy {:.3}", p.from, p.to, p.at_hour, p.energy);
        }
        let links: Vec<String> = v.cluster_links.iter().map(|r| r.to_string()).collect();
        println!("  cluster links: [{}]", links.join(", "));
    })
}

/// `memory predict`: each live memory's energy as the plan's decay
/// prediction computes it, energy x exp(-hours since last access x its
/// tier's decay rate), the hours whole, counted to the run's end in
/// simulated time (plus `hours_ahead`), and "will expire" below the expiry
/// threshold (0.1 by default).
fn predict(hours_ahead: u32, dir: &RunDirArgs) -> Result<()> {
    let l = load(dir)?;
    let at = l.now.0 / 3600 + u64::from(hours_ahead);
    let records: Vec<Predicted<'_>> = live(&l.world, dir.test_only)
        .into_iter()
        .map(|(owner, v)| {
            let hours_since_access = at.saturating_sub(v.last_accessed.0 / 3600);
            let predicted = v.energy * (-l.rules.decay_rate(v.tier) * hours_since_access as f64).exp();
            let prediction = if predicted < l.rules.expire_below { "will expire" } else { "will survive" };
            let tier = v.tier.as_str();
            Predicted { record: &v.record, owner, tier, energy: v.energy, hours_since_access, predicted, prediction }
        })
        .collect();
    let will_expire = records.iter().filter(|r| r.prediction == "will expire").count();
    let v = Prediction { hours_ahead, at_hour: at, will_expire, will_survive: records.len() - will_expire, records };
    emit(dir.json, &v, |v| {
        let ahead = if hours_ahead == 0 { String::new() } else { format!(" + {hours_ahead} hours ahead") };
        println!(
            "At simulated hour {at} (the run's end{ahead}), from each memory's hours since its last access: \
             {will_expire} will expire, {} will survive",
            v.will_survive
        );
        for r in v.records.iter().filter(|r| r.prediction == "will expire").take(30) {
            println!(
                "  {:<24} {:<10} {:.3} -> {:.3} ({} hours since access)",
                r.record.to_string(),
                r.tier,
                r.energy,
                r.predicted,
                r.hours_since_access
            );
        }
    })
}

/// Applies (and, unless a dry run, records) one operation.
fn operate(dir: &RunDirArgs, op: impl FnOnce(&Loaded) -> Result<Op>, dry_run: bool) -> Result<()> {
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
    let changes: Vec<OwnedChange<'_>> = changes
        .iter()
        .filter(|(_, c)| !matches!(c, Change::Decayed { .. }))
        .map(|(owner, change)| OwnedChange { owner, change, node: change.node() })
        .collect();
    let decayed = l.world.ledgers().count();
    let v = Operated { op: &op, dry_run, changes };
    emit(dir.json, &v, |v| {
        println!(
            "{}{}: {} changes{}",
            op.name(),
            if dry_run { " (dry run, nothing written)" } else { "" },
            v.changes.len(),
            if matches!(op, Op::Consolidate { decay: true, .. }) {
                format!(" besides decay over {decayed} ledgers")
            } else {
                String::new()
            }
        );
        for c in v.changes.iter().take(50) {
            let node = c.node.as_ref().map_or(String::new(), |n| format!(" -> node {n}"));
            println!("  {} {}{node}", c.owner, serde_json::to_string(c.change).unwrap_or_default());
        }
    })
}

/// Runs a memory command.
pub fn memory(cmd: MemoryCommand) -> Result<()> {
    match cmd {
        MemoryCommand::Status(dir) => status(&dir),
        MemoryCommand::Energy { tier, dir } => energy(tier.as_deref(), &dir),
        MemoryCommand::Promotions { last_hours, last_ticks, dir } => promotions(last_hours, last_ticks, &dir),
        MemoryCommand::Health(dir) => health(&dir),
        MemoryCommand::Inspect { id, dir } => inspect(&id, &dir),
        MemoryCommand::Predict { hours_ahead, dir } => predict(hours_ahead, &dir),
        MemoryCommand::Test(cmd) => test(cmd),
        MemoryCommand::Consolidate { decay, promote, cluster, clean_expired, dry_run, tier, hours, dir } => {
            let tier = match tier.as_deref() {
                None => None,
                Some(t) => match Tier::parse(t) {
                    Some(t @ (Tier::Working | Tier::ShortTerm)) => Some(t),
                    Some(Tier::LongTerm | Tier::Archived | Tier::Expired) | None => {
                        bail!("--tier {t:?}: expected working or shortTerm (the tiers that promote)")
                    }
                },
            };
            let all = !(decay || promote || cluster || clean_expired);
            let test_only = dir.test_only;
            operate(
                &dir,
                |l| {
                    let at = SimTime(l.now.0 + u64::from(hours) * 3600);
                    Ok(Op::Consolidate {
                        decay: decay || all,
                        promote: promote || all,
                        cluster: cluster || all,
                        clean_expired: clean_expired || all,
                        test_only,
                        tier,
                        at,
                    })
                },
                dry_run,
            )
        }
        MemoryCommand::ForcePromote { id, dry_run, dir } => {
            let test_only = dir.test_only;
            operate(&dir, |l| Ok(Op::ForcePromote { id, test_only, at: l.now }), dry_run)
        }
        MemoryCommand::ResetEnergy { id, energy, dry_run, dir } => {
            if !(energy.is_finite() && energy >= 0.0) {
                bail!("--energy {energy}: must be a non-negative number");
            }
            let test_only = dir.test_only;
            operate(&dir, |l| Ok(Op::ResetEnergy { id, energy, test_only, at: l.now }), dry_run)
        }
        MemoryCommand::Ready(dir) => ready(&dir),
    }
}
