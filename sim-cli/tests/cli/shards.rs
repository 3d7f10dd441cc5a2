//! A panel split into shards (`run --shard I/N`) and merged (`merge`): the
//! merged digest is the unsharded run's, every shard problem is refused by
//! name, and the examples' command lines run as plain processes.

use crate::support::{scratch, sim, stderr};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn digest(out: &Output) -> String {
    json(out)["digest"].as_str().expect("digest").to_string()
}

/// Runs shard `i` of `n` of `args` into `dir/shard-i`.
fn shard(dir: &Path, args: &[&str], i: u32, n: u32) -> Output {
    let (spec, out) = (format!("{i}/{n}"), format!("shard-{i}"));
    sim(dir, &[args, &["--shard", &spec, "--out", &out, "--json"]].concat())
}

/// Merges `dir/shard-0..n` into `dir/merged`.
fn merge(dir: &Path, n: u32) -> Output {
    merge_into(dir, n, "merged")
}

/// Merges `dir/shard-0..n` into `dir/OUT`.
fn merge_into(dir: &Path, n: u32, out: &str) -> Output {
    let dirs: Vec<String> = (0..n).rev().map(|i| format!("shard-{i}")).collect();
    let mut args = vec!["merge", "--out", out, "--json"];
    args.extend(dirs.iter().map(String::as_str));
    sim(dir, &args)
}

/// Shards merged give the unsharded digest: three seeds, two scenarios,
/// with and without a persona that fails, at 1, 3 and 4 shards. The merged
/// run replays (each shard from its part, no call), and its jobs and
/// intent are the unsharded run's.
#[test]
fn merged_shards_give_the_unsharded_digest() {
    let dir = scratch("shards-digest");
    std::fs::write(dir.join("faults.toml"), "[[faults.panic]]\npersona = 7\ntick = 2\n").expect("write");
    let cases = [
        (1, "default", false, 4),
        (2, "launch-day", true, 4),
        (3, "default", true, 3),
        (1, "launch-day", false, 1),
        (2, "default", false, 4),
        (3, "launch-day", true, 4),
    ];
    for (seed, scenario, faults, n) in cases {
        let case = dir.join(format!("{seed}-{scenario}-{faults}-{n}"));
        std::fs::create_dir_all(&case).expect("dir");
        let seed = seed.to_string();
        let faults_file = dir.join("faults.toml").display().to_string();
        let mut args = vec!["run", "--personas", "23", "--ticks", "3", "--seed", &seed, "--scenario", scenario];
        if faults {
            args.extend(["--config", &faults_file]);
        }
        let whole = json(&sim(&case, &[&args[..], &["--out", "whole", "--json"]].concat()));
        let mut paid = 0;
        for i in 0..n {
            let s = json(&shard(&case, &args, i, n));
            assert_eq!(s["shard"]["index"], i, "{s}");
            assert_ne!(s["digest"], whole["digest"], "a shard's digest is its own");
            paid += s["cost"]["provider_total_nano_usd"].as_u64().expect("cost");
        }
        let merged = json(&merge(&case, n));
        let at = case.display().to_string();
        assert_eq!(merged["cost"]["provider_total_nano_usd"], paid, "the shards' bills, summed: {at}");
        assert_eq!(merged["cost"]["allocated_total_nano_usd"], paid, "allocated to the jobs that caused them: {at}");
        assert_eq!(merged["digest"], whole["digest"], "{at}");
        assert_eq!(merged["jobs"], whole["jobs"], "{at}");
        assert_eq!(merged["intent"], whole["intent"], "{at}");
        assert_eq!(merged["tokens"]["chat_input"], whole["tokens"]["chat_input"], "{at}");
        assert_eq!(merged["merged_shards"], n, "{at}");
        // A retried merge step: nothing to do once finished; a killed one
        // (its trace cut before the end) merges again.
        assert_eq!(json(&merge(&case, n))["digest"], whole["digest"]);
        let trace = case.join("merged/trace.bin");
        let bytes = std::fs::read(&trace).expect("merged trace");
        std::fs::write(&trace, &bytes[..bytes.len() / 2]).expect("cut");
        let again = merge(&case, n);
        assert!(stderr(&again).contains("stopped before its end; merging again"), "{}", stderr(&again));
        assert_eq!(json(&again)["digest"], whole["digest"]);
        if faults {
            assert!(merged["jobs"]["failed"].as_u64().is_some_and(|f| f > 0), "the fault fired: {merged}");
        }
        if n > 1 {
            // Each shard embeds its own texts: dedup across shards is lost.
            let unique = |v: &serde_json::Value| v["embedding"]["unique_texts_submitted"].as_u64().expect("unique");
            assert!(unique(&merged) > unique(&whole), "{at}");
            assert_ne!(merged["full_digest"], whole["full_digest"], "{at}");
        }
        let replay = json(&sim(&case, &["replay", "merged", "--json"]));
        assert_eq!((replay["provider_calls"].as_u64(), replay["ticks_matched"].as_u64()), (Some(0), Some(3)));
        assert_eq!(replay["digest"], whole["digest"]);
    }
}

