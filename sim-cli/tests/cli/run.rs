use crate::support::{scratch, sim, stderr};

#[test]
fn json_summary_has_the_stable_keys() {
    let dir = scratch("json");
    let out = sim(&dir, &["run", "--personas", "50", "--ticks", "3", "--json", "--out", "r"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    for key in [
        "/digest",
        "/full_digest",
        "/personas",
        "/ticks",
        "/jobs/ok",
        "/jobs/failed",
        "/jobs/refused",
        "/intent",
        "/embedding/port_invocations",
        "/embedding/upstream_requests",
        "/embedding/texts_requested",
        "/embedding/unique_texts_submitted",
        "/embedding/cache_hits",
        "/embedding/retrieval_port_invocations",
        "/embedding/memory_port_invocations",
        "/tokens",
        "/cost/provider_total_nano_usd",
        "/cost/allocated_total_nano_usd",
        "/timings_ms",
        "/out_dir",
    ] {
        assert!(v.pointer(key).is_some(), "missing {key}");
    }
    assert_eq!(v.pointer("/jobs/total").and_then(|x| x.as_u64()), Some(150));
    assert_eq!(v["cost"]["allocated_total_nano_usd"], v["cost"]["provider_total_nano_usd"]);
    assert_eq!(v["digest"].as_str().map(str::len), Some(64));
    let dir_out = v["out_dir"].as_str().expect("out_dir");
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(dir_out).join(runs::dir::SUMMARY)).expect("summary.json"))
            .expect("json");
    assert_eq!(saved["digest"], v["digest"]);
    let lines = std::fs::read_to_string(dir.join(dir_out).join(runs::dir::OUTCOMES)).expect("outcomes.jsonl");
    assert_eq!(lines.lines().count(), 150);
}

