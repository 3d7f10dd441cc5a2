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

/// Personas activated seven at a time (windows split oddly across hosts)
/// give the digests and states of the default window, at 1 and 2 threads:
/// `run.max_active_personas` is operational and enters no digest.
#[test]
fn small_activation_windows_change_no_digest() {
    let (reference, _) = run_with(spec(7, "default"), 2);
    for threads in [1, 2] {
        let mut s = spec(7, "default");
        s.config = crate::support::config("[run]\nmax_active_personas = 7\n");
        let (windowed, _) = run_with(s, threads);
        let msg = format!("seed 7, max_active_personas 7, {threads} threads");
        assert_eq!(windowed.summary.digest, reference.summary.digest, "{msg}");
        assert_eq!(windowed.summary.full_digest, reference.summary.full_digest, "{msg}");
        assert_eq!(windowed.final_states, reference.final_states, "{msg}");
    }
}

#[test]
fn different_seeds_give_different_digests() {
    let (a, _) = run_with(spec(7, "default"), 2);
    let (b, _) = run_with(spec(8, "default"), 2);
    assert_ne!(a.summary.digest, b.summary.digest);
    assert_ne!(a.summary.full_digest, b.summary.full_digest);
}

/// The digests of one fixed small run, pinned. Any change to what a digest
/// covers or how it is encoded moves them; such a change must be deliberate,
/// and its note must give the old and the new values.
/// Reproduce: `sim-cli run --personas 4 --ticks 2 --seed 7 --json`.
#[test]
fn golden_digests_of_a_fixed_small_run() {
    let (r, _) = run_with(RunSpec::defaults(7, 4, 2), 1);
    assert_eq!(
        (r.summary.digest.hex(), r.summary.full_digest.hex()),
        (GOLDEN_DIGEST.to_string(), GOLDEN_FULL_DIGEST.to_string()),
        "the digest encoding moved: if on purpose, update the golden values and say so in the change's note"
    );
}

const GOLDEN_DIGEST: &str = "d638fc63f390b4591fa7888bc292082ba8ad976bc4e8a27bd98015e626a04247";
const GOLDEN_FULL_DIGEST: &str = "089735d414896175abc2101ce29493e7f056ec44e1b5886b3c01d6c7ebbb6148";

/// The modelled chat provider with faults at 20% (429, 5xx and timeouts
/// decided from request digest and attempt): the same digests at 1 and 4
/// threads, and the faults really fired.
#[test]
fn modelled_chat_faults_replay_the_same_at_any_thread_count() {
    let config = crate::support::config(
        "[chat]\nprovider = \"modelled\"\nbackoff_base_ms = 1\nbackoff_max_ms = 2\nmax_retries = 1\n\
         [chat.modelled]\nlatency_ms = 0.0\nlatency_per_token_us = 0.0\nrate_limited = 0.05\nserver_error = 0.1\n\
         timeout = 0.05\nretry_after_ms = 1\nseed = 5\n",
    );
    let run = |threads| {
        let mut spec = RunSpec::defaults(3, 40, 3);
        spec.config = config.clone();
        run_with(spec, threads).0
    };
    let (one, four) = (run(1), run(4));
    assert_eq!(one.summary.digest, four.summary.digest, "seed 3, modelled faults at 20%");
    assert_eq!(one.summary.full_digest, four.summary.full_digest);
    assert!(one.summary.chat.failures > 0, "some calls failed after their retry: {:?}", one.summary.chat);
    assert!(one.summary.jobs.failed > 0);
    assert_eq!(one.summary.cost.allocated_total_nano_usd, one.summary.cost.provider_total_nano_usd);
}

/// Two traces of one run agree; a changed reaction is named by tick,
/// persona and part, and a shorter trace by where it stops.
#[test]
fn the_first_divergence_between_two_traces_is_named() {
    use actors::replay::first_divergence;
    use engine::store::trace::{Header, Record, TickFrame, TraceWriter};
    let dir = std::env::temp_dir().join(format!("actors-diverge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let spec = spec(3, "default");
    let header = Header::new(&spec.config, 3, spec.personas, spec.ticks);
    let frames: Vec<TickFrame> = run_with(spec, 2).1.into_iter().map(|r| r.into_frame()).collect();
    let write = |name: &str, frames: &[TickFrame]| {
        let path = dir.join(name);
        let mut w = TraceWriter::create(&path, &header).expect("create");
        for f in frames {
            w.append(&Record::Tick(Box::new(f.clone()))).expect("append");
        }
        path
    };
    let names = ("left", "right");
    let a = write("a.bin", &frames);
    assert_eq!(first_divergence(&a, &write("b.bin", &frames), names).expect("reads"), None);
    let mut changed = frames.clone();
    let at = changed[1].outcomes.iter().position(|o| o.reaction.is_some()).expect("a reaction in tick 2");
    let job = &mut changed[1].outcomes[at];
    let persona = job.persona;
    job.reaction.as_mut().expect("a reaction").text.push('!');
    let d = first_divergence(&a, &write("c.bin", &changed), names).expect("reads").expect("differs");
    assert_eq!((d.tick, d.persona), (2, Some(persona)));
    assert!(d.what.contains(&format!("job {at} ")) && d.what.contains("reaction"), "{d}");
    let d = first_divergence(&a, &write("d.bin", &frames[..2]), names).expect("reads").expect("differs");
    assert_eq!(d.tick, 3);
    assert!(d.what.contains("the left run has tick 3, the right run nothing more"), "{d}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The coordinator only dispatches: the engine's tick sequence with every
/// persona called in place (no actors, no threads) gives the coordinator's
/// trace frames, tick for tick, a persona failing at tick 2 included.
#[test]
fn the_engine_tick_called_in_place_gives_the_coordinators_frames() {
    use engine::testing::{block_on_ready, Sequential};
    use engine::tick::{run_tick, Book, TickSpec};
    use std::sync::Arc;
    let mut spec = spec(11, "default");
    spec.personas = 24;
    spec.config = crate::support::config("[run]\nmax_active_personas = 5\n[[faults.panic]]\npersona = 3\ntick = 2\n");
    let (cfg, scenario) = (spec.config.clone(), spec.scenario.clone());
    let (seed, personas, ticks) = (spec.seed, spec.personas, spec.ticks);
    let (_, reports) = run_with(spec, 2);

    let embedder = Arc::new(providers::build_embedder(&cfg, seed).expect("the local embedder"));
    let chat = providers::build_chat(&cfg, seed).expect("the scripted model");
    let mut panel = Sequential::new(&cfg, &scenario, &engine::persona::Traits::builtin(), seed, personas)
        .with_ports(Some(embedder), Some(chat));
    let genesis = engine::turn::TickDigests::genesis(&cfg, &scenario.source_hash, seed, personas);
    let mut book = Book::new(genesis, panel.interests());
    let tick_spec =
        TickSpec { cfg: &cfg, scenario: &scenario, seed, window: 5, session_end_tick: ticks, embeddings: true };
    assert_eq!(reports.len(), ticks as usize);
    for actor_report in reports {
        let tick = actor_report.tick;
        let in_place = block_on_ready(run_tick(&tick_spec, &mut book, &mut panel, tick));
        assert_eq!(in_place.into_frame(), actor_report.into_frame(), "tick {tick}");
    }
    assert!(book.gone(3).is_some(), "the fault fired");
}
