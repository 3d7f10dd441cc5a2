use crate::support::{config, run_with};
use actors::run::RunSpec;
use engine::embed::Strategy;
use engine::scenario::Scenario;

#[test]
fn empty_memories_make_no_retrieval_calls() {
    let (result, reports) = run_with(RunSpec::defaults(5, 200, 2), 2);
    assert_eq!(reports[0].retrieval.0.port_invocations, 0, "tick 1: nobody remembers anything yet");
    assert_eq!(reports[0].retrieval.0.texts_requested, 0);
    assert_eq!(reports[0].memory.0.port_invocations, 1);
    assert_eq!(reports[1].retrieval.0.port_invocations, 1);
    assert_eq!(reports[1].retrieval.0.texts_requested, 200);
    assert_eq!(result.summary.embedding.retrieval_port_invocations, 1);
}

#[test]
fn a_shared_stimulus_is_embedded_once_per_stage() {
    let mut spec = RunSpec::defaults(5, 300, 2);
    spec.scenario = Scenario::builtin("launch-day").expect("built in");
    let (_, reports) = run_with(spec, 2);
    let r = &reports[1].retrieval.0;
    assert_eq!((r.texts_requested, r.unique_texts_submitted, r.port_invocations), (300, 1, 1));
}

#[test]
fn nonpositive_k_skips_retrieval_embedding() {
    let mut spec = RunSpec::defaults(5, 20, 3);
    spec.config = config("[retrieval]\nk = 0\n");
    let (result, reports) = run_with(spec, 2);
    assert_eq!(result.summary.embedding.retrieval_port_invocations, 0);
    assert!(reports.iter().flat_map(|r| &r.outcomes).all(|o| o.retrieved.is_empty()));
}

#[test]
fn batched_and_per_persona_agree_on_content_not_on_calls() {
    let run = |strategy, threads| {
        let mut spec = RunSpec::defaults(9, 40, 3);
        spec.scenario = Scenario::builtin("launch-day").expect("built in");
        spec.config = config("[embedding]\nbatch_size = 16\n");
        spec.strategy = strategy;
        run_with(spec, threads).0
    };
    let batched = run(Strategy::Batched, 2);
    for baseline in [Strategy::PerConsumer, Strategy::PerConsumerConcurrent] {
        let per = run(baseline, 2);
        assert_eq!(batched.summary.digest, per.summary.digest, "{baseline:?}: same content");
        assert_eq!(batched.final_states, per.final_states);
        assert_ne!(batched.summary.full_digest, per.summary.full_digest, "request grouping and costs differ");
        assert!(per.summary.embedding.port_invocations > 10 * batched.summary.embedding.port_invocations);
        for s in [&batched.summary, &per.summary] {
            assert_eq!(s.cost.allocated_total_nano_usd, s.cost.provider_total_nano_usd);
        }
    }
    // Concurrent calls decide cache hits in request order: the same costs
    // and grouping at any thread count.
    let one = run(Strategy::PerConsumerConcurrent, 1);
    let four = run(Strategy::PerConsumerConcurrent, 4);
    assert_eq!(one.summary.full_digest, four.summary.full_digest);
    assert_eq!(one.summary.embedding, four.summary.embedding);
}

#[test]
fn runs_without_an_embedding_port() {
    let mut spec = RunSpec::defaults(5, 20, 3);
    spec.config = config("[embedding]\nmodel = \"none\"\n");
    let (result, reports) = run_with(spec, 2);
    assert_eq!(result.summary.embedding.port_invocations, 0);
    assert_eq!(result.summary.jobs.ok, 60);
    assert!(reports[2].outcomes.iter().all(|o| !o.retrieved.is_empty()), "recency and importance still rank");
    let state = result.final_states[0].as_ref().expect("alive");
    assert!(state.memory.records().iter().all(|m| m.vector.is_none()));
}

#[test]
fn upstream_requests_are_unique_texts_over_the_batch_size() {
    let mut spec = RunSpec::defaults(5, 60, 3);
    spec.config = config("[embedding]\nbatch_size = 16\ncache = false\n");
    let (_, reports) = run_with(spec, 2);
    for r in &reports {
        for (stats, _, _) in [&r.retrieval, &r.memory] {
            assert_eq!(
                stats.upstream_requests,
                stats.unique_texts_submitted.div_ceil(16),
                "tick {}: {stats:?}",
                r.tick
            );
        }
    }
}