/// `inspect`, `report`, `export` and `compare-intent` read a merged run as
/// they read the unsharded one.
#[test]
fn a_merged_run_reads_like_the_unsharded_one() {
    let dir = scratch("shards-read");
    let args = ["run", "--personas", "12", "--ticks", "2", "--seed", "9"];
    json(&sim(&dir, &[&args[..], &["--out", "whole", "--json"]].concat()));
    for i in 0..3 {
        json(&shard(&dir, &args, i, 3));
    }
    json(&merge(&dir, 3));
    let csv = |run: &str| {
        let out = sim(&dir, &["export", "outcomes", run, "--format", "csv"]);
        assert!(out.status.success(), "{}", stderr(&out));
        // Costs differ (each shard paid for its own embedding calls).
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split(',').take(20).collect::<Vec<_>>().join(","))
            .collect::<Vec<_>>()
    };
    assert_eq!(csv("merged"), csv("whole"));
    let tick = |run: &str| json(&sim(&dir, &["inspect", run, "--tick", "2", "--json"]));
    let (m, w) = (tick("merged"), tick("whole"));
    assert_eq!(m["tick"]["outcomes"].as_array().map(Vec::len), w["tick"]["outcomes"].as_array().map(Vec::len));
    let report = |run: &str| json(&sim(&dir, &["report", run, "--json"]));
    assert_eq!(report("merged")["intent"], report("whole")["intent"]);
    std::fs::write(dir.join("survey.csv"), "stimulus,1,2,3,4,5\ntrailflex-shoe,10,20,30,20,20\n").expect("write");
    let compare = |run: &str| json(&sim(&dir, &["compare-intent", run, "--reference", "survey.csv", "--json"]));
    assert_eq!(compare("merged")["stimuli"], compare("whole")["stimuli"]);
}