#[test]
fn readable_summary_and_fresh_run_directories() {
    let dir = scratch("text");
    let first = sim(&dir, &["run", "--personas", "5", "--ticks", "2"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = String::from_utf8_lossy(&first.stdout);
    for part in
        ["Jobs: 10 total", "Purchase intent", "Embedding", "Tokens:", "Cost:", "Timings:", "Digest:", "Written to:"]
    {
        assert!(text.contains(part), "missing {part:?} in\n{text}");
    }
    assert!(first.stderr.is_empty(), "piped stderr stays quiet: {}", stderr(&first));
    let second = sim(&dir, &["run", "--personas", "5", "--ticks", "2"]);
    assert!(second.status.success());
    assert!(dir.join("runs/default-s42-5x2/summary.json").exists());
    assert!(dir.join("runs/default-s42-5x2-2/summary.json").exists(), "a second run gets its own directory");
}

#[test]
fn budget_stop_is_reported() {
    let dir = scratch("budget");
    let out = sim(&dir, &["run", "--personas", "50", "--ticks", "3", "--budget-usd", "0.000001", "--out", "b"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("STOPPED after tick 1 of 3: budget reached"));
}

#[test]
fn bench_embed_reports_both_strategies_and_the_ratio() {
    let dir = scratch("bench-embed");
    let out =
        sim(&dir, &["bench", "embed", "--personas", "6", "--ticks", "2", "--reps", "1", "--latency-ms", "0", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.len(), 6, "three strategies, cold and warm");
    let get = |s: &str, c: &str, k: &str| {
        rows.iter().find(|r| r["strategy"] == s && r["cache"] == c).and_then(|r| r[k].as_u64()).expect("row")
    };
    assert!(get("per-persona", "cold", "port_invocations") > get("batched", "cold", "port_invocations"));
    assert_eq!(get("batched", "warm", "upstream_requests"), 0);
    assert!(get("per-persona-concurrent", "cold", "port_invocations") > get("batched", "cold", "port_invocations"));
    assert!(v["speedup_ratio"].as_f64().is_some() && v["concurrent_speedup_ratio"].as_f64().is_some());
    let digests: Vec<&str> = rows.iter().filter_map(|r| r["digest"].as_str()).collect();
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "strategy and cache never change content");
}

#[test]
fn bench_chat_reports_both_concurrencies_and_the_ratio() {
    let dir = scratch("bench-chat");
    let args = ["bench", "chat", "--personas", "8", "--latency-ms", "5", "--concurrency", "8", "--json"];
    let out = sim(&dir, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.iter().map(|r| r["concurrency"].as_u64()).collect::<Vec<_>>(), vec![Some(1), Some(8)]);
    assert_eq!(rows[0]["digest"], rows[1]["digest"], "concurrency never changes content");
    assert!(v["speedup_ratio"].as_f64().is_some_and(|r| r > 0.0));
}

/// Each size runs in its own child: the rows carry that run's digest, a
/// peak RSS and CPU time the kernel measured (the larger panel's are
/// larger), the trace bytes, and leave no run directory behind.
#[test]
fn bench_scale_measures_each_size_in_a_child_and_cleans_up() {
    let dir = scratch("bench-scale");
    let args = ["bench", "scale", "--personas", "20,3000", "--ticks", "2", "--scratch", ".", "--json"];
    let out = sim(&dir, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["results"].as_array().expect("results");
    assert_eq!(rows.len(), 2);
    let run = sim(&dir, &["run", "--personas", "20", "--ticks", "2", "--json", "--out", "r"]);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(rows[0]["digest"], summary["digest"]);
    let trace = std::fs::metadata(dir.join("r/trace.bin")).expect("trace").len();
    assert_eq!(rows[0]["trace_bytes"].as_u64(), Some(trace));
    assert_eq!(rows[1]["persona_turns"].as_u64(), Some(6000));
    let peak = |r: &serde_json::Value| r["peak_rss_bytes"].as_u64().expect("peak");
    assert!(peak(&rows[0]) > 1 << 20 && peak(&rows[1]) > peak(&rows[0]), "{rows:?}");
    // The kernel's CPU time of the run: the larger panel used more of it.
    let cpu = |r: &serde_json::Value| r["cpu_seconds"].as_f64().expect("cpu");
    assert!(cpu(&rows[0]) > 0.0 && cpu(&rows[1]) > cpu(&rows[0]), "{rows:?}");
    let per_cpu = rows[1]["turns_per_cpu_second"].as_f64().expect("turns per CPU-second");
    assert!((per_cpu * cpu(&rows[1]) - 6000.0).abs() < 1.0, "{rows:?}");
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(left.iter().all(|n| !n.to_string_lossy().starts_with("sim-bench-scale")), "{left:?}");
}

/// `run --panel`: one persona per row, stated in the row's own traits and
/// joined back to it; a seeded subsample; replay; a digest that does not
/// depend on where the file lies; bad rows named.
#[test]
fn a_panel_from_data_gives_one_persona_per_row() {
    let dir = scratch("panel");
    let anes = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/surveys/anes96");
    for name in ["panel.csv", "panel-map.toml"] {
        std::fs::copy(anes.join(name), dir.join(name)).expect("copy");
    }
    std::fs::create_dir_all(dir.join("elsewhere")).expect("dir");
    std::fs::copy(anes.join("panel.csv"), dir.join("elsewhere/people.csv")).expect("copy");
    let run = |panel: &str, out: &str, personas: &str| {
        let o = sim(
            &dir,
            &[
                "run",
                "--panel",
                panel,
                "--panel-map",
                "panel-map.toml",
                "--personas",
                personas,
                "--ticks",
                "2",
                "--json",
                "--out",
                out,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("json")
    };
    let a = run("panel.csv", "a", "40");
    assert_eq!(a["personas"], 40, "a seeded subsample of 40 of the 944 rows");
    let moved = run("elsewhere/people.csv", "b", "40");
    assert_eq!(a["digest"], moved["digest"], "the same rows give the same digest wherever the file lies");
    assert_ne!(a["digest"], run("panel.csv", "c", "41")["digest"]);

    let exported = sim(&dir, &["export", "outcomes", "a", "--with-traits", "--tick", "1"]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let panel = std::fs::read_to_string(dir.join("panel.csv")).expect("panel");
    for row in &rows {
        let traits = &row["traits"];
        let id = traits["row"].as_str().expect("every persona names its row");
        let line = panel.lines().find(|l| l.starts_with(&format!("{id},"))).expect("the row is in the file");
        let age = line.split(',').nth(1).expect("age");
        assert_eq!(traits["traits"][0], serde_json::json!(["age", age]), "{id}");
        assert!(traits.get("city").is_none(), "nothing drawn is shown for a persona given by data");
    }
    let ids: std::collections::BTreeSet<&str> = rows.iter().filter_map(|r| r["traits"]["row"].as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "one persona per row");
    let csv = sim(&dir, &["export", "outcomes", "a", "--format", "csv"]);
    assert!(String::from_utf8_lossy(&csv.stdout).lines().next().is_some_and(|h| h.ends_with(",respondent")));

    let replay = sim(&dir, &["replay", "a"]);
    assert!(replay.status.success() && String::from_utf8_lossy(&replay.stdout).contains("every digest matches"));

    std::fs::write(dir.join("bad.csv"), "id,age,educ,income,popul,TVnews\nr1,36,3,1,0,7\nr2,thirty,4,1,190,1\n")
        .expect("write");
    let o = sim(&dir, &["run", "--panel", "bad.csv", "--panel-map", "panel-map.toml", "--out", "d"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad.csv: row r2, column age: \"thirty\" is not a whole number"), "{}", stderr(&o));
    let o = sim(&dir, &["run", "--panel", "bad.csv", "--panel-map", "panel-map.toml", "--personas", "5", "--out", "e"]);
    assert!(stderr(&o).contains("bad.csv: row r2"), "the file is read whole before any subsample");
    std::fs::write(dir.join("two.csv"), "id,age,educ,income,popul,TVnews\nr1,36,3,1,0,7\nr2,30,4,1,190,1\n")
        .expect("write");
    let o = sim(&dir, &["run", "--panel", "two.csv", "--panel-map", "panel-map.toml", "--personas", "3", "--out", "f"]);
    assert!(stderr(&o).contains("--personas 3: the panel two.csv has only 2 rows"), "{}", stderr(&o));
    assert!(!dir.join("d").exists() && !dir.join("f").exists(), "nothing is written for bad input");
}

/// A probe with its own options is asked as a survey question: the prompt
/// numbers the options, every answer is one of them, and the summary counts
/// each option; bad options are named.
#[test]
fn a_probe_on_its_own_scale_counts_each_option() {
    let dir = scratch("probe-options");
    let scenario = r#"
name = "party"

[[stimuli]]
id = "mug"
kind = "product"
title = "Hearth smart thermo mug"
category = "coffee"
price = 89.0
text = "Keeps coffee at your chosen temperature for three hours."

[[ticks]]
[[ticks.show]]
stimuli = ["mug"]

[[probes]]
tick = 1
id = "party"
question = "Which party do you usually feel closest to?"
options = ["Democrat", "Independent", "Republican"]

[[probes]]
tick = 1
id = "recommend"
question = "How likely are you to recommend the mug?"
"#;
    std::fs::write(dir.join("party.toml"), scenario).expect("write");
    let o = sim(&dir, &["run", "--scenario", "party.toml", "--personas", "60", "--ticks", "1", "--json", "--out", "r"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let party = &s["probes"]["party"];
    let counts: Vec<u64> =
        party["histogram"].as_array().expect("histogram").iter().filter_map(|c| c.as_u64()).collect();
    assert_eq!(counts.len(), 3, "one count per option");
    assert_eq!(counts.iter().sum::<u64>() + party["unparsed"].as_u64().unwrap_or(0), 60);
    assert!(counts.iter().all(|c| *c > 5), "the scripted model spreads over the options: {counts:?}");
    assert_eq!(s["probes"]["recommend"]["histogram"].as_array().map(Vec::len), Some(5), "the 1-5 probe is as it was");
    let lines = std::fs::read_to_string(dir.join("r/outcomes.jsonl")).expect("outcomes");
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().expect("a line")).expect("json");
    let purposes: Vec<&str> =
        first["chat_calls"].as_array().expect("calls").iter().filter_map(|c| c["purpose"].as_str()).collect();
    assert!(purposes.contains(&"Survey") && purposes.contains(&"Probe"), "{purposes:?}");
    let report = sim(&dir, &["report", "r"]);
    assert!(report.status.success(), "{}", stderr(&report));

    std::fs::write(
        dir.join("bad.toml"),
        scenario.replace(r#"["Democrat", "Independent", "Republican"]"#, r#"["Yes"]"#),
    )
    .expect("write");
    let o = sim(&dir, &["run", "--scenario", "bad.toml", "--out", "b"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("probes[0].options: 1 options; a question has 2 to 11"), "{}", stderr(&o));
}
