use crate::support::{config, run_with};
use actors::run::RunSpec;
use engine::cost::Spend;
use engine::embed::{EmbedBatch, EmbedCall, EmbedKey, EmbedRole, EmbeddingPort, Strategy};
use engine::turn::{Stage, Status};
use engine::BoxFuture;
use std::sync::Arc;

/// Fails every invocation of one stage, or every invocation holding a text
/// that contains `needle`, billing 100 nano-USD for the failure.
struct Inject {
    role: Option<EmbedRole>,
    needle: Option<&'static str>,
    inner: Arc<dyn EmbeddingPort>,
}

impl EmbeddingPort for Inject {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, engine::embed::EmbedResult<EmbedBatch>> {
        let hit = self.role == Some(key.role) || self.needle.is_some_and(|n| texts.iter().any(|t| t.contains(n)));
        if hit {
            let spend = Spend { input_tokens: 10, nano_usd: 100, ..Spend::default() };
            let calls = vec![EmbedCall { texts: (0..texts.len() as u32).collect(), attempts: 1, spend }];
            return Box::pin(std::future::ready(Err(engine::embed::EmbedError::Provider {
                cause: "injected outage".into(),
                calls,
            })));
        }
        self.inner.embed(key, texts)
    }
}

fn port(role: Option<EmbedRole>, needle: Option<&'static str>) -> Arc<dyn EmbeddingPort> {
    let inner = Arc::new(providers::build_embedder(&engine::config::Config::defaults(), 0).expect("local client"));
    Arc::new(Inject { role, needle, inner })
}

#[test]
fn a_failed_retrieval_stage_fails_its_consumers_with_the_cost() {
    let mut spec = RunSpec::defaults(4, 20, 2);
    spec.embedder = Some(port(Some(EmbedRole::Retrieval), None));
    let (result, reports) = run_with(spec, 2);
    assert!(reports[0].outcomes.iter().all(|o| o.status == Status::Ok), "tick 1 needs no retrieval");
    for o in &reports[1].outcomes {
        assert!(
            matches!(&o.status, Status::Failed { stage: Stage::RetrievalEmbedding, reason } if reason.contains("injected"))
        );
        assert!(o.chat_calls.is_empty() && o.memories.is_empty());
    }
    let shares: u64 = reports[1].outcomes.iter().map(|o| o.spend.retrieval_embedding_estimate.nano_usd).sum();
    assert_eq!(shares, 100, "the failed invocation's cost is allocated to its consumers");
    let s = &result.summary;
    assert_eq!(s.cost.allocated_total_nano_usd, s.cost.provider_total_nano_usd);
}

#[test]
fn a_failed_memory_stage_keeps_chat_costs_and_stores_nothing() {
    let mut spec = RunSpec::defaults(4, 10, 2);
    spec.embedder = Some(port(Some(EmbedRole::Memory), None));
    let (result, reports) = run_with(spec, 2);
    for o in reports.iter().flat_map(|r| &r.outcomes) {
        assert!(matches!(o.status, Status::Failed { stage: Stage::MemoryEmbedding, .. }), "{:?}", o.status);
        assert!(o.spend.chat.nano_usd > 0 && o.memories.is_empty());
    }
    assert!(result.final_states.iter().flatten().all(|s| s.memory.is_empty()), "no memory without its vector");
    assert_eq!(reports[1].retrieval.0.port_invocations, 0, "so tick 2 has nothing to retrieve");
}

#[test]
fn per_persona_failures_stay_with_the_jobs_that_needed_the_text() {
    let mut spec = RunSpec::defaults(4, 30, 2);
    spec.strategy = Strategy::PerConsumer;
    spec.embedder = Some(port(None, Some("Regulator recalls")));
    let (_, reports) = run_with(spec, 2);
    let tick2 = &reports[1].outcomes;
    let (bad, good): (Vec<_>, Vec<_>) = tick2.iter().partition(|o| o.stimulus == "recall-news");
    assert!(!bad.is_empty() && !good.is_empty());
    assert!(bad.iter().all(|o| matches!(o.status, Status::Failed { stage: Stage::RetrievalEmbedding, .. })));
    assert!(good.iter().all(|o| o.status == Status::Ok), "unrelated jobs complete");
    assert_eq!(
        tick2.iter().map(|o| o.position).collect::<Vec<_>>(),
        (0..30).collect::<Vec<_>>(),
        "one outcome per job, in order"
    );
}