/// A shard killed after its first tick (its trace cut there, no summary)
/// resumes when its command runs again, and merges to the same digest; a
/// finished shard's command changes nothing.
#[test]
fn a_killed_shard_resumes_and_merges_to_the_same_digest() {
    let dir = scratch("shards-kill");
    let args = ["run", "--personas", "20", "--ticks", "3", "--seed", "4"];
    let expected = digest(&sim(&dir, &[&args[..], &["--out", "whole", "--json"]].concat()));
    for i in 0..2 {
        json(&shard(&dir, &args, i, 2));
    }
    let trace = dir.join("shard-1/trace.bin");
    let mut frames = engine::store::frame::open(&trace, &engine::store::trace::TRACE_FORMAT).expect("open");
    // Header, shard record, tick 1: the cut follows the third frame.
    for _ in 0..3 {
        frames.next_frame().expect("frame").expect("three frames");
    }
    let bytes = std::fs::read(&trace).expect("read");
    std::fs::write(&trace, &bytes[..frames.valid_len() as usize]).expect("cut");
    std::fs::remove_file(dir.join("shard-1/summary.json")).expect("a killed shard has no summary");
    let refused = merge(&dir, 2);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("shard-1: unfinished (1 of 3 ticks committed)"), "{}", stderr(&refused));
    let again = shard(&dir, &args, 1, 2);
    assert!(stderr(&again).contains("resuming after tick 1 of 3"), "{}", stderr(&again));
    json(&again);
    let replay = json(&sim(&dir, &["replay", "shard-1", "--json"]));
    assert_eq!((replay["provider_calls"].as_u64(), replay["ticks_matched"].as_u64()), (Some(0), Some(3)));
    let inspect = sim(&dir, &["inspect", "shard-1"]);
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(text.contains("shard 1 of 2: personas p-00010 to p-00019 of the panel's 20"), "{text}");
    assert_eq!(digest(&merge(&dir, 2)), expected);
    // Killed between its end frame and its summary: the command again
    // writes the summary, and touches nothing else.
    std::fs::remove_file(dir.join("shard-0/summary.json")).expect("remove");
    let trace = std::fs::read(dir.join("shard-0/trace.bin")).expect("trace");
    let refused = merge(&dir, 2);
    assert!(stderr(&refused).contains("shard-0: finished, but its summary.json is missing"), "{}", stderr(&refused));
    let finished = shard(&dir, &args, 0, 2);
    assert!(stderr(&finished).contains("already finished"), "{}", stderr(&finished));
    assert!(
        stderr(&finished).contains("summary.json was missing or not this run's; written from the trace"),
        "{}",
        stderr(&finished)
    );
    assert_eq!(std::fs::read(dir.join("shard-0/trace.bin")).expect("trace"), trace);
    assert_eq!(digest(&merge_into(&dir, 2, "merged-again")), expected);
    // Stopped before its trace existed: its config alone is there.
    std::fs::create_dir_all(dir.join("early")).expect("dir");
    std::fs::write(dir.join("early/config.toml"), "# written before the trace\n").expect("write");
    let early = sim(&dir, &[&args[..], &["--shard", "1/2", "--out", "early", "--json"]].concat());
    assert!(stderr(&early).contains("a start that never reached its first frame"), "{}", stderr(&early));
    assert_eq!(json(&early)["digest"], json(&sim(&dir, &["replay", "shard-1", "--json"]))["digest"]);
    let other =
        sim(&dir, &["run", "--personas", "20", "--ticks", "3", "--seed", "5", "--shard", "0/2", "--out", "shard-0"]);
    assert!(!other.status.success());
    assert!(stderr(&other).contains("holds another run (it differs from this command in: seed)"), "{}", stderr(&other));
}

