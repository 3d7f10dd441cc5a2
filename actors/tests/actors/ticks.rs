use crate::support::run_with;
use actors::run::RunSpec;

#[test]
fn memories_become_visible_at_the_next_tick_and_stay_private() {
    let (result, reports) = run_with(RunSpec::defaults(21, 30, 3), 2);
    for (t, report) in reports.iter().enumerate() {
        let tick = t as u32 + 1;
        for o in &report.outcomes {
            for id in &o.retrieved {
                assert_eq!(id.persona, o.persona, "a persona ranks only its own memories");
                let state = result.final_states[o.persona as usize].as_ref().expect("alive");
                let m = state.memory.get(*id).expect("retrieved memory exists");
                assert!(m.tick < tick, "tick {tick} retrieved a memory of tick {}", m.tick);
            }
        }
    }
    assert!(reports[0].outcomes.iter().all(|o| o.retrieved.is_empty()));
    assert!(reports[1].outcomes.iter().all(|o| !o.retrieved.is_empty()));
    let state = result.final_states[0].as_ref().expect("alive");
    assert_eq!(state.memory.records()[0].tick, 1);
    assert!(state.memory.records().iter().all(|m| m.vector.is_some()));
}

#[test]
fn reflections_run_when_importance_accumulates() {
    let (result, reports) = run_with(RunSpec::defaults(2, 100, 6), 2);
    assert!(result.summary.chat.reflections > 0);
    let reflected =
        reports.iter().flat_map(|r| &r.outcomes).find(|o| o.reflection.is_some()).expect("someone reflected");
    assert!(reflected.memories.len() >= 2, "a reflection leaves memories of its own");
}

#[test]
fn the_budget_stops_the_run_at_a_tick_boundary() {
    let mut spec = RunSpec::defaults(1, 50, 5);
    spec.budget_nano_usd = Some(1);
    let (result, reports) = run_with(spec, 2);
    let s = &result.summary;
    assert_eq!(reports.len(), 1);
    assert_eq!(s.ticks_completed, 1);
    let stop = s.stopped.as_ref().expect("stopped");
    assert_eq!((stop.reason, stop.after_tick), (engine::summary::StopReason::Budget, 1));
    assert!(stop.spent_nano_usd >= 1);
}
