//! The coordinator's dispatch against fake persona hosts: actors that
//! answer with fixed replies per persona, report a persona's handler as
//! panicked, or drop a whole batch as a failed host does. What a tick does
//! with the answers is the engine's (`engine::tick`), tested there without
//! actors.

use super::*;
use crate::progress::Silent;
use engine::chat::ScriptedPersonaModel;
use engine::config::Config;
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::tick::TickWork;
use engine::turn::{Refusal, Stage, Status};

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
    let slots = PersonaSlots { first: 0, slots };
    let shared = RunShared {
        config,
        scenario: Scenario::builtin("default").expect("built in"),
        traits,
        seed: 1,
        personas: fakes.len() as u32,
        range: 0..fakes.len() as u32,
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
        book: Book::new(TickDigests::default(), vec![Vec::new(); fakes.len()]),
    };
    (TurnCoordinator { shared: Arc::new(shared), progress: Arc::new(Silent) }, state)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// Tick 1's validation and retrieval stage on the coordinator's hosts.
async fn retrieval(c: &TurnCoordinator, state: &mut CoordinatorState) -> TickWork {
    let spec = c.tick_spec(state.window);
    let CoordinatorState { slots, hosts, window, book } = state;
    let mut dispatch = HostDispatch { coordinator: c, slots, hosts, window: *window, started: Instant::now() };
    let mut work = TickWork::begin(&spec, book, 1);
    work.refuse_gone(book, &dispatch);
    work.retrieval_embedding(book, &mut dispatch).await;
    work
}

#[test]
fn a_panicked_handler_loses_its_persona_and_the_rest_answer() {
    rt().block_on(async {
        let (c, mut state) = coordinator(&[Fake::Needs("same"), Fake::Panics, Fake::Needs("same")], false).await;
        let work = retrieval(&c, &mut state).await;
        for o in &work.outcomes {
            match o.persona {
                1 => assert!(
                    matches!(&o.status, Status::Failed { stage: Stage::RetrievalEmbedding, reason } if reason == "persona actor p-00001 failed during tick 1"),
                    "{:?}",
                    o.status
                ),
                _ => assert_eq!(o.status, Status::Ok),
            }
        }
        assert!(matches!(state.slots[1], Slot::Gone));
        assert!(matches!(state.slots[0], Slot::Resting(_)) && matches!(state.slots[2], Slot::Resting(_)));
        assert_eq!(state.book.persona_digests[1], None);
        let s = &work.retrieval.stats;
        assert_eq!((s.texts_requested, s.unique_texts_submitted), (2, 1), "the two answers came back: {s:?}");
    });
}

#[test]
fn a_failed_host_loses_only_its_batch_and_leaves_the_pool() {
    rt().block_on(async {
        let fakes = [Fake::Needs("a"), Fake::Needs("b"), Fake::Needs("c"), Fake::Needs("d")];
        let (c, mut state) = coordinator(&fakes, true).await;
        let work = retrieval(&c, &mut state).await;
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
        assert!(matches!(state.slots[1], Slot::Gone));
        assert!([0, 2, 3].iter().all(|p| matches!(state.slots[*p], Slot::Resting(_))));
    });
}
