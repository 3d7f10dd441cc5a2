//! The stages one at a time, against fake persona hosts: actors that answer
//! the coordinator's messages with fixed replies per persona, report a
//! persona's handler as panicked, or drop a whole batch as a failed host
//! does.

use super::*;
use crate::progress::Silent;
use engine::chat::ScriptedPersonaModel;
use engine::config::Config;
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::turn::Refusal;

/// What a fake host does for each persona.
#[derive(Clone, Copy)]
enum Fake {
    /// Needs `text` embedded for every job, refuses to prepare any.
    Needs(&'static str),
    /// Its handler panics (the host reports it and keeps the rest).
    Panics,
}

/// A host answering by persona, or (`drop_all`) dropping every reply.
struct FakeHost {
    personas: Vec<Fake>,
    drop_all: bool,
}

fn answer<I, R>(personas: &[Fake], batch: Vec<(Activation, I)>, f: impl Fn(&'static str, I) -> R) -> Vec<Hosted<R>> {
    batch
        .into_iter()
        .map(|(state, input)| match personas[state.profile.id as usize] {
            Fake::Needs(text) => Ok((state, f(text, input))),
            Fake::Panics => Err("it panicked".to_string()),
        })
        .collect()
}

impl Actor for FakeHost {
    type Msg = PersonaMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<PersonaMsg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(&self, _: ActorRef<PersonaMsg>, msg: PersonaMsg, _: &mut ()) -> Result<(), ActorProcessingErr> {
        if self.drop_all {
            return Ok(());
        }
        match msg {
            PersonaMsg::RetrievalNeeds { batch, reply, .. } => {
                let _ =
                    reply.send(answer(&self.personas, batch, |text, jobs| vec![Some(text.to_string()); jobs.len()]));
            }
            PersonaMsg::Prepare { batch, reply, .. } => {
                let _ = reply.send(answer(&self.personas, batch, |text, jobs| {
                    let budget = text.len() as u64;
                    jobs.iter().map(|_| Err(Refusal::ContextBudget { needed: 9_999, budget })).collect()
                }));
            }
            PersonaMsg::Commit { .. } => {}
        }
        Ok(())
    }
}

/// A coordinator over `fakes`, activating them one at a time on two hosts
/// (the second drops everything when `dead_host` is set).
async fn coordinator(fakes: &[Fake], dead_host: bool) -> (TurnCoordinator, CoordinatorState) {
    let config = Config::defaults();
    let embedder: Arc<dyn engine::embed::EmbeddingPort> =
        Arc::new(providers::build_embedder(&config, 0).expect("local embedder"));
    let chat = Arc::new(ScriptedPersonaModel { seed: 1, malformed_rate: 0.0, price: config.chat_price });
    let traits = Traits::builtin();
    let slots = (0..fakes.len() as u32)
        .map(|id| Slot::Resting(Box::new(PersonaState::new(engine::persona::generate(&traits, 1, id)))))
        .collect();
    let shared = RunShared {
        config,
        scenario: Scenario::builtin("default").expect("built in"),
        traits,
        seed: 1,
        personas: fakes.len() as u32,
        session_end_tick: 1,
        embedder: Some(embedder),
        recorder: None,
        chat,
        strategy: engine::embed::Strategy::Batched,
    };
    let mut hosts = Vec::new();
    for drop_all in [false, dead_host] {
        let host = FakeHost { personas: fakes.to_vec(), drop_all };
        let (actor, _) = Actor::spawn(None, host, ()).await.expect("spawn a fake host");
        hosts.push(actor);
    }
    let state = CoordinatorState {
        slots,
        hosts,
        window: 2,
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
        let (c, mut state) = coordinator(&[Fake::Needs("a"), Fake::Needs("b")], false).await;
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
        let (c, mut state) = coordinator(&[Fake::Needs("same"), Fake::Panics, Fake::Needs("same")], false).await;
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
        let (c, mut state) = coordinator(&[Fake::Needs("x"), Fake::Needs("yy")], false).await;
        let mut work = c.begin(&state, 1);
        let all = 0..work.groups.len();
        c.retrieve_and_prompt(&mut state, &mut work, all).await;
        assert!(work.ready.is_empty());
        for o in &work.outcomes {
            let want = Refusal::ContextBudget { needed: 9_999, budget: 1 + u64::from(o.persona) };
            assert_eq!(o.status, Status::Refused { reason: want.to_string() });
        }
    });
}

#[test]
fn a_failed_host_loses_only_its_batch_and_leaves_the_pool() {
    rt().block_on(async {
        let fakes = [Fake::Needs("a"), Fake::Needs("b"), Fake::Needs("c"), Fake::Needs("d")];
        let (c, mut state) = coordinator(&fakes, true).await;
        let mut work = c.begin(&state, 1);
        c.retrieval_embedding(&mut state, &mut work).await;
        // Window 1 put persona 1 on the failing host; window 2 ran on the other.
        for o in &work.outcomes {
            match o.persona {
                1 => assert!(
                    matches!(&o.status, Status::Failed { stage: Stage::RetrievalEmbedding, reason } if reason.contains("p-00001") && reason.contains("host failed")),
                    "{:?}",
                    o.status
                ),
                _ => assert_eq!(o.status, Status::Ok, "persona {}", o.persona),
            }
        }
        assert_eq!(state.hosts.len(), 1);
        assert!(matches!(state.slots[1], Slot::Gone(_)));
        assert!([0, 2, 3].iter().all(|p| matches!(state.slots[*p], Slot::Resting(_))));
    });
}
