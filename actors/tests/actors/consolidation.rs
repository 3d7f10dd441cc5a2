use crate::support::{config, run_with};
use actors::run::RunSpec;
use engine::memory::Tier;

#[test]
fn expired_memories_are_never_retrieved() {
    // Working memories lose almost everything in an hour and accesses add
    // nothing: each tick's memories expire at the next commit.
    let mut spec = RunSpec::defaults(3, 20, 4);
    spec.config = config("[consolidation.rules]\nworking_decay = 10.0\naccess_boost = 0.0\n");
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
    let (result, _) = run_with(RunSpec::defaults(3, 20, 5), 2);
    let s = &result.summary.consolidation;
    assert!(s.promoted > 0 && s.queued > 0, "{s:?}");
    let state = result.final_states[0].as_ref().expect("alive");
    let promoted = state.ledger.currents().find(|v| v.tier == Tier::ShortTerm).expect("a promoted memory");
    let history = state.ledger.history(&promoted.record);
    assert_eq!(history.first().map(|v| v.tier), Some(Tier::Archived), "the working version is closed, not replaced");
    assert_eq!(promoted.previous, history.first().map(|v| v.version));
}
