use crate::support::{scratch, sim, stderr};

#[test]
fn status_and_inspect_on_a_real_run() {
    let dir = scratch("memory");
    assert!(sim(&dir, &["run", "--personas", "12", "--ticks", "4", "--out", "r"]).status.success());
    let out = sim(&dir, &["memory", "status", "--run", "r", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for k in ["working", "shortTerm", "longTerm", "archived", "expired"] {
        assert!(v["tiers"][k].is_u64() && v["real"][k].is_u64() && v["test"][k].is_u64(), "{k}");
    }
    assert_eq!(v["test"]["working"], 0);
    let live = ["working", "shortTerm", "longTerm"].iter().map(|k| v["tiers"][k].as_u64().unwrap_or(0)).sum::<u64>();
    assert!(live > 0);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r/summary.json")).expect("summary")).expect("json");
    assert!(summary["consolidation"]["promoted"].as_u64().unwrap_or(0) > 0);
    assert_eq!(v["tiers"]["archived"], summary["consolidation"]["promoted"], "every promotion archives the version it replaces");
    let one = sim(&dir, &["memory", "inspect", "m-00002-0000", "--run", "r", "--json"]);
    assert!(one.status.success(), "{}", stderr(&one));
    let m: serde_json::Value = serde_json::from_slice(&one.stdout).expect("json");
    assert_eq!(m["persona"], "p-00002");
    assert!(m["versions"].as_array().is_some_and(|v| !v.is_empty()));
    let test_only = sim(&dir, &["memory", "status", "--run", "r", "--json", "--test-only"]);
    let t: serde_json::Value = serde_json::from_slice(&test_only.stdout).expect("json");
    assert_eq!(t["tiers"]["working"], 0, "runs make no test memories");
}

#[test]
fn bad_memory_input_is_named() {
    let dir = scratch("memory-bad");
    assert!(sim(&dir, &["run", "--personas", "3", "--ticks", "1", "--out", "r"]).status.success());
    for (args, needle) in [
        (vec!["memory", "inspect", "m-00009-0000", "--run", "r"], "no such memory"),
        (vec!["memory", "inspect", "banana", "--run", "r"], "m-PPPPP-SSSS"),
        (vec!["memory", "status", "--run", "missing-dir"], "missing-dir"),
    ] {
        let out = sim(&dir, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}
