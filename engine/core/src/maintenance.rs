//! Maintenance of memory after a run, as recorded in a run directory's
//! `memory-ops.jsonl`: test memories and manual consolidation, over the
//! personas a trace reconstructs (so it sits above both [`crate::memory`]
//! and [`crate::persona`]). Replaying the
//! log over the state a trace reconstructs gives the current state, so
//! every change survives a reload, and a dry run writes nothing.

use crate::clock::SimTime;
use crate::embed::local::embed_text;
use crate::memory::ledger::{Change, ConsolidationConfig, Ledger, LedgerError, RecordId, Scope, Tier};
use crate::memory::scenarios;
use crate::persona::PersonaState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One recorded operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// Create a test memory.
    TestCreate {
        /// Its id.
        id: RecordId,
        /// Its text.
        content: String,
        /// Starting energy.
        energy: f64,
        /// Starting tier.
        tier: Tier,
        /// Its vector, embedded when the operation was made through the
        /// run's embedding provider. Logs written before vectors were
        /// recorded have none: their test memories get the local hash
        /// embedder's vector, as they did then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vector: Option<Vec<f32>>,
        /// When.
        at: SimTime,
    },
    /// Access a test memory.
    TestBoost {
        /// Which.
        id: RecordId,
        /// Energy added.
        amount: f64,
        /// When.
        at: SimTime,
    },
    /// Close test memories (one, or all with `None`).
    TestDelete {
        /// Which.
        id: Option<RecordId>,
        /// When.
        at: SimTime,
    },
    /// Create a test scenario.
    TestScenario {
        /// Its name.
        name: String,
        /// The vectors of its texts ([`scenarios::texts`]), in order, embedded
        /// through the run's embedding provider; empty for a scenario
        /// without texts (or a log written before they were recorded).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        vectors: Vec<Vec<f32>>,
        /// When.
        at: SimTime,
    },
    /// Promote one record a tier up whatever its energy.
    ForcePromote {
        /// Which.
        id: RecordId,
        /// Refuse a real record.
        #[serde(default)]
        test_only: bool,
        /// When.
        at: SimTime,
    },
    /// Set one record's energy (a new version).
    ResetEnergy {
        /// Which.
        id: RecordId,
        /// The new energy.
        energy: f64,
        /// Refuse a real record.
        #[serde(default)]
        test_only: bool,
        /// When.
        at: SimTime,
    },
    /// A manual consolidation pass.
    Consolidate {
        /// Decay energy.
        decay: bool,
        /// Promote.
        promote: bool,
        /// Form clusters.
        cluster: bool,
        /// Expire records below the threshold.
        clean_expired: bool,
        /// Touch test memories only.
        test_only: bool,
        /// Promote only records in this tier.
        #[serde(default)]
        tier: Option<Tier>,
        /// When.
        at: SimTime,
    },
}

impl Op {
    /// When the operation happens.
    pub fn at(&self) -> SimTime {
        match self {
            Op::TestCreate { at, .. }
            | Op::TestBoost { at, .. }
            | Op::TestDelete { at, .. }
            | Op::TestScenario { at, .. }
            | Op::ForcePromote { at, .. }
            | Op::ResetEnergy { at, .. }
            | Op::Consolidate { at, .. } => *at,
        }
    }

    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Op::TestCreate { .. } => "test create",
            Op::TestBoost { .. } => "test boost",
            Op::TestDelete { .. } => "test delete",
            Op::TestScenario { .. } => "test scenario",
            Op::ForcePromote { .. } => "force promote",
            Op::ResetEnergy { .. } => "reset energy",
            Op::Consolidate { .. } => "consolidate",
        }
    }
}

/// The memory of a run: every persona's ledger and the test ledger.
#[derive(Debug, Clone, Default)]
pub struct MemoryWorld {
    /// Persona states, as the trace reconstructs them.
    pub personas: Vec<PersonaState>,
    /// Test memories, which belong to no persona.
    pub test: Ledger,
    /// Test memories' texts.
    pub test_content: BTreeMap<RecordId, String>,
    /// Test memories' vectors, as their operations recorded them.
    pub test_vectors: BTreeMap<RecordId, Vec<f32>>,
}

impl MemoryWorld {
    /// Every ledger with its owner's label (`test` for the test ledger).
    pub fn ledgers(&self) -> impl Iterator<Item = (String, &Ledger)> {
        self.personas
            .iter()
            .map(|p| (p.profile.label(), &p.ledger))
            .chain(std::iter::once(("test".to_string(), &self.test)))
    }