/// A missing, duplicated, unfinished or mismatched shard is refused by
/// name, as are shards stopped by their budgets at different ticks; nothing
/// is written.
#[test]
fn a_bad_set_of_shards_is_refused_by_name() {
    let dir = scratch("shards-refused");
    let args = ["run", "--personas", "10", "--ticks", "2", "--seed", "3"];
    for i in 0..3 {
        json(&shard(&dir, &args, i, 3));
    }
    json(&sim(
        &dir,
        &["run", "--personas", "10", "--ticks", "2", "--seed", "8", "--shard", "2/3", "--out", "other-seed", "--json"],
    ));
    json(&sim(&dir, &[&args[..], &["--out", "whole", "--json"]].concat()));
    let refused = |dirs: &[&str], expect: &str| {
        let out = sim(&dir, &[&["merge", "--out", "merged"][..], dirs].concat());
        assert!(!out.status.success(), "{dirs:?} merged");
        assert!(stderr(&out).contains(expect), "{dirs:?}: {}", stderr(&out));
        assert!(!dir.join("merged").exists(), "nothing is written");
    };
    refused(&["shard-0", "shard-2"], "shard 1 of 3 missing");
    refused(&["shard-0", "shard-1", "shard-2", "shard-1"], "shard-1 and shard-1 are both shard 1 of 3");
    refused(
        &["shard-0", "shard-1", "other-seed"],
        "other-seed is not a shard of the same run as shard-0: its seed differs: 8 against 3",
    );
    refused(&["shard-0", "whole"], "whole: not a shard");
    refused(&["shard-0", "nowhere"], "nowhere: no trace here");
    let big = sim(&dir, &["run", "--personas", "2500000", "--out", "big"]);
    assert!(stderr(&big).contains("split the panel into at least 3 shards"), "{}", stderr(&big));
    let big = sim(&dir, &["run", "--personas", "2500000", "--shard", "0/2", "--out", "big"]);
    assert!(
        stderr(&big).contains("holds 1250000; a shard holds at most 1000000 (use at least 3 shards)"),
        "{}",
        stderr(&big)
    );
    assert!(!dir.join("big").exists(), "nothing is written");

    // Budgets: each shard gets a third. At 0.00045 USD every shard spends
    // its share in tick 1; at 0.0006 USD one does in tick 1, two in tick 2.
    for (budget, same) in [("0.00045", true), ("0.0006", false)] {
        let at = dir.join(format!("budget-{budget}"));
        std::fs::create_dir_all(&at).expect("dir");
        let args = ["run", "--personas", "9", "--ticks", "3", "--seed", "3", "--budget-usd", budget];
        for i in 0..3 {
            let out = shard(&at, &args, i, 3);
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let out = merge(&at, 3);
        if same {
            let v = json(&out);
            assert_eq!(
                (v["stopped"]["reason"].as_str(), v["stopped"]["after_tick"].as_u64()),
                (Some("budget"), Some(1))
            );
            assert_eq!(v["stopped"]["budget_nano_usd"], 450_000, "the whole run's budget");
        } else {
            assert!(!out.status.success());
            let err = stderr(&out);
            assert!(err.contains("the shards stopped at different ticks"), "{err}");
            assert!(
                err.contains("shard-2 after tick 1 (budget)") && err.contains("shard-0 after tick 2 (budget)"),
                "{err}"
            );
        }
    }
}

/// A live-chat panel (the loopback OpenAI-compatible server) gives the same
/// digest in shards as whole, and the merged run replays with no call.
#[test]
fn a_live_chat_panel_in_shards_gives_the_unsharded_digest() {
    let dir = scratch("shards-live");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, auth, server) = crate::trace::openai_server(stop.clone(), 0);
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n\
         [chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
         [prices.models.loopback-model]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n"
    );
    std::fs::write(dir.join("live.toml"), config).expect("write");
    let args = ["run", "--personas", "6", "--ticks", "2", "--config", "live.toml"];
    let whole = json(&sim(&dir, &[&args[..], &["--out", "whole", "--json"]].concat()));
    for i in 0..2 {
        json(&shard(&dir, &args, i, 2));
    }
    let merged = json(&merge(&dir, 2));
    let calls = auth.lock().len();
    let replay = json(&sim(&dir, &["replay", "merged", "--json"]));
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert_eq!(merged["digest"], whole["digest"]);
    assert_eq!(merged["cost"]["chat_nano_usd"], whole["cost"]["chat_nano_usd"], "each answer bought once");
    assert_eq!(replay["provider_calls"], 0);
    assert_eq!(auth.lock().len(), calls, "replay sent nothing to the server");
}

