//! `sim-cli memory test ...`: test memories, created, boosted, deleted and
//! listed through the same recorded operations as every memory command.

use super::views::{TestMemories, TestMemory};
use super::{embed_like_the_run, emit, load, operate, TestCommand};
use anyhow::{bail, Context, Result};
use engine::maintenance::Op;
use engine::memory::{RecordId, Tier};

/// Runs a `memory test` command.
pub(super) fn test(cmd: TestCommand) -> Result<()> {
    match cmd {
        TestCommand::Create { content, energy, tier, dry_run, dir } => {
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
                                .map(|v| v.record.origin())
                                .collect::<std::collections::BTreeSet<_>>()
                                .len()
                                + 1
                        )),
                        vector: embed_like_the_run(l, std::slice::from_ref(&content))?.and_then(|mut v| v.pop()),
                        content,
                        energy,
                        tier,
                        at: l.now,
                    })
                },
                dry_run,
            )
        }
        TestCommand::Boost { id, amount, dry_run, dir } => {
            if !(amount.is_finite() && amount >= 0.0) {
                bail!("--amount {amount}: must be a non-negative number");
            }
            operate(&dir, |l| Ok(Op::TestBoost { id, amount, at: l.now }), dry_run)
        }
        TestCommand::Delete { id, all, dry_run, dir } => {
            if id.is_some() == all {
                bail!("name one test memory, or pass --all");
            }
            operate(&dir, |l| Ok(Op::TestDelete { id, at: l.now }), dry_run)
        }
        TestCommand::Scenario { name, dry_run, dir } => {
            if !engine::memory::scenarios::NAMES.contains(&name.as_str()) {
                bail!("scenario {name:?}: expected one of {}", engine::memory::scenarios::NAMES.join(", "));
            }
            operate(
                &dir,
                |l| {
                    let texts: Vec<String> =
                        engine::memory::scenarios::texts(&name).iter().map(|(_, t)| t.to_string()).collect();
                    let vectors = embed_like_the_run(l, &texts)?.unwrap_or_default();
                    Ok(Op::TestScenario { name, vectors, at: l.now })
                },
                dry_run,
            )
        }
        TestCommand::List(dir) => {
            let l = load(&dir)?;
            let test_memories = l
                .world
                .test
                .currents()
                .map(|v| TestMemory {
                    id: &v.record,
                    tier: v.tier.as_str(),
                    energy: v.energy,
                    content: l.world.test_content.get(&v.record.origin()),
                })
                .collect();
            emit(dir.json, &TestMemories { test_memories }, |v| {
                for r in &v.test_memories {
                    let content = r.content.map_or("-", String::as_str);
                    println!("  {:<24} {:<10} {:>8.3}  {content}", r.id.to_string(), r.tier, r.energy);
                }
            })
        }
    }
}