    /// The ledger holding `id`, with its owner's label: a persona's for its
    /// memories, the test ledger for named records. `test_only` refuses a
    /// persona's.
    fn ledger_of(&mut self, id: &RecordId, test_only: bool) -> Result<(String, &mut Ledger), LedgerError> {
        match id.memory() {
            Some(_) if test_only => Err(LedgerError::NotTest(id.clone())),
            Some(m) => self
                .personas
                .iter_mut()
                .find(|p| p.profile.id == m.persona)
                .map(|p| (p.profile.label(), &mut p.ledger))
                .ok_or_else(|| LedgerError::UnknownRecord(id.clone())),
            None => Ok(("test".into(), &mut self.test)),
        }
    }

    /// Applies an operation; on a dry run, to a copy. Returns the changes
    /// with the owner of each.
    pub fn apply(
        &mut self,
        op: &Op,
        cfg: &ConsolidationConfig,
        dry_run: bool,
    ) -> Result<Vec<(String, Change)>, LedgerError> {
        if dry_run {
            let mut copy = self.clone();
            return copy.apply(op, cfg, false);
        }
        let test = |c: Change| ("test".to_string(), c);
        match op {
            Op::TestCreate { id, content, energy, tier, vector, at } => {
                let c = self.test.create(id, *at, *energy, *tier, true, None)?;
                self.test_content.insert(id.clone(), content.clone());
                if let Some(v) = vector {
                    self.test_vectors.insert(id.clone(), v.clone());
                }
                Ok(vec![test(c)])
            }
            Op::TestBoost { id, amount, at } => Ok(vec![test(self.test.access(id, *at, *amount)?)]),
            Op::TestDelete { id: Some(id), at } => Ok(vec![test(self.test.delete_test(id, *at)?)]),
            Op::TestDelete { id: None, at } => {
                let ids: Vec<RecordId> = self.test.currents().map(|v| v.record.clone()).collect();
                ids.iter().map(|id| self.test.delete_test(id, *at).map(test)).collect()
            }
            Op::TestScenario { name, vectors, at } => {
                let made = scenarios::create(&mut self.test, name, *at)
                    .ok_or_else(|| LedgerError::UnknownScenario(name.clone()))??;
                let texts = scenarios::texts(name);
                for (i, (id, text)) in texts.iter().enumerate() {
                    let id = RecordId::Named(id.to_string());
                    self.test_content.insert(id.clone(), text.to_string());
                    if let Some(v) = vectors.get(i) {
                        self.test_vectors.insert(id, v.clone());
                    }
                }
                Ok(made.into_iter().map(test).collect())
            }
            Op::ForcePromote { id, test_only, at } => {
                let (owner, ledger) = self.ledger_of(id, *test_only)?;
                Ok(vec![(owner, ledger.force_promote(id, *at)?)])
            }
            Op::ResetEnergy { id, energy, test_only, at } => {
                let (owner, ledger) = self.ledger_of(id, *test_only)?;
                Ok(vec![(owner, ledger.reset(id, *energy, *at)?)])
            }
            Op::Consolidate { decay, promote, cluster, clean_expired, test_only, tier, at } => {
                let scope = if *test_only { Scope::TestOnly } else { Scope::All };
                let mut out = Vec::new();
                let mut pass = |owner: String, ledger: &mut Ledger, vector: &dyn Fn(&RecordId) -> Option<Vec<f32>>| {
                    if *decay {
                        out.extend(ledger.decay(cfg, *at, scope, false).into_iter().map(|c| (owner.clone(), c)));
                    }
                    if *promote {
                        let promoted = ledger.promote_tier(cfg, *at, scope, *tier, false);
                        out.extend(promoted.into_iter().map(|c| (owner.clone(), c)));
                    }
                    if *cluster {
                        let owned: BTreeMap<RecordId, Vec<f32>> = ledger
                            .currents()
                            .filter_map(|v| vector(&v.record).map(|x| (v.record.origin(), x)))
                            .collect();
                        let changes = ledger.cluster(cfg, scope, false, |r| owned.get(&r.origin()).map(Vec::as_slice));
                        out.extend(changes.into_iter().map(|c| (owner.clone(), c)));
                    }
                    if *clean_expired {
                        out.extend(ledger.expire(cfg, *at, scope, false).into_iter().map(|c| (owner.clone(), c)));
                    }
                };
                if !*test_only {
                    for p in &mut self.personas {
                        let PersonaState { profile, memory, ledger, .. } = p;
                        let vector = |r: &RecordId| memory.get(r.memory()?)?.vector.as_deref().map(<[f32]>::to_vec);
                        pass(profile.label(), ledger, &vector);
                    }
                }
                let (content, vectors) = (self.test_content.clone(), self.test_vectors.clone());
                let dim = self
                    .personas
                    .first()
                    .and_then(|p| p.memory.records().iter().find_map(|m| m.vector.as_ref().map(|v| v.len())))
                    .unwrap_or(256);
                // A recorded vector; else (a log from before vectors were
                // recorded) the local hash embedder's, as then.
                let vector = |r: &RecordId| {
                    let r = &r.origin();
                    vectors.get(r).cloned().or_else(|| content.get(r).map(|t| embed_text(t, dim)))
                };
                pass("test".into(), &mut self.test, &vector);
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(x: u64) -> SimTime {
        SimTime(x * 3600)
    }

    #[test]
    fn ops_round_trip_as_json_and_dry_runs_change_nothing() {
        let cfg = ConsolidationConfig::default();
        let mut w = MemoryWorld::default();
        let ops = vec![
            Op::TestCreate {
                id: "t-1".into(),
                content: "hello".into(),
                energy: 2.5,
                tier: Tier::Working,
                vector: Some(vec![0.5; 4]),
                at: h(1),
            },
            Op::TestBoost { id: "t-1".into(), amount: 1.0, at: h(1) },
            Op::Consolidate {
                decay: false,
                promote: true,
                cluster: false,
                clean_expired: false,
                test_only: true,
                tier: None,
                at: h(1),
            },
        ];
        for op in &ops {
            let line = serde_json::to_string(op).expect("json");
            assert_eq!(&serde_json::from_str::<Op>(&line).expect("parses"), op);
        }
        w.apply(&ops[0], &cfg, false).expect("create");
        w.apply(&ops[1], &cfg, false).expect("boost");
        let before = w.test.clone();
        let dry = w.apply(&ops[2], &cfg, true).expect("dry");
        assert!(matches!(&dry[..], [(_, Change::Promoted { .. })]));
        assert_eq!(w.test, before);
        w.apply(&ops[2], &cfg, false).expect("real");
        assert_eq!(w.test.current(&"t-1".into()).map(|v| v.tier), Some(Tier::ShortTerm));
        assert!(w.apply(&Op::TestBoost { id: "nope".into(), amount: 1.0, at: h(2) }, &cfg, false).is_err());
    }

    /// The plan's high-access scenario consolidated at its own "now" by a
    /// full pass (decay, then promotion): record i was last accessed 10 i
    /// minutes ago, 0 whole hours, so as in the plan's Cypher
    /// (`duration.between(…).hours`) it keeps its energy i, and 3, 4 and 5
    /// are above 2.0 and promote; 1 and 2 do not.
    #[test]
    fn a_full_pass_promotes_the_high_access_scenario_as_the_plan_does() {
        let cfg = ConsolidationConfig::default();
        let mut w = MemoryWorld::default();
        w.apply(&Op::TestScenario { name: "high-access".into(), vectors: Vec::new(), at: h(10) }, &cfg, false)
            .expect("scenario");
        let full = Op::Consolidate {
            decay: true,
            promote: true,
            cluster: true,
            clean_expired: true,
            test_only: false,
            tier: None,
            at: h(10),
        };
        let promoted: Vec<(String, Tier, f64)> = w
            .apply(&full, &cfg, false)
            .expect("pass")
            .into_iter()
            .filter_map(|(_, c)| {
                let Change::Promoted { record, tier, energy, .. } = c else { return None };
                Some((record.to_string(), tier, energy))
            })
            .collect();
        let ids: Vec<&str> = promoted.iter().map(|(id, ..)| id.as_str()).collect();
        assert_eq!(ids, ["test-high-access-5", "test-high-access-4", "test-high-access-3"], "highest energy first");
        for (id, tier, energy) in &promoted {
            let i: f64 = id.trim_start_matches("test-high-access-").parse().expect("a number");
            let expected = i;
            assert_eq!(*tier, Tier::ShortTerm, "{id}");
            assert!((energy - expected).abs() < 1e-12, "{id}: {energy} vs {expected}");
            let current = w.test.current(&id.as_str().into()).expect("current");
            assert_eq!(
                (current.last_accessed, current.tier),
                (h(10), Tier::ShortTerm),
                "{id}: accessed at its promotion"
            );
        }
        assert_eq!(w.test.current(&"test-high-access-2".into()).map(|v| v.tier), Some(Tier::Working));
    }
}