/// The command lines of `examples/k8s` and `examples/slurm`, run as plain
/// processes: N shards at once, each told its index the way Kubernetes
/// (`JOB_COMPLETION_INDEX`) or Slurm (`SLURM_ARRAY_TASK_ID`) tells it, then
/// the merge step; both give the unsharded digest.
#[test]
fn the_kubernetes_and_slurm_examples_run_as_processes() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let lines = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(examples.join(file)).expect("example");
        text.lines()
            .map(|l| l.trim().trim_start_matches("- ").to_string())
            .filter(|l| l.starts_with("sim-cli "))
            .collect()
    };
    let sim_cli = env!("CARGO_BIN_EXE_sim-cli");
    let shell = |dir: &Path, line: &str, env: Option<(&str, String)>| {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", &line.replacen("sim-cli", sim_cli, 1)]).current_dir(dir);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        c.env_remove("JOB_COMPLETION_INDEX").env_remove("SLURM_ARRAY_TASK_ID");
        c
    };
    for (name, files, variable) in [
        ("k8s", ["k8s/indexed-job.yaml", "k8s/merge-job.yaml"], "JOB_COMPLETION_INDEX"),
        ("slurm", ["slurm/shards.sbatch", "slurm/merge.sbatch"], "SLURM_ARRAY_TASK_ID"),
    ] {
        let dir = scratch(&format!("shards-{name}"));
        let (run, merge) = (lines(files[0]), lines(files[1]));
        assert_eq!((run.len(), merge.len()), (1, 1), "{name}: one sim-cli line each: {run:?} {merge:?}");
        let n: u32 = run[0]
            .split("auto/")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .expect("auto/N");
        let children: Vec<_> = (0..n)
            .map(|i| {
                let mut c = shell(&dir, &run[0], None);
                c.env(variable, i.to_string()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
                c.spawn().expect("spawn")
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().expect("wait");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name}: {err}");
            assert!(err.contains(&format!("index from {variable}")), "auto says where the index came from: {err}");
        }
        let merged = shell(&dir, &merge[0], None).output().expect("merge");
        assert!(merged.status.success(), "{name}: {}", stderr(&merged));
        let whole_line = run[0].split(" --shard").next().expect("run line").to_string() + " --out whole --json";
        let whole = shell(&dir, &whole_line, None).output().expect("whole");
        let summary = |p: &str| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join(p)).expect("summary")).expect("json");
            v["digest"].clone()
        };
        assert!(whole.status.success(), "{}", stderr(&whole));
        let merged_dir =
            merge[0].split("--out ").nth(1).and_then(|r| r.split_whitespace().next()).expect("--out").to_string();
        assert_eq!(summary(&format!("{merged_dir}/summary.json")), summary("whole/summary.json"), "{name}");
    }
}

/// `bench scale --shards`: each shard measured in its own child, then the
/// merge; the merged digest is checked against the unsharded run's, and
/// no run directory is left behind.
#[test]
fn bench_scale_measures_each_shard_and_the_merge() {
    let dir = scratch("shards-bench");
    let out = sim(
        &dir,
        &["bench", "scale", "--personas", "40", "--shards", "1,2", "--ticks", "2", "--scratch", ".", "--json"],
    );
    let v = json(&out);
    let rows = v["results"].as_array().expect("results");
    let shape: Vec<(u64, Option<u64>)> =
        rows.iter().map(|r| (r["shards"].as_u64().expect("shards"), r["shard"].as_u64())).collect();
    assert_eq!(shape, [(1, None), (2, Some(0)), (2, Some(1))]);
    let turns = |r: &serde_json::Value| r["persona_turns"].as_u64().expect("turns");
    assert_eq!(turns(&rows[1]) + turns(&rows[2]), turns(&rows[0]), "the shards share the panel's jobs");
    assert!(rows.iter().all(|r| r["peak_rss_bytes"].as_u64() > Some(1 << 20)), "{rows:?}");
    let m = &v["merges"][0];
    assert_eq!((m["shards"].as_u64(), m["same_digest"].as_bool()), (Some(2), Some(true)), "{m}");
    assert_eq!(m["digest"], rows[0]["digest"]);
    assert!(m["peak_rss_bytes"].as_u64() > Some(1 << 20) && m["cpu_seconds"].as_f64() > Some(0.0), "{m}");
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(left.iter().all(|n| !n.to_string_lossy().starts_with("sim-bench-scale")), "{left:?}");
}
