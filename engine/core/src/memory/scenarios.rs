//! Test scenarios: sets of test records that each show one behaviour of
//! consolidation. Every record is a test record, so scenarios never touch
//! real memories.

use super::ledger::{Change, Ledger, LedgerError, NewRecord, RecordId, Tier};
use crate::clock::SimTime;

/// The scenario names.
pub const NAMES: &[&str] = &["high-access", "gradual-decay", "promotion-ready", "cluster-formation"];

/// Texts of the cluster-formation scenario: the first two are near
/// paraphrases, the third is unrelated.
pub const CLUSTER_TEXTS: &[(&str, &str)] = &[
    ("test-cluster-1", "the trail running shoe is light and made from recycled bottles"),
    ("test-cluster-2", "a light trail running shoe made from recycled plastic bottles"),
    ("test-cluster-3", "energy bills may rise twelve percent during the summer heatwave"),
];

/// The texts of scenario `name`'s records, by record id: what the caller
/// embeds (through the run's embedding provider) and records with the
/// operation. Only cluster-formation has texts.
pub fn texts(name: &str) -> &'static [(&'static str, &'static str)] {
    match name {
        "cluster-formation" => CLUSTER_TEXTS,
        _ => &[],
    }
}

/// Creates scenario `name` at `now`. Unknown names are `None`.
pub fn create(ledger: &mut Ledger, name: &str, now: SimTime) -> Option<Result<Vec<Change>, LedgerError>> {
    let test = |l: &mut Ledger, id: String, energy: f64, tier: Tier| {
        l.create(&RecordId::Named(id), now, energy, tier, true, Some(format!("scenario:{name}")))
    };
    let run = |l: &mut Ledger| -> Result<Vec<Change>, LedgerError> {
        let mut out = Vec::new();
        match name {
            // The plan's: record i (1 to 5) has energy i, 10 - i accesses,
            // was created i hours ago and last accessed 10 i minutes ago.
            "high-access" => {
                for i in 1..=5u64 {
                    let id = RecordId::Named(format!("test-high-access-{i}"));
                    let mut new = NewRecord::new(id, now, i as f64, Tier::Working).test();
                    new.session = Some(format!("scenario:{name}"));
                    new.created = SimTime(now.0.saturating_sub(i * 3600));
                    new.last_accessed = SimTime(now.0.saturating_sub(i * 600));
                    new.access_count = 10 - i as u32;
                    out.push(l.create_record(new)?);
                }
            }
            // Unaccessed records from 0.2 to 3.0: decay expires them from the bottom up.
            "gradual-decay" => {
                for (i, e) in [0.2, 0.5, 1.0, 2.0, 3.0].into_iter().enumerate() {
                    out.push(test(l, format!("test-gradual-decay-{}", i + 1), e, Tier::Working)?);
                }
            }
            // Just above each threshold.
            "promotion-ready" => {
                out.push(test(l, "test-promotion-ready-1".into(), 2.5, Tier::Working)?);
                out.push(test(l, "test-promotion-ready-2".into(), 3.0, Tier::Working)?);
                out.push(test(l, "test-promotion-ready-3".into(), 5.5, Tier::ShortTerm)?);
            }
            // Three records retrieved together three times; two are similar.
            "cluster-formation" => {
                for (id, _) in CLUSTER_TEXTS {
                    out.push(test(l, id.to_string(), 1.0, Tier::Working)?);
                }
                let ids: Vec<RecordId> = CLUSTER_TEXTS.iter().map(|(id, _)| RecordId::Named(id.to_string())).collect();
                for _ in 0..3 {
                    l.coactivate(&ids);
                }
            }
            _ => unreachable!("names are checked before running; this is a bug"),
        }
        Ok(out)
    };
    NAMES.contains(&name).then(|| run(ledger))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{ConsolidationConfig, Scope};

    fn h(hours: u64) -> SimTime {
        SimTime(hours * 3600)
    }

    fn tiers(l: &Ledger, prefix: &str) -> Vec<Tier> {
        l.currents().filter(|v| v.record.to_string().starts_with(prefix)).map(|v| v.tier).collect()
    }

    fn fresh(name: &str) -> Ledger {
        let mut l = Ledger::default();
        assert!(create(&mut l, name, h(2)).expect("known").is_ok(), "{name}");
        assert!(l.currents().all(|v| v.is_test), "scenarios make test records only");
        l
    }

    #[test]
    fn each_scenario_shows_its_behaviour() {
        let cfg = ConsolidationConfig::default();

        let mut l = fresh("high-access");
        let v = l.current(&"test-high-access-2".into()).expect("made").clone();
        assert_eq!(
            (v.energy, v.access_count, v.created, v.instance_id.as_deref()),
            (2.0, 8, h(0), Some("test-harness"))
        );
        l.promote(&cfg, h(2), Scope::TestOnly, false);
        let expected = vec![Tier::Working, Tier::Working, Tier::ShortTerm, Tier::ShortTerm, Tier::ShortTerm];
        assert_eq!(tiers(&l, "test-high-access"), expected, "energies 3, 4 and 5 are above 2.0");

        let mut l = fresh("promotion-ready");
        l.promote(&cfg, h(0), Scope::TestOnly, false);
        assert_eq!(tiers(&l, "test-promotion-ready"), vec![Tier::ShortTerm, Tier::ShortTerm, Tier::LongTerm]);

        // Four hours of working decay multiply energy by e^-2 = 0.135:
        // 0.2 and 0.5 fall below 0.1, 1.0 and up survive.
        let mut l = fresh("gradual-decay");
        l.decay(&cfg, h(6), Scope::TestOnly, false);
        l.expire(&cfg, h(6), Scope::TestOnly, false);
        let expected = vec![Tier::Expired, Tier::Expired, Tier::Working, Tier::Working, Tier::Working];
        assert_eq!(tiers(&l, "test-gradual-decay"), expected);

        let mut l = fresh("cluster-formation");
        let vectors: Vec<(RecordId, Vec<f32>)> = CLUSTER_TEXTS
            .iter()
            .map(|(id, _)| RecordId::from(*id))
            .map(|id| {
                let text = texts("cluster-formation").iter().find(|(i, _)| RecordId::from(*i) == id).expect("a text").1;
                (id.clone(), crate::embed::local::embed_text(text, 256))
            })
            .collect();
        let made = l.cluster(&cfg, Scope::TestOnly, false, |r| {
            vectors.iter().find(|(id, _)| id == r).map(|(_, v)| v.as_slice())
        });
        assert_eq!(made.len(), 1, "{made:?}");
        assert_eq!(l.cluster_links(&"test-cluster-1".into()), vec![&RecordId::from("test-cluster-2")]);

        let mut l = fresh("high-access");
        assert!(create(&mut l, "high-access", h(0)).expect("known").is_err(), "ids are not reused");
        assert!(create(&mut l, "nope", h(0)).is_none());
    }
}
