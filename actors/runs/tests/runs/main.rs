//! The runs library, called as a binding calls it: no command line, no
//! `sim-cli` binary.

use runs::{Error, Interrupt, RunDir, Start, Watch};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A new scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runs-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// 20 personas, 2 ticks, seed 5, into `out`.
fn small(out: &Path) -> Start {
    let config = runs::load_config(None).expect("the embedded defaults");
    Start { personas: Some(20), ticks: 2, seed: 5, out: Some(out.to_path_buf()), ..Start::new(config) }
}

#[test]
fn a_run_writes_its_directory_and_replays_to_its_digest() {
    let dir = scratch("layout");
    let out = dir.join("run");
    let finished = runs::start(small(&out), &Watch::quiet()).expect("the run");
    finished.completed().expect("it ran to its end");
    let rd = RunDir::at(&out);
    assert_eq!(finished.dir, rd);
    for file in [rd.trace(), rd.config(), rd.summary(), rd.outcomes()] {
        assert!(file.is_file(), "{} is written", file.display());
    }
    assert!(!rd.chat_wal().exists(), "the scripted model is not logged");
    let kept = rd.read_summary().expect("summary.json reads");
    assert_eq!((kept.digest, kept.ticks_completed), (finished.summary.digest, 2));
    let lines = std::fs::read_to_string(rd.outcomes()).expect("outcomes").lines().count() as u64;
    assert_eq!(lines, finished.summary.jobs.total, "one line per job");

    let replayed = runs::replay(&out, &Watch::quiet()).expect("the replay");
    replayed.matched().expect("every tick matches");
    assert_eq!((replayed.ticks_matched, replayed.provider_calls), (2, 0));
    assert_eq!(replayed.recorded.map(|d| d.digest), Some(finished.summary.digest));

    let again = runs::start(small(&out), &Watch::quiet()).expect_err("a run is never overwritten");
    assert!(matches!(again, Error::Refused(_)) && again.to_string().contains("already holds a run"), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupted_run_resumes_to_the_uninterrupted_digest() {
    let dir = scratch("resume");
    let whole = runs::start(small(&dir.join("whole")), &Watch::quiet()).expect("the run");
    let flag = Arc::new(AtomicBool::new(true));
    let watch = Watch { interrupt: Interrupt::Flag(flag), ..Watch::quiet() };
    let cut = runs::start(small(&dir.join("cut")), &watch).expect("an interrupt is not a failure");
    assert_eq!(cut.summary.ticks_completed, 1, "it stops at the first tick boundary");
    let err = cut.completed().expect_err("an interrupted run is not complete");
    assert!(matches!(err, Error::Interrupted { after_tick: 1, .. }), "{err}");
    assert!(err.to_string().contains("--resume") && err.is_caller_fault(), "{err}");

    let resumed = runs::resume(&dir.join("cut"), Default::default(), &Watch::quiet()).expect("the resume");
    resumed.completed().expect("it finished");
    assert_eq!(
        (resumed.summary.digest, resumed.summary.full_digest),
        (whole.summary.digest, whole.summary.full_digest)
    );
    let finished = runs::resume(&dir.join("cut"), Default::default(), &Watch::quiet()).expect("a finished run");
    assert!(finished.already && finished.summary.digest == whole.summary.digest);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_merge_to_the_unsharded_digest_and_refuse_what_is_not_one_run() {
    let dir = scratch("merge");
    let whole = runs::start(small(&dir.join("whole")), &Watch::quiet()).expect("the run");
    let shard = |i: u32| {
        let s = Start { shard: Some(format!("{i}/2")), ..small(&dir.join(format!("shard-{i}"))) };
        runs::start(s, &Watch::quiet()).expect("a shard").dir.path().to_path_buf()
    };
    let shards = vec![shard(1), shard(0)];
    let merged = runs::merge(&shards, &dir.join("merged"), &actors::progress::Silent).expect("the merge");
    assert_eq!((merged.shards, merged.personas, merged.already), (2, 20, false));
    assert_eq!(merged.summary.digest, whole.summary.digest);
    let again = runs::merge(&shards, &dir.join("merged"), &actors::progress::Silent).expect("a retried merge");
    assert!(again.already && again.summary.digest == whole.summary.digest);
    runs::replay(&dir.join("merged"), &Watch::quiet()).expect("replay").matched().expect("the merged run replays");

    let one = runs::merge(&shards[..1], &dir.join("half"), &actors::progress::Silent).expect_err("a shard missing");
    assert!(one.to_string().contains("shard 0 of 2 missing"), "{one}");
    let whole_dir = dir.join("whole");
    let not = runs::merge(&[shards[0].clone(), whole_dir], &dir.join("x"), &actors::progress::Silent);
    assert!(not.expect_err("not a shard").to_string().contains("not a shard"));
    assert!(!dir.join("half").exists() && !dir.join("x").exists(), "nothing is written for a refused merge");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_inputs_are_refused_by_name_with_nothing_written() {
    let dir = scratch("inputs");
    let out = dir.join("never");
    let scenario = Start { scenario: "no-such-scenario".into(), ..small(&out) };
    let e = runs::start(scenario, &Watch::quiet()).expect_err("an unknown scenario");
    assert!(matches!(e, Error::Input(_)) && e.to_string().contains("\"no-such-scenario\": no such file"), "{e}");

    let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/surveys/anes96/panel-map.toml");
    let csv = dir.join("bad.csv");
    std::fs::write(&csv, "id,age,educ,income,popul,TVnews\nr1,36,3,1,0,7\nr2,thirty,4,1,190,1\n").expect("write");
    let panel = runs::PanelData::read(&csv, &map).expect("both files read");
    let e = runs::start(Start { panel: Some(panel), ..small(&out) }, &Watch::quiet()).expect_err("a bad row");
    assert!(matches!(e, Error::Survey(_)), "{e:?}");
    assert!(e.to_string().contains("bad.csv: row r2, column age: \"thirty\" is not a whole number"), "{e}");

    let e = runs::start(Start { ticks: 0, ..small(&out) }, &Watch::quiet()).expect_err("no ticks");
    assert!(e.to_string().starts_with("--ticks 0"), "{e}");
    let e = runs::start(Start { budget_usd: Some(-1.0), ..small(&out) }, &Watch::quiet()).expect_err("a budget");
    assert!(e.to_string().starts_with("--budget-usd -1"), "{e}");
    let e = runs::replay(&dir.join("nowhere"), &Watch::quiet()).expect_err("no trace");
    assert!(e.to_string().contains("nowhere: no trace here"), "{e}");
    let e = runs::load_config(Some(&dir.join("missing.toml"))).expect_err("no config file");
    assert!(e.to_string().contains("cannot read config") && e.to_string().contains("missing.toml"), "{e}");
    assert!(!out.exists(), "nothing is written for bad input");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_validation_writes_its_files_and_keeps_its_digest_at_any_thread_count() {
    let dir = scratch("validate");
    let config = runs::load_config(None).expect("the embedded defaults");
    let ask = |out: &str, threads| {
        let v = runs::Validate {
            sample: Some(60),
            resamples: 100,
            seed: 7,
            out: Some(dir.join(out)),
            ..runs::Validate::new(config.clone())
        };
        runs::validate(v, &Watch { threads: Some(threads), ..Watch::quiet() }).expect("the validation")
    };
    let (a, b) = (ask("a", 1), ask("b", 2));
    assert_eq!(a.summary.digest, b.summary.digest, "same seed, same digest at any thread count");
    assert_eq!((a.summary.scores.respondents, a.summary.panel, a.summary.calls.asked), (60, 944, 60 * 3 * 2));
    for name in [runs::dir::SUMMARY, runs::dir::ANSWERS, runs::dir::REPORT, runs::dir::VALIDATION] {
        assert!(a.dir.join(name).is_file(), "{name} is written");
    }
    assert!(a.text().contains("validate anes96: 60 respondents"), "{}", a.text());
    let again = runs::validate(
        runs::Validate { sample: Some(60), seed: 7, out: Some(dir.join("a")), ..runs::Validate::new(config.clone()) },
        &Watch::quiet(),
    );
    assert!(matches!(again, Err(Error::Refused(_))), "a finished validation is never overwritten");
    let unknown =
        runs::Validate { suite: runs::validate::SuiteSource::Builtin("gss".into()), ..runs::Validate::new(config) };
    let e = runs::validate(unknown, &Watch::quiet()).expect_err("no such suite");
    assert!(e.to_string().contains("--suite gss: no such suite"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_reports_and_exports_without_the_command_line() {
    let dir = scratch("report");
    let out = dir.join("run");
    let finished = runs::start(small(&out), &Watch::quiet()).expect("the run");
    let by = vec!["age".to_string()];
    let written = runs::report(&out, None, &by, &actors::progress::Silent).expect("the report");
    assert_eq!(written.html, RunDir::at(&out).report());
    assert!(std::fs::read_to_string(&written.html).expect("page").contains("<svg"));
    assert!(written.json.ends_with(runs::dir::REPORT_JSON) && written.json.is_file());

    let mut jsonl = Vec::new();
    let rows = runs::export::write_outcomes(&out, runs::export::Format::Jsonl, &Default::default(), &mut jsonl)
        .expect("the export");
    assert_eq!(rows, finished.summary.jobs.total);
    assert_eq!(jsonl, std::fs::read(RunDir::at(&out).outcomes()).expect("outcomes"), "byte for byte the run's file");
    let filter = runs::export::Filter { tick: Some(2), persona: Some("p-00003".into()), with_traits: false };
    let mut csv = Vec::new();
    let some = runs::export::write_outcomes(&out, runs::export::Format::Csv, &filter, &mut csv).expect("csv");
    let text = String::from_utf8(csv).expect("utf-8");
    assert_eq!(text.lines().count() as u64, some + 1, "a header and a line per row");
    assert!(text.lines().skip(1).all(|l| l.starts_with("2,") && l.contains(",p-00003,")), "{text}");
    let bad = runs::export::Filter { tick: Some(9), ..Default::default() };
    let e = runs::export::write_outcomes(&out, runs::export::Format::Csv, &bad, Vec::new()).expect_err("tick 9");
    assert!(e.to_string().contains("--tick 9: the run has ticks 1 to 2"), "{e}");
    let e = runs::report(&out, None, &["shoe size".to_string()], &actors::progress::Silent).expect_err("bad trait");
    assert!(e.to_string().contains("--by shoe size: unknown trait"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace recorded under a per-persona embedding baseline (the benchmark's;
/// no run offers it), as `runs::start` would record it, for the report.
fn per_persona_trace(dir: &Path) -> PathBuf {
    use engine::store::trace::{Header, Record, TraceWriter};
    let mut spec = actors::run::RunSpec::defaults(5, 20, 2);
    spec.strategy = engine::embed::Strategy::PerConsumer;
    let header = Header::new(&spec.config, 5, 20, 2).with_strategy(spec.strategy);
    let out = RunDir::at(dir);
    std::fs::create_dir_all(out.path()).expect("directory");
    let mut sink = actors::sink::TraceSink::new(TraceWriter::create(&out.trace(), &header).expect("trace"));
    let rt = runs::runtime(None).expect("runtime");
    rt.block_on(actors::run::run(spec, Arc::new(actors::progress::Silent), false, |report| {
        sink.send(Record::Tick(Box::new(report.into_frame())))
    }))
    .expect("the run");
    sink.finish().expect("written");
    out.trace()
}

#[test]
fn the_report_picks_the_same_reactions_from_a_per_persona_trace() {
    let dir = scratch("report-strategies");
    runs::start(small(&dir.join("batched")), &Watch::quiet()).expect("the run");
    per_persona_trace(&dir.join("per-persona"));
    let picks = |d: &str| {
        let r = runs::report(&dir.join(d), None, &[], &actors::progress::Silent).expect("the report");
        assert!(r.analysis.reactions_method.contains("centroid"), "{d}: {}", r.analysis.reactions_method);
        serde_json::to_value(&r.analysis.reactions).expect("json")
    };
    let batched = picks("batched");
    assert!(batched.as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(batched, picks("per-persona"), "both embed the same texts: the same picks");
    let _ = std::fs::remove_dir_all(&dir);
}
