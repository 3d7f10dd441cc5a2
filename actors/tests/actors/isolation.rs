use crate::support::{config, run_with};
use actors::run::RunSpec;
use engine::turn::{Stage, Status};

#[test]
fn a_panicking_persona_fails_its_own_job_and_the_run_goes_on() {
    // Windows of 7: persona 3 panics among six others activated with it.
    let mut spec = RunSpec::defaults(3, 50, 3);
    spec.config = config("[run]\nmax_active_personas = 7\n[[faults.panic]]\npersona = 3\ntick = 2\n");
    let (result, reports) = run_with(spec, 2);
    let s = &result.summary;
    assert_eq!((s.jobs.total, s.jobs.ok, s.jobs.failed, s.jobs.refused), (150, 148, 1, 1));
    let failed = &reports[1].outcomes[3];
    assert_eq!(failed.persona, 3);
    assert!(matches!(failed.status, Status::Failed { stage: Stage::RetrievalEmbedding, .. }), "{:?}", failed.status);
    let refused = &reports[2].outcomes[3];
    assert!(
        matches!(&refused.status, Status::Refused { reason } if reason.contains("p-00003")),
        "{:?}",
        refused.status
    );
    assert!(reports[1].outcomes.iter().filter(|o| o.persona != 3).all(|o| o.status == Status::Ok));
    assert_eq!(reports[2].persona_digests[3], None);
    assert!(result.final_states[3].is_none() && result.final_states[4].is_some());
}

#[test]
fn unparseable_replies_are_retried_then_fail_with_their_costs() {
    let mut spec = RunSpec::defaults(3, 10, 1);
    spec.config = config("[chat]\nmalformed_rate = 1.0\nmax_guardrail_retries = 2\n");
    let (result, reports) = run_with(spec, 2);
    assert_eq!(result.summary.jobs.failed, 10);
    for o in &reports[0].outcomes {
        assert!(matches!(&o.status, Status::Failed { stage: Stage::Chat, reason } if reason.contains("3 attempts")));
        assert_eq!(o.chat_calls.len(), 3);
        assert!(o.spend.chat.nano_usd > 0, "a failed job keeps what it cost");
        assert!(o.memories.is_empty());
    }
    assert_eq!(result.summary.chat.guardrail_retries, 20);
    assert_eq!(result.summary.cost.allocated_total_nano_usd, result.summary.cost.provider_total_nano_usd);
}

#[test]
fn guardrail_retry_recovers_a_job() {
    let mut spec = RunSpec::defaults(11, 200, 1);
    spec.config = config("[chat]\nmalformed_rate = 0.2\n");
    let (result, reports) = run_with(spec, 2);
    let retried: Vec<_> = reports[0].outcomes.iter().filter(|o| o.chat_calls.iter().any(|c| c.attempt > 0)).collect();
    assert!(!retried.is_empty());
    assert!(retried.iter().any(|o| o.status == Status::Ok && o.reaction.is_some()));
    assert!(result.summary.jobs.ok > 180);
}

#[test]
fn over_the_context_budget_is_refused_before_any_chat_call() {
    let mut spec = RunSpec::defaults(3, 5, 1);
    spec.config = config("[chat]\ncontext_budget_tokens = 100\n");
    let (result, reports) = run_with(spec, 1);
    assert_eq!(result.summary.jobs.refused, 5);
    assert_eq!(result.summary.chat.requests, 0);
    assert!(reports[0]
        .outcomes
        .iter()
        .all(|o| matches!(&o.status, Status::Refused { reason } if reason.contains("context budget"))));
}

/// A chat port that panics on every request from one persona (its prompts
/// start with that persona's header).
struct PanicFor {
    header: std::sync::Arc<str>,
    inner: std::sync::Arc<dyn engine::chat::ChatPort>,
}

impl engine::chat::ChatPort for PanicFor {
    fn complete<'a>(
        &'a self,
        request: &'a engine::chat::ChatRequest,
    ) -> engine::BoxFuture<'a, engine::chat::ChatResult<engine::chat::ChatReply>> {
        if request.prompt.starts_with(&*self.header) {
            panic!("injected chat panic");
        }
        self.inner.complete(request)
    }
}

#[test]
fn a_panic_in_a_conversation_fails_that_job_alone_and_the_same_way_at_any_thread_count() {
    let (plain, _) = run_with(RunSpec::defaults(5, 30, 2), 1);
    let header = plain.final_states[3].as_ref().expect("alive").header.clone();
    let run = |threads| {
        let mut spec = RunSpec::defaults(5, 30, 2);
        let (_, chat) = actors::run::default_ports(&spec.config, spec.seed).expect("ports");
        spec.chat = Some(std::sync::Arc::new(PanicFor { header: header.clone(), inner: chat }));
        run_with(spec, threads)
    };
    let (one, reports) = run(1);
    for o in reports.iter().flat_map(|r| &r.outcomes) {
        if o.persona == 3 {
            let chat_panic = |r: &str| r == "chat panicked: injected chat panic";
            assert!(matches!(&o.status, Status::Failed { stage: Stage::Chat, reason } if chat_panic(reason)), "{o:?}");
        } else {
            assert_eq!(o.status, Status::Ok, "{o:?}");
        }
    }
    let (two, _) = run(2);
    assert_eq!((one.summary.digest, one.summary.full_digest), (two.summary.digest, two.summary.full_digest));
    assert!(two.final_states[3].is_some(), "the persona itself goes on");
}
