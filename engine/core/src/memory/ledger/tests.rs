use super::*;
use crate::rng::{Purpose, Stream};

fn h(hours: u64) -> SimTime {
    SimTime(hours * 3600)
}

fn r(id: &str) -> RecordId {
    RecordId::parse(id)
}

/// Decay matches `e0 * e^(-rate * hours)`, as a property over random
/// energies, tiers and intervals, including decays split in steps.
#[test]
fn decay_matches_the_closed_form() {
    let cfg = ConsolidationConfig::default();
    let mut s = Stream::derive(6, 0, 0, Purpose::Testing);
    for case in 0..500 {
        let mut l = Ledger::default();
        let e0 = s.unit() * 10.0;
        let tier = *s.pick(&[Tier::Working, Tier::ShortTerm, Tier::LongTerm]);
        l.create(&r("m"), h(0), e0, tier, false, None).expect("create");
        let (a, b) = (s.below(50) as u64, s.below(50) as u64);
        l.decay(&cfg, h(a), Scope::All, false);
        l.decay(&cfg, h(a + b), Scope::All, false);
        let expected = e0 * (-cfg.decay_rate(tier) * (a + b) as f64).exp();
        let got = l.current(&r("m")).map(|v| v.energy).unwrap_or(f64::NAN);
        assert!((got - expected).abs() <= 1e-9 * expected.max(1.0), "case {case}: {got} vs {expected}");
    }
}

/// The plan counts decay in whole hours (`duration.between(coalesce(
/// m.lastDecay, m.lastAccessed), datetime()).hours`). The part hour a pass
/// leaves is kept for the next, so passes at 0:30, 1:15 and 2:00 decay
/// exactly as one pass at 2:00.
#[test]
fn decay_counts_whole_hours_and_keeps_the_part_hour() {
    let cfg = ConsolidationConfig::default();
    let minutes = |m: u64| SimTime(m * 60);
    let mut stepped = Ledger::default();
    stepped.create(&r("m"), h(0), 4.0, Tier::Working, false, None).expect("create");
    let mut once = stepped.clone();
    let energy = |l: &Ledger| l.current(&r("m")).map_or(f64::NAN, |v| v.energy);
    stepped.decay(&cfg, minutes(30), Scope::All, false);
    assert_eq!(energy(&stepped).to_bits(), 4.0f64.to_bits(), "half an hour is 0 whole hours");
    stepped.decay(&cfg, minutes(75), Scope::All, false);
    assert_eq!(energy(&stepped).to_bits(), (4.0 * (-cfg.working_decay).exp()).to_bits(), "one whole hour");
    assert_eq!(stepped.current(&r("m")).and_then(|v| v.last_decay), Some(h(1)), "the quarter hour is kept");
    stepped.decay(&cfg, h(2), Scope::All, false);
    once.decay(&cfg, h(2), Scope::All, false);
    let want = 4.0 * (-cfg.working_decay).exp() * (-cfg.working_decay).exp();
    assert_eq!(
        (energy(&stepped).to_bits(), energy(&once).to_bits()),
        (want.to_bits(), (4.0 * (-2.0 * cfg.working_decay).exp()).to_bits())
    );
    assert!((energy(&stepped) - energy(&once)).abs() < 1e-15, "three passes decay as one");
}

