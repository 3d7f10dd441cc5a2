use crate::support::{scratch, sim, stderr};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("json on stdout")
}

/// simulate writes the log, the saved field and telemetry; replay matches
/// every phase; stats rebuilds the same telemetry from the log.
#[test]
fn simulate_replay_and_stats() {
    let dir = scratch("field-sim");
    let args = ["field", "simulate", "--seed", "9", "--phases", "8", "--dim", "16", "--out", "f", "--json"];
    let sum = json(&sim(&dir, &args));
    for f in ["field.events", "field.index", "field.patterns", "telemetry.json"] {
        assert!(dir.join("f").join(f).is_file(), "{f} written");
    }
    assert_eq!(sum["operations"]["failed"], 0);
    let replay = json(&sim(&dir, &["field", "replay", "f", "--json"]));
    assert_eq!(replay["matched"], true);
    assert_eq!(replay["phases"].as_array().map(Vec::len), Some(8));
    assert_eq!(replay["digest"], sum["digest"]);
    let stats = json(&sim(&dir, &["field", "stats", "f", "--json"]));
    let written: Value =
        serde_json::from_slice(&std::fs::read(dir.join("f/telemetry.json")).expect("read")).expect("json");
    assert_eq!(stats, written, "stats from the log equal the telemetry written at the end of the run");
    for key in [
        "injects",
        "queries",
        "resonance",
        "multi_agent_patterns",
        "timeline",
        "stability",
        "convergence_phase",
        "monitor",
    ] {
        assert!(stats.get(key).is_some(), "telemetry has {key}");
    }
    // The keys scripts read keep their places.
    assert!(stats["resonance"]["max"].as_f64().is_some_and(f64::is_finite));
    assert!(stats["queries"]["total"].as_u64().is_some_and(|n| n > 0));
    assert!(stats["multi_agent_patterns"].as_array().expect("list").iter().all(|p| p["accesses"].as_u64().is_some()));
    let share = stats["busiest"]["share"].as_f64().expect("busiest share");
    assert!(share > 0.0 && share <= 0.5, "{share}");
    assert_eq!(sum["busiest"], stats["busiest"], "simulate's summary reports the busiest pattern");
    let ratios: Vec<f64> =
        stats["timeline"].as_array().expect("timeline").iter().filter_map(|p| p["strength_ratio"].as_f64()).collect();
    assert!(!ratios.is_empty() && ratios.iter().all(|r| *r >= 1.0), "max/min strength ratio per phase: {ratios:?}");
    // Same seed, other thread count: same digest.
    let again = json(&sim(
        &dir,
        &["field", "simulate", "--seed", "9", "--phases", "8", "--dim", "16", "--out", "g", "--threads", "1", "--json"],
    ));
    assert_eq!(again["digest"], sum["digest"]);
    // An alarm set low enough fires, and the summary says so.
    let o = sim(
        &dir,
        &["field", "simulate", "--seed", "9", "--phases", "8", "--dim", "16", "--out", "h", "--ratio-alarm", "1.5"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("ALARM") && text.contains("above the alarm of 1.5"), "{text}");
    assert!(!String::from_utf8_lossy(&sim(&dir, &["field", "stats", "g"]).stdout).contains("ALARM"));
}

#[test]
fn bench_reports_every_size_with_the_plain_scan() {
    let dir = scratch("field-bench");
    let v = json(&sim(&dir, &["field", "bench", "--vectors", "50,200", "--dim", "32", "--min-ms", "5", "--json"]));
    let sizes = v["sizes"].as_array().expect("sizes");
    assert_eq!(sizes.len(), 2);
    for (s, n) in sizes.iter().zip([50, 200]) {
        assert_eq!((s["vectors"].as_u64(), s["dim"].as_u64()), (Some(n), Some(32)));
        // The pinned figures come from a `taskset -c 0` child (util-linux,
        // on every Debian machine).
        for key in [
            "inject_us",
            "query_single_qps",
            "query_batched_qps",
            "plain_scan_single_qps",
            "plain_scan_batched_qps",
            "pinned_query_batched_qps",
            "batched_vs_pinned",
        ] {
            assert!(s[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {s}");
        }
    }
    assert_eq!(v["threads"], 1, "FAISS runs one OpenMP thread unless told otherwise");
}

#[test]
fn bad_field_input_is_named() {
    let dir = scratch("field-bad");
    let cases: [(&[&str], &str); 4] = [
        (&["field", "replay", "nowhere"], "no field event log"),
        (&["field", "simulate", "--lambda=-1", "--out", "x"], "--lambda"),
        (&["field", "bench", "--vectors", "0"], "--vectors"),
        (&["field", "simulate", "--phases", "0"], "--phases"),
    ];
    for (args, needle) in cases {
        let o = sim(&dir, args);
        assert!(!o.status.success(), "{args:?} must fail");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    std::fs::write(dir.join("field.events"), b"SIMFIELD\x03\x00\x00\x00garbage").expect("write");
    let o = sim(&dir, &["field", "replay", "field.events"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("field.events") && stderr(&o).contains("frame 0"), "{}", stderr(&o));
    // A log of the self-feeding bonus (format 2) is refused by its version.
    std::fs::write(dir.join("field.events"), b"SIMFIELD\x02\x00\x00\x00garbage").expect("write");
    let o = sim(&dir, &["field", "stats", "field.events"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("version 2 is not supported (this engine reads version 3)"), "{}", stderr(&o));
}

/// The lock-in monitor sees lock-in: one topic answered 20 at a time locks
/// the same patterns in over 200 phases, and the defaults (24 phases, and
/// 200) do not; the top-N share and Gini are reported either way.
#[test]
fn the_lock_in_monitor_fires_on_a_locked_in_field_and_not_at_the_defaults() {
    let dir = scratch("field-lock-in");
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec!["field", "simulate", "--json", "--out", out];
        args.extend(extra);
        json(&sim(&dir, &args))["lock_in"].clone()
    };
    let locked = run("locked", &["--topics", "1", "--k", "20", "--phases", "200"]);
    assert!(locked["alarm_phases"].as_u64().is_some_and(|n| n > 100), "{locked}");
    assert_eq!(locked["first_alarm_phase"].as_u64(), Some(12), "the first phase with a full 12-phase window");
    assert!(locked["top_share"].as_f64().is_some_and(|s| s > 0.9), "{locked}");
    for (out, extra) in [("defaults", vec![]), ("long", vec!["--phases", "200"])] {
        let l = run(out, &extra);
        assert_eq!(l["alarm_phases"].as_u64(), Some(0), "{out}: {l}");
        assert!(l["first_alarm_phase"].is_null());
        let (share, gini) = (l["top_share"].as_f64().expect("share"), l["gini"].as_f64().expect("gini"));
        assert!(share > 0.0 && share < 0.9 && gini > 0.0 && gini < 1.0, "{out}: {l}");
    }
    // Q6's resonance with the query is counted, never used to filter.
    let all = json(&sim(&dir, &["field", "simulate", "--json", "--out", "q6"]));
    let q = &all["query_resonance"];
    let (hits, resonant) = (q["hits"].as_u64().expect("hits"), q["resonant_hits"].as_u64().expect("resonant"));
    assert!(resonant > 0 && resonant < hits, "{q}");
    assert!(q["queries_with_resonant"].as_u64() <= q["queries"].as_u64() && q["queries"].as_u64() > Some(0), "{q}");
    let refused = sim(&dir, &["field", "simulate", "--lock-in-alarm", "1.5", "--out", "x"]);
    assert!(!refused.status.success() && stderr(&refused).contains("--lock-in-alarm 1.5"), "{}", stderr(&refused));
}
