use crate::support::{config, run_with};
use actors::run::RunSpec;
use engine::memory::{ConsolidationConfig, RecordId, Tier};

/// The consolidation plan: "Manual Before Automatic: Trigger consolidation
/// manually before scheduling", and its automation step is "NOT YET". A
/// default run never decays, promotes, clusters or expires a memory; it
/// keeps only the energy bookkeeping that a manual pass works from (an
/// access adds the boost, a new memory starts at the initial energy).
#[test]
fn a_default_run_consolidates_nothing_and_keeps_the_energy_bookkeeping() {
    let (result, reports) = run_with(RunSpec::defaults(3, 20, 5), 2);
    assert_eq!(result.summary.consolidation, Default::default(), "no automatic pass");
    assert!(reports.iter().all(|r| r.consolidation.is_empty()), "no change recorded in any tick");
    let rules = ConsolidationConfig::default();
    let mut accessed = 0;
    for state in result.final_states.iter().map(|s| s.as_ref().expect("alive")) {
        for v in state.ledger.currents() {
            assert_eq!(v.tier, Tier::Working, "{}: never promoted or expired", v.record);
            assert_eq!(v.last_decay, None, "{}: never decayed", v.record);
            let expected = rules.initial_energy + f64::from(v.access_count - 1) * rules.access_boost;
            // Sums of whole numbers: exact in floating point.
            assert!(
                v.energy.to_bits() == expected.to_bits(),
                "{}: {} is not the initial energy plus a boost per access",
                v.record,
                v.energy
            );
            accessed += usize::from(v.access_count > 1);
        }
    }
    assert!(accessed > 0, "some memories were retrieved and gained energy");
}

#[test]
fn expired_memories_are_never_retrieved() {
    // Working memories lose almost everything in an hour and accesses add
    // nothing: each tick's memories expire at the next commit.
    let mut spec = RunSpec::defaults(3, 20, 4);
    spec.config =
        config("[consolidation]\nenabled = true\n[consolidation.rules]\nworking_decay = 10.0\naccess_boost = 0.0\n");
    let (result, reports) = run_with(spec, 2);
    for r in &reports[1..] {
        for o in &r.outcomes {
            let state = result.final_states[o.persona as usize].as_ref().expect("alive");
            for id in &o.retrieved {
                let tick = state.memory.get(*id).map(|m| m.tick);
                assert_eq!(tick, Some(r.tick - 1), "tick {}: only the last tick's memories are still live", r.tick);
            }
        }
    }
    assert!(result.summary.consolidation.expired > 0);
    let state = result.final_states[0].as_ref().expect("alive");
    let first = state.ledger.history(&state.memory.records()[0].id.into());
    assert_eq!(
        first.iter().map(|v| v.tier).collect::<Vec<_>>(),
        vec![Tier::Working, Tier::Expired],
        "expiry is a new version"
    );
    assert!(first[0].valid_to.is_some() && first[1].valid_to.is_none());
}

#[test]
fn a_dry_run_reports_and_changes_nothing() {
    let run = |toml: &str| {
        let mut spec = RunSpec::defaults(3, 20, 4);
        spec.config = config(toml);
        run_with(spec, 2)
    };
    let rules = "[consolidation.rules]\nworking_decay = 10.0\n";
    let (dry, dry_reports) = run(&format!("[consolidation]\ndry_run = true\n{rules}"));
    let (off, off_reports) = run(&format!("[consolidation]\nenabled = false\n{rules}"));
    assert!(dry.summary.consolidation.expired > 0, "the dry run says what would expire");
    assert_eq!(off.summary.consolidation, Default::default());
    let retrieved = |reports: &[actors::coordinator::TickReport]| -> Vec<Vec<engine::persona::MemoryId>> {
        reports.iter().flat_map(|r| r.outcomes.iter().map(|o| o.retrieved.clone())).collect()
    };
    assert_eq!(retrieved(&dry_reports), retrieved(&off_reports), "nothing expired for real");
    let state = dry.final_states[0].as_ref().expect("alive");
    assert!(state.ledger.currents().all(|v| v.tier == Tier::Working));
    for (d, o) in dry.final_states.iter().zip(&off.final_states) {
        let (d, o) = (d.as_ref().expect("alive"), o.as_ref().expect("alive"));
        assert_eq!(d.ledger.versions(), o.ledger.versions(), "real energies and tiers as with consolidation off");
    }
}

#[test]
fn retrieved_memories_gain_energy_and_promote() {
    let mut spec = RunSpec::defaults(3, 20, 5);
    spec.config = config("[consolidation]\nenabled = true\n");
    let (result, _) = run_with(spec, 2);
    let s = &result.summary.consolidation;
    assert!(s.promoted > 0 && s.queued > 0, "{s:?}");
    let state = result.final_states[0].as_ref().expect("alive");
    let promoted = state.ledger.currents().find(|v| v.tier == Tier::ShortTerm).expect("a promoted memory");
    let history = state.ledger.lineage(&promoted.record);
    assert_eq!(history.first().map(|v| v.tier), Some(Tier::Archived), "the working version is closed, not replaced");
    assert_eq!(promoted.previous, history.first().map(|v| v.version));
    let origin = promoted.record.origin();
    assert_eq!(state.ledger.promoted_from(promoted), Some(&origin), "a new node, linked to the memory's");
    let memory = origin.memory().expect("a persona's memory");
    assert_eq!(promoted.record, RecordId::Promoted(memory, Tier::ShortTerm));
    assert!(state.is_visible(memory.seq), "a promoted memory stays retrievable");
}