#[test]
fn promotion_is_strictly_above_the_thresholds_and_batched() {
    let cfg = ConsolidationConfig { promotion_batch_size: 2, ..Default::default() };
    let mut l = Ledger::default();
    for (id, e, t) in [
        ("at", 2.0, Tier::Working),
        ("above", 2.0001, Tier::Working),
        ("st-at", 5.0, Tier::ShortTerm),
        ("st-above", 5.5, Tier::ShortTerm),
        ("w3", 3.0, Tier::Working),
    ] {
        l.create(&r(id), h(0), e, t, false, None).expect("create");
    }
    let changes = l.promote(&cfg, h(1), Scope::All, false);
    let ids = |keep: fn(&Change) -> bool| -> Vec<String> {
        changes.iter().filter(|c| keep(c)).map(|c| c.record().to_string()).collect()
    };
    let promoted = ids(|c| matches!(c, Change::Promoted { .. }));
    let blocked = ids(|c| matches!(c, Change::PromotionBlocked { .. }));
    assert_eq!(promoted, vec!["st-above", "w3"], "highest energy first, two per run");
    assert_eq!(blocked, vec!["above"]);
    assert_eq!(l.current(&r("st-above")).map(|v| v.tier), Some(Tier::LongTerm));
    assert_eq!(l.current(&r("at")).map(|v| v.tier), Some(Tier::Working), "2.0 is not above 2.0");
    assert_eq!(l.current(&r("st-at")).map(|v| v.tier), Some(Tier::ShortTerm));
    let history = l.lineage(&r("w3"));
    assert_eq!(history.len(), 2);
    assert_eq!((history[0].tier, history[0].valid_to), (Tier::Archived, Some(h(1))));
    assert_eq!(history[1].previous, Some(history[0].version));
}

/// The plan's promotion makes a new node and destroys nothing:
/// `CREATE (promoted:Memory {… tier: newTier, energy: m.energy, created:
/// m.created, promotedFrom: m.id, lastAccessed: datetime(), accessCount:
/// m.accessCount, isTest: m.isTest, validFrom: datetime(), lastPromotion:
/// datetime()})`, `CREATE (m)-[:PROMOTED_TO {at, energy}]->(promoted)`,
/// and the old node is archived with `validTo` set and one more promotion
/// attempt. Accesses then reach the new node, by either id.
#[test]
fn a_promotion_creates_a_linked_node_and_closes_the_old_one() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    let m = RecordId::Memory(crate::persona::MemoryId { persona: 7, seq: 3 });
    l.create(&m, h(1), 3.0, Tier::Working, false, Some("s".into())).expect("create");
    l.access(&m, h(2), 1.0).expect("access");
    let changes = l.promote(&cfg, h(3), Scope::All, false);
    let [Change::Promoted { record, from_version, to_version, tier: Tier::ShortTerm, energy }] = &changes[..] else {
        panic!("one promotion: {changes:?}")
    };
    let node = changes[0].node().expect("a node");
    assert_eq!((record, node.to_string().as_str()), (&m, "m-00007-0003.shortTerm"));
    assert_eq!(RecordId::parse("m-00007-0003.shortTerm"), node, "the node's id reads back");
    let old = l.history(&m);
    assert_eq!(old.len(), 1, "the old node keeps its one version");
    assert_eq!((old[0].version, old[0].tier, old[0].from_tier), (*from_version, Tier::Archived, Some(Tier::Working)));
    assert_eq!((old[0].valid_to, old[0].promotion_attempts, old[0].energy), (Some(h(3)), 1, 4.0));
    let new = l.history(&node);
    assert_eq!(new.len(), 1);
    let n = new[0];
    assert_eq!((n.version, n.tier, n.energy, *energy), (*to_version, Tier::ShortTerm, 4.0, 4.0));
    assert_eq!((n.created, n.last_accessed, n.last_promotion, n.valid_from), (h(1), h(3), Some(h(3)), h(3)));
    assert_eq!((n.access_count, n.promotion_attempts, n.session.as_deref(), n.valid_to), (2, 0, None, None));
    assert_eq!(l.promoted_from(n), Some(&m), "promotedFrom: the old node's id");
    assert_eq!(l.promoted_from(old[0]), None);
    assert_eq!(l.current(&m).map(|v| &v.record), Some(&node), "the lineage's current node");
    assert_eq!(l.lineage(&node).len(), 2);
    let Ok(Change::Accessed { record, energy }) = l.access(&m, h(4), 1.0) else { panic!("access") };
    assert_eq!((record, energy), (node.clone(), 5.0), "an access by the memory's id reaches the node");
    // A second promotion makes the long-term node from the same origin.
    let changes = l.promote(&cfg, h(4), Scope::All, false);
    assert_eq!(changes.iter().filter_map(Change::node).collect::<Vec<_>>(), []);
    l.access(&node, h(4), 1.0).expect("access");
    let long = l.promote(&cfg, h(5), Scope::All, false);
    let ids: Vec<String> = long.iter().filter_map(Change::node).map(|n| n.to_string()).collect();
    assert_eq!(ids, ["m-00007-0003.longTerm"]);
    assert_eq!(
        l.lineage(&m).iter().map(|v| v.tier).collect::<Vec<_>>(),
        [Tier::Archived, Tier::Archived, Tier::LongTerm]
    );
    // Named records get a named node.
    l.create(&r("t-0001"), h(5), 9.0, Tier::Working, true, None).expect("create");
    let named: Vec<String> =
        l.promote(&cfg, h(5), Scope::All, false).iter().filter_map(Change::node).map(|n| n.to_string()).collect();
    assert_eq!(named, ["t-0001.shortTerm"]);
    assert_eq!(r("t-0001.shortTerm").origin(), r("t-0001"));
    assert_eq!(r("t-0001.longTerm").promoted(Tier::LongTerm), r("t-0001.longTerm"));
    // Only promotion makes a node: no record takes a node's name, and a
    // node that never existed finds nothing.
    let taken = l.create(&r("t-0002.shortTerm"), h(5), 1.0, Tier::Working, true, None);
    assert_eq!(taken, Err(LedgerError::NodeName(r("t-0002.shortTerm"))));
    assert_eq!(l.access(&r("t-0001.longTerm"), h(6), 1.0), Err(LedgerError::UnknownRecord(r("t-0001.longTerm"))));
    assert!(l.current(&r("m-00007-0003.shortTerm")).is_some(), "an archived node's id reaches its lineage");
}

