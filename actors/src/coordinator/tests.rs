//! The stages one at a time, against fake personas: actors that answer
//! the coordinator's messages with fixed replies, or drop them as a
//! failed actor does.

use super::*;
use crate::progress::Silent;
use engine::chat::ScriptedPersonaModel;
use engine::config::Config;
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::turn::Refusal;

/// What a fake persona does with each message.
#[derive(Clone, Copy)]
enum Fake {
    /// Needs `text` embedded for every job, refuses to prepare any.
    Needs(&'static str),
    /// Drops every reply, as an actor that panicked would.
    Dead,
}

impl Actor for Fake {
    type Msg = PersonaMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<PersonaMsg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(&self, _: ActorRef<PersonaMsg>, msg: PersonaMsg, _: &mut ()) -> Result<(), ActorProcessingErr> {
        let Fake::Needs(text) = *self else { return Ok(()) };
        match msg {
            PersonaMsg::RetrievalNeeds { jobs, reply, .. } => {
                let _ = reply.send(vec![Some(text.to_string()); jobs.len()]);
            }
            PersonaMsg::Prepare { jobs, reply, .. } => {
                let budget = text.len() as u64;
                let _ =
                    reply.send(jobs.iter().map(|_| Err(Refusal::ContextBudget { needed: 9_999, budget })).collect());
            }
            PersonaMsg::Commit { .. } | PersonaMsg::Snapshot { .. } => {}
        }
        Ok(())
    }
}

async fn coordinator(fakes: &[Fake]) -> (TurnCoordinator, CoordinatorState) {
    let config = Config::defaults();
    let embedder: Arc<dyn engine::embed::EmbeddingPort> =
        Arc::new(providers::build_embedder(&config, 0).expect("local embedder"));
    let chat = Arc::new(ScriptedPersonaModel { seed: 1, malformed_rate: 0.0, price: config.chat_price });
    let shared = RunShared {
        config,
        scenario: Scenario::builtin("default").expect("built in"),
        traits: Traits::builtin(),
        seed: 1,
        personas: fakes.len() as u32,
        session_end_tick: 1,
        embedder: Some(embedder),
        recorder: None,
        chat,
        strategy: engine::embed::Strategy::Batched,
    };
    let mut slots = Vec::new();
    for fake in fakes {
        let (actor, _) = Actor::spawn(None, *fake, ()).await.expect("spawn a fake persona");
        slots.push(Slot::Live(actor));
    }
    let state = CoordinatorState {
        slots,
        interests: vec![Vec::new(); fakes.len()],
        digests: TickDigests::default(),
        persona_digests: vec![Some(Digest::default()); fakes.len()],
        anchors: None,
    };
    (TurnCoordinator { shared: Arc::new(shared), progress: Arc::new(Silent) }, state)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

#[test]
fn validate_refuses_the_jobs_of_a_gone_persona() {
    rt().block_on(async {
        let (c, mut state) = coordinator(&[Fake::Needs("a"), Fake::Needs("b")]).await;
        state.slots[1] = Slot::Gone("it panicked".into());
        let mut work = c.begin(&state, 1);
        c.validate(&state, &mut work);
        let statuses: Vec<_> = work.outcomes.iter().map(|o| (o.persona, o.status.clone())).collect();
        assert!(statuses.iter().any(|(p, s)| *p == 0 && *s == Status::Ok), "{statuses:?}");
        assert!(statuses.iter().filter(|(p, _)| *p == 1).all(|(_, s)| matches!(
            s,
            Status::Refused { reason } if reason.contains("it panicked")
        )));
    });
}

#[test]
fn retrieval_embedding_dedups_across_personas_and_fails_only_a_dead_one() {
    rt().block_on(async {
        let (c, mut state) = coordinator(&[Fake::Needs("same"), Fake::Dead, Fake::Needs("same")]).await;
        let mut work = c.begin(&state, 1);
        c.retrieval_embedding(&mut state, &mut work).await;
        let s = &work.retrieval.stats;
        assert_eq!((s.texts_requested, s.unique_texts_submitted, s.port_invocations), (2, 1, 1));
        for o in &work.outcomes {
            match o.persona {
                1 => assert!(matches!(o.status, Status::Failed { stage: Stage::RetrievalEmbedding, .. })),
                _ => assert_eq!(o.status, Status::Ok),
            }
        }
        assert!(matches!(state.slots[1], Slot::Gone(_)));
        assert_eq!(state.persona_digests[1], None);
        let vectors: Vec<_> = work.outcomes.iter().map(|o| work.query[o.position as usize].clone()).collect();
        assert!(vectors[0].is_some() && vectors[0] == vectors[2], "one vector, shared by position");
    });
}

#[test]
fn preparation_refusals_become_outcomes_and_nothing_reaches_chat() {
    rt().block_on(async {
        let (c, mut state) = coordinator(&[Fake::Needs("x"), Fake::Needs("yy")]).await;
        let mut work = c.begin(&state, 1);
        c.retrieve_and_prompt(&mut state, &mut work).await;
        assert!(work.ready.is_empty());
        for o in &work.outcomes {
            let want = Refusal::ContextBudget { needed: 9_999, budget: 1 + u64::from(o.persona) };
            assert_eq!(o.status, Status::Refused { reason: want.to_string() });
        }
    });
}
