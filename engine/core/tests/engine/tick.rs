//! Whole ticks through `engine::tick::run_tick` with no runtime and no
//! actors: the personas dispatched in place (`testing::Sequential`), the
//! local embedder and the scripted persona model.

use engine::config::{Config, RawConfig};
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::testing::{block_on_ready, Sequential};
use engine::tick::{run_tick, Book, TickReport, TickSpec};
use engine::turn::{Stage, Status, TickDigests};

fn config(toml: &str) -> Config {
    RawConfig::from_toml(toml, "test.toml").and_then(|r| r.resolve("test.toml")).expect("valid test config")
}

/// `ticks` ticks of `personas` personas (seed 7, the default scenario),
/// stages 3 and 4 run `window` personas at a time.
fn run(cfg: &Config, personas: u32, ticks: u32, window: usize) -> (Vec<TickReport>, Book, Sequential) {
    let scenario = Scenario::builtin("default").expect("built in");
    let mut panel = Sequential::new(cfg, &scenario, &Traits::builtin(), 7, personas);
    let genesis = TickDigests::genesis(cfg, &scenario.source_hash, 7, personas);
    let mut book = Book::new(genesis, panel.interests());
    let spec = TickSpec { cfg, scenario: &scenario, seed: 7, window, session_end_tick: ticks, embeddings: true };
    let reports = (1..=ticks).map(|t| block_on_ready(run_tick(&spec, &mut book, &mut panel, t))).collect();
    (reports, book, panel)
}

/// Stages 3 and 4 take the panel a window at a time; the window is
/// operational and changes no outcome, memory or digest.
#[test]
fn the_window_changes_no_digest() {
    let cfg = Config::defaults();
    let (whole, book, _) = run(&cfg, 9, 3, 64);
    assert!(whole.iter().all(|r| r.outcomes.iter().all(|o| o.status == Status::Ok)), "every job succeeds");
    assert!(whole[2].memories.len() >= 9, "each persona remembers: {}", whole[2].memories.len());
    for window in [1, 2, 4] {
        let (windowed, _, _) = run(&cfg, 9, 3, window);
        for (a, b) in whole.iter().zip(&windowed) {
            assert_eq!(a.digests, b.digests, "tick {}, window {window}", a.tick);
            assert_eq!(a.outcomes, b.outcomes, "tick {}, window {window}", a.tick);
        }
    }
    assert_eq!(book.digests, whole[2].digests, "the book keeps the last tick's digests");
}

/// A persona that fails at tick 2 loses its own jobs there (at retrieval,
/// with its name and the tick) and is refused from then on; its state
/// digest is gone; the rest of the panel carries on and still remembers.
#[test]
fn a_failed_persona_loses_only_its_jobs_and_is_refused_after() {
    let cfg = config("[[faults.panic]]\npersona = 1\ntick = 2\n");
    let (reports, book, panel) = run(&cfg, 4, 3, 2);
    let status = |tick: usize, p: u32| -> Vec<Status> {
        reports[tick - 1].outcomes.iter().filter(|o| o.persona == p).map(|o| o.status.clone()).collect()
    };
    assert!(status(1, 1).iter().all(|s| *s == Status::Ok));
    assert!(status(2, 1).iter().all(|s| matches!(
        s,
        Status::Failed { stage: Stage::RetrievalEmbedding, reason } if reason == "persona actor p-00001 failed during tick 2"
    )), "{:?}", status(2, 1));
    assert!(
        status(3, 1).iter().all(|s| matches!(
            s,
            Status::Refused { reason } if reason == "persona is unavailable: persona actor p-00001 failed during tick 2"
        )),
        "{:?}",
        status(3, 1)
    );
    for p in [0, 2, 3] {
        assert!((1..=3).all(|t| status(t, p).iter().all(|s| *s == Status::Ok)), "persona {p}");
    }
    assert_eq!(book.persona_digests[1], None);
    assert!(book.persona_digests.iter().enumerate().all(|(p, d)| p == 1 || d.is_some()));
    assert_eq!(book.gone(1), Some("persona actor p-00001 failed during tick 2"));
    assert!(panel.state(1).is_none() && panel.state(0).is_some());
    assert!(reports[2].memories.iter().all(|m| m.id.persona != 1));
    assert!(!reports[2].memories.is_empty());
}

/// From the second tick, personas need retrieval texts; the same text asked
/// by several jobs is embedded once and its vector shared by position.
#[test]
fn retrieval_texts_are_deduplicated_across_personas() {
    let (reports, _, _) = run(&Config::defaults(), 12, 2, 64);
    let first = &reports[0].retrieval.0;
    assert_eq!(first.texts_requested, 0, "no memories yet, no retrieval: {first:?}");
    let s = &reports[1].retrieval.0;
    assert!(s.texts_requested >= 12, "{s:?}");
    assert!(s.unique_texts_submitted < s.texts_requested, "shared texts are embedded once: {s:?}");
    assert_eq!(s.port_invocations, 1, "{s:?}");
    let allocated: u64 = reports[1].outcomes.iter().map(|o| o.spend.retrieval_embedding_estimate.nano_usd).sum();
    assert_eq!(allocated, reports[1].retrieval.1.nano_usd, "the stage's bill is allocated exactly");
}

/// Over the context budget, every job is refused before any chat call: no
/// chat spend, no memory, and the tick still commits its digests.
#[test]
fn refusals_at_preparation_become_outcomes_and_nothing_reaches_chat() {
    let cfg = config("[chat]\ncontext_budget_tokens = 10\n");
    let (reports, book, _) = run(&cfg, 3, 1, 64);
    let r = &reports[0];
    assert!(!r.outcomes.is_empty());
    for o in &r.outcomes {
        assert!(matches!(&o.status, Status::Refused { reason } if reason.contains("context budget")), "{:?}", o.status);
        assert_eq!(o.spend.chat.nano_usd, 0);
        assert!(o.chat_calls.is_empty() && o.memories.is_empty());
    }
    assert!(r.memories.is_empty());
    assert_eq!(book.digests, r.digests);
    assert!(book.persona_digests.iter().all(Option::is_some), "refused personas are not gone");
}