#[test]
fn expiry_and_deletion_keep_every_version() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    l.create(&r("real"), h(0), 1.0, Tier::Working, false, None).expect("create");
    l.create(&r("test"), h(0), 1.0, Tier::Working, true, None).expect("create");
    l.decay(&cfg, h(10), Scope::All, false);
    let expired = l.expire(&cfg, h(10), Scope::All, false);
    assert_eq!(expired.len(), 2);
    assert_eq!(l.current(&r("real")).map(|v| v.tier), Some(Tier::Expired));
    l.delete_test(&r("test"), h(11)).expect("delete");
    assert!(l.current(&r("test")).is_none());
    assert_eq!(l.history(&r("test")).len(), 2, "closed, not destroyed");
    assert_eq!(l.delete_test(&r("real"), h(11)), Err(LedgerError::NotTest("real".into())));
    assert_eq!(l.access(&r("test"), h(12), 1.0), Err(LedgerError::Closed("test".into())));
    assert_eq!(l.access(&r("nope"), h(12), 1.0), Err(LedgerError::UnknownRecord("nope".into())));
    assert_eq!(l.reset(&r("real"), -1.0, h(12)), Err(LedgerError::BadEnergy(-1.0)));
}

#[test]
fn test_only_never_touches_real_records_and_dry_run_changes_nothing() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    l.create(&r("real"), h(0), 9.0, Tier::Working, false, None).expect("create");
    l.create(&r("test"), h(0), 9.0, Tier::Working, true, None).expect("create");
    let before = l.clone();
    let dry: Vec<Change> = [
        l.decay(&cfg, h(1), Scope::All, true),
        l.promote(&cfg, h(1), Scope::All, true),
        l.expire(&cfg, h(1), Scope::All, true),
    ]
    .concat();
    assert!(!dry.is_empty());
    assert_eq!(l, before, "a dry run changes nothing");
    l.decay(&cfg, h(1), Scope::TestOnly, false);
    l.promote(&cfg, h(1), Scope::TestOnly, false);
    assert_eq!(l.current(&r("real")), before.current(&r("real")), "test-only leaves real records alone");
    assert_ne!(l.current(&r("test")), before.current(&r("test")));
}

#[test]
fn session_end_queues_for_the_lower_threshold() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    l.create(&r("a"), h(0), 1.6, Tier::Working, false, Some("s1".into())).expect("create");
    l.create(&r("b"), h(0), 1.4, Tier::Working, false, Some("s1".into())).expect("create");
    assert!(l.promote(&cfg, h(0), Scope::All, false).is_empty(), "1.6 is below 2.0");
    assert_eq!(l.end_session(&cfg, Some("s1"), Scope::All, false), vec![Change::Queued { record: "a".into() }]);
    let promoted = l.promote(&cfg, h(0), Scope::All, false);
    assert!(matches!(&promoted[..], [Change::Promoted { record, tier: Tier::ShortTerm, .. }] if *record == r("a")));
}

