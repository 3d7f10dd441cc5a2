use crate::support::run_with;
use actors::run::RunSpec;
use engine::scenario::Scenario;

fn spec(seed: u64, scenario: &str) -> RunSpec {
    let mut s = RunSpec::defaults(seed, 120, 4);
    s.scenario = Scenario::builtin(scenario).expect("built in");
    s
}

#[test]
fn same_seed_same_digests_at_any_thread_count() {
    for scenario in ["default", "repeat-exposure"] {
        let (one, _) = run_with(spec(7, scenario), 1);
        let (four, _) = run_with(spec(7, scenario), 4);
        let msg = format!("seed 7, scenario {scenario}; reproduce: sim-cli run --seed 7 --personas 120 --ticks 4 --scenario {scenario} --threads 1 vs --threads 4");
        assert_eq!(one.summary.digest, four.summary.digest, "{msg}");
        assert_eq!(one.summary.full_digest, four.summary.full_digest, "{msg}");
        assert_eq!(one.final_states, four.final_states, "{msg}");
        assert_eq!(one.summary.jobs, four.summary.jobs);
    }
}

#[test]
fn different_seeds_give_different_digests() {
    let (a, _) = run_with(spec(7, "default"), 2);
    let (b, _) = run_with(spec(8, "default"), 2);
    assert_ne!(a.summary.digest, b.summary.digest);
    assert_ne!(a.summary.full_digest, b.summary.full_digest);
}