#[test]
fn modelled_faults_are_retried_and_conserved_end_to_end() {
    let cfg = "[embedding]\nprovider = \"modelled\"\nbatch_size = 8\nbackoff_base_ms = 1\nbackoff_max_ms = 2\n\
               [embedding.modelled]\nlatency_ms = 0.0\nlatency_per_token_us = 0.0\nserver_error = 0.3\nrate_limited = 0.2\nretry_after_ms = 1\n";
    let run = || {
        let mut spec = RunSpec::defaults(8, 40, 3);
        spec.config = config(cfg);
        run_with(spec, 2).0.summary
    };
    let (a, b) = (run(), run());
    assert_eq!((a.digest, a.full_digest), (b.digest, b.full_digest), "faults are seeded, not timed");
    let e = &a.embedding;
    assert!(e.upstream_requests > e.unique_texts_submitted.div_ceil(8), "retries happened: {e:?}");
    assert_eq!(a.cost.allocated_total_nano_usd, a.cost.provider_total_nano_usd);
}

/// The trace audit (`engine::store::trace::audit`) passes a faulty modelled run
/// and agrees with its summary; each kind of broken book is then caught.
#[test]
fn the_audit_passes_a_faulty_run_and_catches_broken_books() {
    use engine::store::trace::audit::audit;
    use engine::store::trace::{Header, TickFrame};
    let mut spec = RunSpec::defaults(4, 12, 3);
    spec.config = crate::support::faulty(3, 0.05, "");
    let header = Header::new(&spec.config, 4, 12, 3);
    let (result, reports) = run_with(spec, 2);
    let frames: Vec<TickFrame> = reports.into_iter().map(|r| r.into_frame()).collect();
    let clean = audit(&header, &frames);
    assert!(clean.is_clean(), "{:?}", clean.problems);
    let s = &result.summary;
    assert_eq!(clean.provider_nano_usd, s.cost.provider_total_nano_usd);
    assert_eq!(clean.allocated_nano_usd, s.cost.allocated_total_nano_usd);
    assert_eq!((clean.jobs, clean.chat_attempts), (s.jobs.total, s.chat.attempts));
    assert!(s.chat.retries > 0 && s.jobs.failed > 0, "the faults fired: {:?} {:?}", s.chat, s.jobs);

    let broken = |edit: &dyn Fn(&mut Vec<TickFrame>)| {
        let mut f = frames.clone();
        edit(&mut f);
        audit(&header, &f).problems.join("; ")
    };
    let retried = |f: &Vec<TickFrame>| {
        f.iter()
            .enumerate()
            .flat_map(|(t, tick)| tick.outcomes.iter().enumerate().map(move |(j, o)| (t, j, o)))
            .find_map(|(t, j, o)| o.chat_calls.iter().position(|c| c.attempts.len() > 1).map(|c| (t, j, c)))
            .expect("a call with a retry")
    };
    let twice = broken(&|f| {
        let o = f[1].outcomes[2].clone();
        f[1].outcomes[3] = engine::turn::Outcome { position: 3, ..o };
    });
    assert!(twice.contains("a second outcome"), "{twice}");
    let dropped = broken(&|f| {
        let (t, j, c) = retried(f);
        f[t].outcomes[j].chat_calls[c].attempts.remove(0);
    });
    assert!(dropped.contains("attempt 1 recorded at place 0"), "{dropped}");
    let billed = broken(&|f| {
        let (t, j, c) = retried(f);
        f[t].outcomes[j].chat_calls[c].attempts[0].spend.nano_usd += 7;
    });
    assert!(billed.contains("its attempts were billed"), "{billed}");
    let moved = broken(&|f| f[0].outcomes[0].spend.memory_embedding_estimate.nano_usd += 1);
    assert!(moved.contains("allocated") && moved.contains("the providers billed"), "{moved}");
}

#[test]
fn a_cache_file_makes_the_next_run_warm() {
    let dir = std::env::temp_dir().join(format!("actors-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let cfg = format!("[embedding]\ncache_file = \"{}\"\n", dir.join("cache.bin").display());
    let run = || {
        let mut spec = RunSpec::defaults(8, 20, 2);
        spec.config = config(&cfg);
        run_with(spec, 2).0.summary
    };
    let cold = run();
    let warm = run();
    assert_eq!(cold.embedding.cache_hits, 0);
    assert_eq!(warm.embedding.cache_hits, warm.embedding.unique_texts_submitted);
    assert_eq!(warm.embedding.upstream_requests, 0);
    assert_eq!(warm.cost.embedding_nano_usd, 0, "a hit costs nothing");
    assert_eq!(cold.digest, warm.digest, "the cache changes costs, never content");
    assert_ne!(cold.full_digest, warm.full_digest);
}