#[test]
fn clusters_need_coactivation_and_similarity() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    for id in ["a", "b", "c"] {
        l.create(&r(id), h(0), 1.0, Tier::Working, false, None).expect("create");
    }
    let vectors: BTreeMap<RecordId, Vec<f32>> =
        [(r("a"), vec![1.0, 0.0]), (r("b"), vec![0.9, 0.1]), (r("c"), vec![0.0, 1.0])].into();
    let v = |id: &RecordId| vectors.get(id).map(Vec::as_slice);
    for _ in 0..2 {
        l.coactivate(&["a".into(), "b".into(), "c".into()]);
    }
    assert!(l.cluster(&cfg, Scope::All, false, v).is_empty(), "two co-activations are not enough");
    l.coactivate(&["a".into(), "b".into(), "c".into()]);
    let made = l.cluster(&cfg, Scope::All, false, v);
    assert!(matches!(&made[..], [Change::Clustered { a, b, .. }] if *a == r("a") && *b == r("b")), "{made:?}");
    assert_eq!(l.cluster_links(&r("a")), vec![&r("b")]);
}

/// Decay measures from the plan's `coalesce(lastDecay, lastAccessed)`: a
/// record never decayed decays from its last access, not its creation;
/// once decayed, from its last decay, whatever accesses came between.
#[test]
fn decay_measures_from_the_last_decay_else_the_last_access() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    let mut new = NewRecord::new(r("m"), h(0), 4.0, Tier::Working);
    new.last_accessed = h(3);
    l.create_record(new).expect("create");
    let v = l.current(&r("m")).expect("made");
    assert_eq!((v.last_decay, v.decay_from()), (None, h(3)));
    let energy = |l: &Ledger| l.current(&r("m")).map_or(f64::NAN, |v| v.energy);
    l.decay(&cfg, h(5), Scope::All, false);
    let expected = 4.0 * (-cfg.working_decay * 2.0).exp();
    assert!((energy(&l) - expected).abs() < 1e-12, "two hours since the access, not five since creation");
    assert_eq!(l.current(&r("m")).map(|v| v.last_decay), Some(Some(h(5))));
    l.access(&r("m"), h(6), 1.0).expect("access");
    l.decay(&cfg, h(7), Scope::All, false);
    let expected = (expected + 1.0) * (-cfg.working_decay * 2.0).exp();
    assert!((energy(&l) - expected).abs() < 1e-12, "two hours since the last decay, not one since the access");
}

/// A promoted node was last accessed at its promotion and has not
/// decayed yet (the plan's promoted node: `lastAccessed: datetime()`, no
/// `lastDecay`), so it decays from the promotion; the archived version
/// keeps its own times.
#[test]
fn a_promoted_version_decays_from_its_promotion() {
    let cfg = ConsolidationConfig::default();
    let mut l = Ledger::default();
    l.create(&r("m"), h(0), 9.0, Tier::Working, false, None).expect("create");
    l.decay(&cfg, h(1), Scope::All, false);
    let before = l.current(&r("m")).map_or(f64::NAN, |v| v.energy);
    assert!(matches!(&l.promote(&cfg, h(4), Scope::All, false)[..], [Change::Promoted { .. }]));
    let history = l.lineage(&r("m"));
    assert_eq!((history[0].last_accessed, history[0].last_decay), (h(0), Some(h(1))), "archived as it was");
    let promoted = history[1];
    assert_eq!((promoted.last_accessed, promoted.last_decay, promoted.last_promotion), (h(4), None, Some(h(4))));
    l.decay(&cfg, h(5), Scope::All, false);
    let expected = before * (-cfg.short_term_decay).exp();
    let got = l.current(&r("m")).map_or(f64::NAN, |v| v.energy);
    assert!((got - expected).abs() < 1e-12, "one hour since the promotion, not four since the last decay: {got}");
}
