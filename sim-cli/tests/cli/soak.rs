use crate::support::{scratch, sim, stderr};

/// The short soak, as CI runs it: every campaign passes, and each did the
/// work it claims (a campaign whose kills all missed cannot pass).
#[test]
fn the_short_soak_passes_every_campaign() {
    let dir = scratch("soak");
    let out = sim(&dir, &["soak", "--json", "--scratch", "s"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert!(out.status.success(), "{}\n{:#}", stderr(&out), v["failures"]);
    assert_eq!(v["pass"], true);
    let d = &v["determinism"];
    assert_eq!((d["seeds"].as_u64(), d["runs"].as_u64(), d["divergences"].as_u64()), (Some(20), Some(40), Some(0)));
    assert!(d["generated_scenarios"].as_u64() > Some(0));
    let k = &v["kills"];
    assert_eq!(k["kills"], 10);
    assert!(k["mid_tick"].as_u64() > Some(0), "{k}");
    assert_eq!((k["lost_committed_ticks"].as_u64(), k["digest_mismatches"].as_u64()), (Some(0), Some(0)));
    let f = &v["faults"][0];
    assert_eq!((f["rate"].as_f64(), f["runs"].as_u64()), (Some(0.3), Some(4)));
    assert!(f["chat_attempts"].as_u64() > f["chat_calls"].as_u64(), "faults were retried: {f}");
    assert_eq!((f["conservation_errors"].as_u64(), f["missing_outcomes"].as_u64()), (Some(0), Some(0)));
    assert_eq!(f["budget_stops"], 1);
    let cases = v["disk"]["cases"].as_array().expect("disk cases");
    assert!(cases.len() >= 3 && cases.iter().all(|c| c["ok"] == true), "{cases:?}");
    let i = &v["inputs"];
    assert_eq!((i["mutated"].as_u64(), i["panics"].as_u64()), (Some(2000), Some(0)));
    assert!(i["errors"].as_u64() > Some(0) && i["ran"].as_u64() > Some(0), "{i}");
    let sh = &v["shards"];
    assert_eq!(
        (sh["seeds"].as_u64(), sh["kills"].as_u64(), sh["mismatches"].as_u64()),
        (Some(3), Some(3), Some(0)),
        "{sh}"
    );
    assert!(sh["shards"].as_u64() >= Some(3), "{sh}");
    assert!(!dir.join("s").exists(), "a passing soak deletes its scratch directory");
}

#[test]
fn check_determinism_runs_twice_and_says_ok() {
    let dir = scratch("check-determinism");
    let out = sim(&dir, &["check-determinism", "--keep", "k", "--personas", "6", "--ticks", "2", "--seed", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ok: 1 and ") && text.contains(" threads give digest "), "{text}");
    assert!(dir.join("k/threads-1/trace.bin").exists());
    let out = sim(&dir, &["check-determinism", "--personas", "6", "--out", "x"]);
    assert!(stderr(&out).contains("--out: check-determinism chooses where"), "{}", stderr(&out));
}
