use ::experiment::summary::Condition;
use ::experiment::Topic;
use agents::experiment::{run_experiment, Budgets, ExperimentSpec, LatencyModel};
use engine::chat::{ChatPort, ChatReply, ChatRequest};
use engine::BoxFuture;
use std::sync::Arc;

struct Down;

impl ChatPort for Down {
    fn complete<'a>(&'a self, _: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        Box::pin(std::future::ready(Err(engine::chat::ChatError::Provider {
            cause: "provider unavailable".into(),
            spend: engine::cost::Spend::default(),
            attempts: Vec::new(),
        })))
    }
}

fn spec(chat: Option<Arc<dyn ChatPort>>) -> ExperimentSpec {
    ExperimentSpec {
        topics: vec![Topic::builtin("urban-heat").expect("built in").expect("valid")],
        reps: 1,
        lambdas: vec![0.1],
        seed: 1,
        budgets: Budgets::default(),
        latency: LatencyModel::default(),
        dim: 64,
        embedder: {
            let mut cfg = engine::config::Config::defaults();
            (cfg.raw.embedding.dim, cfg.raw.embedding.cache) = (64, false);
            Arc::new(providers::build_embedder(&cfg, 0).expect("the local embedder"))
        },
        embed_model: engine::config::Config::defaults().raw.embedding.model,
        analyst_words: Some(::experiment::model::ANALYST_WORDS),
        judge: None,
        judge_model: String::new(),
        latency_source: agents::experiment::LatencySource::Modelled,
        chat,
        model: agents::experiment::SCRIPTED_MODEL.into(),
        field_logs: None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// A failing model fails the mission with a message naming topic,
/// repetition, condition and agent.
#[test]
fn a_failing_model_names_the_mission() {
    let err = runtime()
        .block_on(run_experiment(&spec(Some(Arc::new(Down))), |_, _| {}))
        .expect_err("the model is down")
        .to_string();
    assert!(
        err.contains("urban-heat") && err.contains("repetition 1") && err.contains("researcher chat call failed"),
        "{err}"
    );
}

/// The three arms of a (topic, repetition) share the seed; the field and
/// the store report telemetry, message passing none; message passing is
/// text only, so it embeds nothing and its tokens are its chat tokens.
#[test]
fn pairs_share_the_seed_and_only_the_field_has_telemetry() {
    let missions = runtime().block_on(run_experiment(&spec(None), |_, _| {})).expect("runs");
    let [mp, store, field] = [&missions[0].record, &missions[1].record, &missions[2].record];
    assert_eq!(
        (mp.condition, store.condition, field.condition),
        (Condition::MessagePassing, Condition::Store, Condition::Field)
    );
    assert_eq!((mp.seed, store.seed), (field.seed, field.seed));
    assert_eq!((mp.tokens, mp.cost.embedding_nano_usd), (mp.chat_tokens, 0), "no embeddings in the control");
    assert!(field.tokens > field.chat_tokens && store.tokens > store.chat_tokens, "the shared arms pay to embed");
    assert!(store.cross_agent_resonance.is_some());
    assert!(mp.cross_agent_resonance.is_none() && missions[0].timeline.is_empty());
    assert!(
        field.cross_agent_resonance.is_some_and(|n| n > 0),
        "the analyst and the writer read the researcher's patterns"
    );
    // Three passages: iteration 1 writes; 2 to 4 read and write; 5 reads.
    assert_eq!(missions[2].timeline.len(), 1 + 2 * 3 + 1);
}
