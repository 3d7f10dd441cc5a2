use crate::support::{scratch, sim, stderr};
use serde_json::Value;

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json")
}

/// Same seed, any thread count: byte-identical results; every output is
/// written; the criteria and tests are where scripts look for them.
#[test]
fn experiment_is_deterministic_and_writes_every_output() {
    let dir = scratch("experiment");
    let run = |out: &str, threads: &str| {
        sim(
            &dir,
            &["experiment", "--topics", "2", "--reps", "2", "--lambda", "0.1,0.2", "--out", out, "--threads", threads],
        )
    };
    let o = run("a", "1");
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let analysis = stdout.find("Pre-registered analysis").expect("the analysis is printed");
    assert!(analysis < stdout.find("| criterion |").expect("the criteria table"), "the analysis comes first");
    assert!(run("b", "4").status.success());
    let a = std::fs::read(dir.join("a/results.json")).expect("results");
    assert_eq!(
        a,
        std::fs::read(dir.join("b/results.json")).expect("results"),
        "same seed, same results.json at 1 and 4 threads"
    );
    for f in ["report.md", "decay.svg", "retention.svg", "stability.svg"] {
        assert!(dir.join("a").join(f).is_file(), "{f}");
    }
    let v = read_json(&dir.join("a/results.json"));
    let criteria = v["summary"]["criteria"].as_array().expect("criteria");
    assert_eq!(criteria.len(), 4);
    for c in criteria {
        assert!(
            c["name"].is_string() && c["threshold"].is_number() && c["value"].is_number() && c["pass"].is_boolean(),
            "{c}"
        );
        assert_eq!(c["verdict"], "inconclusive", "2 topics are below the minimum design: {c}");
    }
    assert_eq!(v["summary"]["recommendation"]["action"], "collect_more");
    for arm in ["field_vs_message_passing", "store_vs_message_passing", "field_vs_store"] {
        let one_sided = &v["summary"]["comparisons"][arm]["one_sided"];
        assert!(one_sided["p_value"].is_number() && one_sided["n"] == 2, "{arm}: {one_sided}");
    }
    let tokens = &v["summary"]["token_ratios"]["field"];
    assert!(tokens["total"].as_f64() > tokens["chat_only"].as_f64(), "the field pays for embeddings: {tokens}");
    // 2 topics x 2 reps x (message passing + store + 2 lambdas).
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(16));
    // Dollars: each mission's chat and embedding bills add up, per condition and in all.
    let runs = v["runs"].as_array().expect("runs");
    let nano = |r: &Value, k: &str| r["cost"][k].as_u64().expect("nano-USD");
    assert!(runs.iter().all(|r| nano(r, "total_nano_usd") == nano(r, "chat_nano_usd") + nano(r, "embedding_nano_usd")));
    let cost = &v["summary"]["cost"];
    let main: u64 = runs.iter().filter(|r| r["lambda"] == 0.1).map(|r| nano(r, "total_nano_usd")).sum();
    assert_eq!(cost["per_condition"]["field"]["total_nano_usd"].as_u64(), Some(main));
    assert_eq!(cost["all_missions_nano_usd"].as_u64(), Some(runs.iter().map(|r| nano(r, "total_nano_usd")).sum()));
    assert!(cost["per_condition"]["field"]["mean_field_patterns"].as_f64() > Some(0.0));
    assert_eq!((cost["chat_price"].as_str(), cost["embedding_price"].as_str()), (Some("nominal"), Some("nominal")));
    // Task accuracy by the scripted rubric judge, per run and per condition.
    assert!(runs.iter().all(|r| r["task_accuracy"]["scripted"] == true && r["task_accuracy"]["score"].is_u64()));
    let acc = &v["summary"]["task_accuracy"];
    assert_eq!((acc["judge"].as_str(), acc["judged_pairs"].as_u64()), (Some("scripted-rubric-judge-v1"), Some(4)));
    assert!(acc["wilcoxon"]["p_value"].is_number() && acc["means"]["field"].is_number());
    assert_eq!(v["summary"]["pairs"], 4);
    // Each field mission's log replays.
    let o = sim(&dir, &["field", "replay", "a/fields/grid-storage-rep1-lambda0.1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let replay: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(replay["matched"], true);
    let report = std::fs::read_to_string(dir.join("a/report.md")).expect("report");
    assert!(report.contains("scripted agent model") && report.contains("No live language model was called"));
    assert!(report.lines().nth(3).is_some_and(|l| l.starts_with("**Recommendation: collect more**")), "{report}");
    // The sweep's pick is the best retention among the lambdas it ran.
    let sweep = v["summary"]["lambda_sweep"].as_array().expect("sweep");
    let best = sweep.iter().map(|p| p["means"]["retention"].as_f64().unwrap_or(f64::NAN)).fold(f64::MIN, f64::max);
    let chosen = &v["summary"]["lambda_pick"]["chosen"];
    let at_chosen = sweep.iter().find(|p| &p["lambda"] == chosen).expect("the pick is a swept lambda");
    assert_eq!(at_chosen["means"]["retention"].as_f64(), Some(best));
    assert!(report.contains(&format!("The sweep picks lambda {chosen}")), "{report}");
    let calibrated = &v["summary"]["lambda_pick"]["calibrated"];
    assert!(calibrated["accessed_patterns"].as_u64().is_some_and(|n| n > 0), "{calibrated}");
    assert!(calibrated["lambda"].as_f64().is_some_and(|l| l > 0.0), "{calibrated}");
}

/// `--lambda ...,auto` runs the main comparison at the sweep's pick.
#[test]
fn lambda_auto_compares_at_the_sweeps_pick() {
    let dir = scratch("experiment-auto");
    let o = sim(&dir, &["experiment", "--topics", "2", "--reps", "1", "--lambda", "2,0.05,auto", "--out", "r"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = read_json(&dir.join("r/results.json"));
    let chosen = v["summary"]["lambda_pick"]["chosen"].as_f64().expect("a pick");
    assert_eq!(v["experiment"]["lambdas"], serde_json::json!([2.0, 0.05]), "auto is not a lambda");
    // Without auto the comparison would use the first lambda, 2; slower
    // decay retains at least as much and wins a tie.
    assert!((chosen - 0.05).abs() < 1e-12, "picked {chosen}");
    assert_eq!(
        (v["summary"]["lambda"].as_f64(), v["experiment"]["main_lambda"].as_f64()),
        (Some(chosen), Some(chosen))
    );
}

/// The blind kit hides the condition in the files and its key names it
/// correctly.
#[test]
fn blind_export_keys_match_the_reports() {
    let dir = scratch("experiment-blind");
    let o = sim(
        &dir,
        &[
            "experiment",
            "--topics",
            "grid-storage,urban-heat",
            "--reps",
            "2",
            "--lambda",
            "0.1",
            "--out",
            "r",
            "--blind-export",
            "blind",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = read_json(&dir.join("r/results.json"))["runs"].as_array().cloned().expect("runs");
    let key = read_json(&dir.join("blind/key.json"));
    let id = read_json(&dir.join("r/results.json"))["experiment"]["id"].clone();
    assert_eq!(key["experiment"], id, "the kit carries the experiment's id");
    let key = key["pairs"].as_array().expect("key");
    assert_eq!(key.len(), 4);
    for k in key {
        let pair = k["pair"].as_str().expect("pair");
        for label in ["A", "B"] {
            let text = std::fs::read_to_string(dir.join(format!("blind/{pair}-{label}.md"))).expect("report");
            assert!(!text.contains("field") && !text.contains("message"), "the file does not name its condition");
            let run = runs
                .iter()
                .find(|r| r["topic"] == k["topic"] && r["rep"] == k["rep"] && r["condition"] == k[label])
                .expect("the keyed run exists");
            assert!(
                text.contains(run["report"].as_str().expect("report")),
                "{pair}-{label} holds the {} report",
                k[label]
            );
        }
    }
}

/// A persona run's reactions become a topic the agent team writes up.
#[test]
fn a_persona_run_is_written_up() {
    let dir = scratch("experiment-from-run");
    assert!(sim(&dir, &["run", "--personas", "8", "--ticks", "2", "--out", "panel"]).status.success());
    let o = sim(&dir, &["experiment", "--from-run", "panel", "--reps", "1", "--lambda", "0.1", "--out", "r", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = read_json(&dir.join("r/results.json"));
    assert_eq!(v["experiment"]["topics"][0]["name"], "panel");
    assert!(v["experiment"]["topics"][0]["findings"].as_u64().is_some_and(|n| n >= 2));
}

#[test]
fn bad_experiment_input_is_named() {
    let dir = scratch("experiment-bad");
    std::fs::write(dir.join("broken.toml"), "name = \"x\"\ntitle = [").expect("write");
    std::fs::write(dir.join("empty"), "").expect("write");
    let cases: [(&[&str], &str); 7] = [
        (&["experiment", "--topics", "volcanoes"], "unknown topic \"volcanoes\""),
        (&["experiment", "--topics", "broken.toml"], "broken.toml"),
        (&["experiment", "--reps", "0"], "--reps"),
        (&["experiment", "--topics", "13"], "--topics 13"),
        (&["experiment", "--lambda=-0.1"], "--lambda"),
        (&["experiment", "--lambda", "0.1,fast"], "\"fast\" is neither `auto` nor a decay constant"),
        (&["experiment", "--from-run", "empty"], "--from-run empty"),
    ];
    for (args, needle) in cases {
        let o = sim(&dir, args);
        assert!(!o.status.success(), "{args:?} must fail");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!dir.join("runs").exists(), "{args:?}: nothing written on bad input");
    }
}

/// With a config naming a live model, the three agents run on it, and the
/// outputs name it and say so.
#[test]
fn a_config_runs_the_agents_on_a_live_model() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = scratch("experiment-live");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (url, seen, server) = crate::trace::openai_server(stop.clone(), 0);
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
    );
    std::fs::write(dir.join("live.toml"), config).expect("write");
    let args = ["experiment", "--topics", "1", "--reps", "1", "--lambda", "0.1", "--config", "live.toml", "--out", "r"];
    let o = sim(&dir, &args);
    // Scripted agents, judged by the live model.
    let judged =
        ["experiment", "--topics", "1", "--reps", "1", "--lambda", "0.1", "--judge-config", "live.toml", "--out", "j"];
    let j = sim(&dir, &judged);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(j.status.success(), "{}", stderr(&j));
    let jv = read_json(&dir.join("j/results.json"));
    assert_eq!(jv["experiment"]["model"]["live"], false);
    assert_eq!(jv["summary"]["task_accuracy"]["judge"], "loopback-model");
    let v = read_json(&dir.join("r/results.json"));
    assert_eq!(v["experiment"]["model"]["name"], "loopback-model");
    assert_eq!(v["experiment"]["model"]["live"], true);
    // Live latency is measured, the modelled figure kept beside it.
    assert_eq!(v["summary"]["latency"]["kind"], "measured");
    let latency =
        v["summary"]["criteria"].as_array().expect("criteria").iter().find(|c| c["key"] == "latency").cloned();
    assert_eq!(latency.expect("a latency criterion")["source"], "measured");
    assert!(v["runs"].as_array().expect("runs").iter().all(|r| r["modelled_latency_ms"].is_number()));
    // Live prose: retention by key phrase and by meaning side by side; the
    // criterion names the one it uses.
    let retention = v["summary"]["criteria"][0].clone();
    assert_eq!((retention["key"].as_str(), retention["source"].as_str()), (Some("retention"), Some("semantic")));
    for r in v["runs"].as_array().expect("runs") {
        assert!(r["retention_semantic"].as_f64() >= r["retention"].as_f64(), "meaning adds to key phrases: {r}");
    }
    assert!(v["summary"]["means"]["field"]["retention_semantic"].is_number());
    // The server is gone: a replay answers every call from the cassette
    // and reproduces the runs, measured latencies included.
    let o = sim(&dir, &["experiment", "--replay", "r", "--out", "again"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("recorded answers served, no model called"), "{}", stderr(&o));
    let again = read_json(&dir.join("again/results.json"));
    assert_eq!(again["runs"], v["runs"], "the replay reproduces every run");
    assert_eq!(again["summary"], v["summary"]);
    assert_eq!(again["experiment"]["replayed_from"], "r/cassette.bin");
    // A cassette cut short is refused, naming the file; nothing is called.
    let bytes = std::fs::read(dir.join("r/cassette.bin")).expect("cassette");
    std::fs::create_dir_all(dir.join("cut")).expect("dir");
    std::fs::write(dir.join("cut/cassette.bin"), &bytes[..bytes.len() - 10]).expect("write");
    let o = sim(&dir, &["experiment", "--replay", "cut", "--out", "cut-out"]);
    assert!(!o.status.success() && stderr(&o).contains("cut/cassette.bin"), "{}", stderr(&o));
    assert!(seen.lock().iter().any(|l| l.contains("/chat/completions")), "the agents called the model");
    // A live model is told its role's task; the scripted model never is.
    for role in ["researcher", "analyst", "writer"] {
        let brief = format!("TASK: You are the {role} of a team");
        assert!(
            seen.lock().iter().any(|l| l.starts_with("BODY") && l.contains(&brief)),
            "no request briefs the {role}"
        );
    }
    let report = std::fs::read_to_string(dir.join("r/report.md")).expect("report");
    assert!(report.contains("the live model `loopback-model`"), "{report}");
    // The live model judges too: every run scored through it.
    for r in v["runs"].as_array().expect("runs") {
        let j = &r["task_accuracy"];
        assert_eq!((j["judge"].as_str(), j["scripted"].as_bool()), (Some("loopback-model"), Some(false)), "{r}");
        assert_eq!(j["justification"], "Judged on loopback.");
    }
    assert_eq!(v["summary"]["task_accuracy"]["judged_pairs"], 1);
}

/// An experiment with a blind kit of 6 pairs, and a sheet writer: `scores`
/// gives (field, message passing) per pair in kit order.
fn rated_kit(name: &str) -> (std::path::PathBuf, Value) {
    let dir = scratch(name);
    let args = ["experiment", "--topics", "3", "--reps", "2", "--lambda", "0.1", "--out", "r", "--blind-export", "kit"];
    let o = sim(&dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let key = read_json(&dir.join("kit/key.json"));
    (dir, key)
}

fn sheet(key: &Value, scores: &[(u8, u8)], id: &str) -> String {
    let mut s = String::from("pair,report_a_score_1_to_5,report_b_score_1_to_5,experiment\n");
    for (p, (field, control)) in key["pairs"].as_array().expect("pairs").iter().zip(scores) {
        let (a, b) = if p["A"] == "field" { (field, control) } else { (control, field) };
        s.push_str(&format!("{},{a},{b},{id}\n", p["pair"].as_str().expect("pair")));
    }
    s
}

/// A hand-made sheet with known scores: the human means, difference and
/// test land in results.json and report.md, the quality criterion takes
/// them (the proxy is kept), and rating twice changes nothing more.
#[test]
fn experiment_rate_folds_human_ratings_back_in() {
    let (dir, key) = rated_kit("experiment-rate");
    let id = key["experiment"].as_str().expect("id").to_string();
    assert_eq!(read_json(&dir.join("r/results.json"))["experiment"]["id"], id.as_str());
    let scores = [(5, 3), (4, 3), (5, 4), (3, 3), (4, 2), (5, 2)];
    std::fs::write(dir.join("kit/ratings.csv"), sheet(&key, &scores, &id)).expect("sheet");
    for _ in 0..2 {
        let o = sim(&dir, &["experiment", "rate", "r", "--ratings", "kit/ratings.csv"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let v = read_json(&dir.join("r/results.json"));
    let h = &v["human"];
    assert_eq!((h["rated_pairs"].as_u64(), h["total_pairs"].as_u64()), (Some(6), Some(6)));
    assert!((h["means"]["field"].as_f64().expect("mean") - 26.0 / 6.0).abs() < 1e-12);
    assert!((h["means"]["message_passing"].as_f64().expect("mean") - 17.0 / 6.0).abs() < 1e-12);
    assert!((h["mean_difference"].as_f64().expect("diff") - 1.5).abs() < 1e-12);
    // The topic is the unit: six rated pairs are three topics.
    assert_eq!((h["topics"].as_u64(), h["one_sided"]["n"].as_u64()), (Some(3), Some(3)));
    let quality =
        v["summary"]["criteria"].as_array().expect("criteria").iter().find(|c| c["key"] == "quality").cloned();
    let quality = quality.expect("a quality criterion");
    // The gain of 1.5 meets the threshold, but three topics are below the
    // minimum design: nothing is decided.
    assert_eq!((quality["source"].as_str(), quality["verdict"].as_str()), (Some("human"), Some("inconclusive")));
    assert_eq!((quality["pass"].as_bool(), quality["counted"].as_bool()), (Some(true), Some(true)));
    assert_eq!(v["summary"]["recommendation"]["action"], "collect_more");
    assert_eq!(v["summary"]["proxy_quality"]["source"], "proxy", "the proxy figure is kept");
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(18), "the runs are untouched");
    let report = std::fs::read_to_string(dir.join("r/report.md")).expect("report");
    assert_eq!(report.matches("## Human ratings").count(), 1, "rating again replaces the section");
    assert!(report.contains("difference +1.50. Over 3 topics"), "{report}");
}

#[test]
fn bad_rating_sheets_are_refused_with_the_row() {
    let (dir, key) = rated_kit("experiment-rate-bad");
    let id = key["experiment"].as_str().expect("id").to_string();
    let full = sheet(&key, &[(5, 3); 6], &id);
    let rate = |text: &str, extra: &[&str]| {
        std::fs::write(dir.join("kit/ratings.csv"), text).expect("sheet");
        let o = sim(&dir, &[&["experiment", "rate", "r", "--ratings", "kit/ratings.csv"][..], extra].concat());
        (o.status.success(), stderr(&o))
    };
    let lines: Vec<&str> = full.lines().collect();
    let out_of_range = full.replacen(",5,3,", ",7,3,", 1).replacen(",3,5,", ",3,7,", 1);
    let (ok, e) = rate(&out_of_range, &[]);
    assert!(!ok && e.contains("row 2, report_") && e.contains("\"7\" is not a score from 1 to 5"), "{e}");
    let twice = format!("{full}{}\n", lines[3]);
    let (ok, e) = rate(&twice, &[]);
    assert!(!ok && e.contains("row 8: pair pair-003 is rated twice (first at row 4)"), "{e}");
    let short = format!("{}\n", lines[..5].join("\n"));
    let (ok, e) = rate(&short, &[]);
    assert!(!ok && e.contains("pair pair-005 has no row (use --partial"), "{e}");
    let (ok, e) = rate(&short, &["--partial"]);
    assert!(ok, "{e}");
    assert_eq!(read_json(&dir.join("r/results.json"))["human"]["rated_pairs"], 4);
    let other = full.replace(&id, "0123456789abcdef");
    let (ok, e) = rate(&other, &[]);
    assert!(!ok && e.contains("row 2: from experiment \"0123456789abcdef\", not this one"), "{e}");
    let mut k = key.clone();
    k["experiment"] = Value::from("0123456789abcdef");
    std::fs::write(dir.join("kit/key.json"), serde_json::to_vec(&k).expect("json")).expect("key");
    let (ok, e) = rate(&full, &[]);
    assert!(!ok && e.contains("the key of experiment 0123456789abcdef, not of this one"), "{e}");
}

/// The sensitivity sweep: every setting reported, the chart drawn, and the
/// scripted model's sanity: a cut below the key phrases (6 words) costs
/// message passing findings the default cut (12, which every key phrase
/// lies within) keeps.
#[test]
fn the_sensitivity_sweep_shows_where_the_field_stops_winning() {
    let dir = scratch("experiment-sensitivity");
    let o =
        sim(&dir, &["experiment", "--topics", "3", "--reps", "1", "--lambda", "0.1", "--out", "r", "--sensitivity"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = read_json(&dir.join("r/results.json"));
    let analyst = v["sensitivity"]["analyst_words"].as_array().expect("analyst sweep");
    let words: Vec<Value> = analyst.iter().map(|p| p["analyst_words"].clone()).collect();
    assert_eq!(words, vec![Value::from(6), Value::from(12), Value::from(24), Value::from(48), Value::Null]);
    let mp: Vec<f64> = analyst.iter().map(|p| p["message_passing_retention"].as_f64().expect("retention")).collect();
    assert!(mp[0] < mp[1] && mp[0] < mp[4], "a cut below the key phrases costs findings: {mp:?}");
    let default = &analyst[1];
    let main = &v["summary"]["means"]["message_passing"]["retention"];
    assert_eq!(&default["message_passing_retention"], main, "the default setting is the main comparison");
    assert_eq!(v["sensitivity"]["writer_context"].as_array().map(Vec::len), Some(3));
    assert!(v["sensitivity"]["finding"].as_str().is_some_and(|f| f.contains("retention")));
    assert!(dir.join("r/sensitivity.svg").is_file());
    let report = std::fs::read_to_string(dir.join("r/report.md")).expect("report");
    assert!(report.contains("## Sensitivity of the scripted verdict") && report.contains("| whole points | 260 |"));
}

/// The minimum design decides, with every figure where a script looks;
/// the shipped topics are at least twelve, every finding reachable.
#[test]
fn the_minimum_design_reaches_a_verdict_and_the_topics_check_out() {
    let dir = scratch("experiment-minimum");
    let o = sim(&dir, &["experiment", "--topics", "5", "--reps", "1", "--json", "--out", "r"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let s = &v["summary"];
    let action = s["recommendation"]["action"].as_str().expect("an action");
    assert!(["reassess", "targeted_fixes", "store_suffices", "proceed"].contains(&action), "{action}");
    assert_eq!(s["topics"], 5);
    for c in s["criteria"].as_array().expect("criteria") {
        assert!(c["verdict"] == "pass" || c["verdict"] == "fail", "{c}");
    }
    assert!(s["criteria"][0]["one_sided"]["p_value"].is_number());
    for arm in ["field", "store", "message_passing"] {
        assert!(s["means"][arm]["retention"].is_number(), "{arm}");
    }
    let tokens = &s["token_ratios"]["field"];
    assert!(tokens["chat_only"].is_number() && tokens["total"].is_number(), "{tokens}");
    assert!(s["analysis"].as_array().is_some_and(|a| a.len() > 3));
    let o = sim(&dir, &["experiment", "topics", "--check", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["topics"].as_u64() >= Some(12), "{v}");
    assert_eq!(v["unreachable"], serde_json::json!([]));
    // A topic with a key phrase past the analyst's cut is named and refused.
    let late = include_str!("../../../fixtures/topics/grid-storage.toml").replace(
        "Developers now pair most new solar plants with four-hour batteries.",
        "Developers now pair most of the new solar plants they build each year with four-hour batteries.",
    );
    std::fs::write(dir.join("late.toml"), late).expect("write");
    let o = sim(&dir, &["experiment", "topics", "--check", "late.toml"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("unreachable: grid-storage f2 in message_passing"), "{out}");
    assert!(stderr(&o).contains("1 of 6 findings are unreachable"), "{}", stderr(&o));
}
