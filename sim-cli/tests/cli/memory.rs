use crate::support::{scratch, sim, stderr};

/// A run directory made with the automatic pass on (`[consolidation]
/// enabled = true`), for the commands that report on it.
fn consolidating_run(dir: &std::path::Path, personas: &str, ticks: &str) {
    std::fs::write(dir.join("auto.toml"), "[consolidation]\nenabled = true\n").expect("config");
    let args = ["run", "--config", "auto.toml", "--personas", personas, "--ticks", ticks, "--out", "r"];
    assert!(sim(dir, &args).status.success());
}

/// The plan's order, "Manual Before Automatic": a default run promotes
/// nothing; a manual pass (`memory consolidate`) does, and every promotion
/// archives the version it replaces.
#[test]
fn status_and_inspect_on_a_real_run() {
    let dir = scratch("memory");
    assert!(sim(&dir, &["run", "--personas", "12", "--ticks", "4", "--out", "r"]).status.success());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r/summary.json")).expect("summary")).expect("json");
    assert_eq!(summary["consolidation"]["promoted"], 0, "no automatic pass by default");
    let before = json(&sim(&dir, &["memory", "status", "r", "--json"]));
    assert_eq!((before["tiers"]["shortTerm"].as_u64(), before["tiers"]["archived"].as_u64()), (Some(0), Some(0)));
    let pass = json(&sim(&dir, &["memory", "consolidate", "--hours", "0", "r", "--json"]));
    let promotions: Vec<&serde_json::Value> =
        pass["changes"].as_array().expect("changes").iter().filter(|c| c["change"]["promoted"].is_object()).collect();
    let promoted = promotions.len() as u64;
    assert!(promoted > 0, "retrieved memories gained energy during the run: {pass}");
    // The plan's promotion creates a new node linked to the old one: the
    // memory's id shows the lineage, the node's id the same.
    let first = &promotions[0];
    let (memory, node) = (first["change"]["promoted"]["record"].as_str().expect("id"), first["node"].as_str());
    assert_eq!(node, Some(format!("{memory}.shortTerm").as_str()));
    for id in [memory, node.expect("node")] {
        let lineage = json(&sim(&dir, &["memory", "inspect", id, "r", "--json"]));
        let nodes: Vec<&str> =
            lineage["versions"].as_array().expect("versions").iter().filter_map(|v| v["record"].as_str()).collect();
        assert_eq!((nodes.first().copied(), nodes.last().copied()), (Some(memory), node), "{lineage}");
        assert_eq!(lineage["current"].as_str(), node);
        assert_eq!(
            (lineage["promoted_to"][0]["from"].as_str(), lineage["promoted_to"][0]["to"].as_str()),
            (Some(memory), node)
        );
    }
    let v = json(&sim(&dir, &["memory", "status", "r", "--json"]));
    for k in ["working", "shortTerm", "longTerm", "archived", "expired"] {
        assert!(v["tiers"][k].is_u64() && v["real"][k].is_u64() && v["test"][k].is_u64(), "{k}");
    }
    assert_eq!(v["test"]["working"], 0);
    let live = ["working", "shortTerm", "longTerm"].iter().map(|k| v["tiers"][k].as_u64().unwrap_or(0)).sum::<u64>();
    assert!(live > 0);
    assert_eq!(v["tiers"]["archived"].as_u64(), Some(promoted), "every promotion archives the version it replaces");
    let one = sim(&dir, &["memory", "inspect", "m-00002-0000", "--run", "r", "--json"]);
    assert!(one.status.success(), "{}", stderr(&one));
    let m: serde_json::Value = serde_json::from_slice(&one.stdout).expect("json");
    assert_eq!(m["owner"], "p-00002");
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
        (vec!["memory", "inspect", "banana", "--run", "r"], "banana"),
        (vec!["memory", "status", "--run", "missing-dir"], "missing-dir"),
    ] {
        let out = sim(&dir, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn test_memories_persist_and_never_touch_real_ones() {
    let dir = scratch("memory-test");
    assert!(sim(&dir, &["run", "--personas", "8", "--ticks", "3", "--out", "r"]).status.success());
    let real_before = json(&sim(&dir, &["memory", "status", "--run", "r", "--json"]))["real"].clone();
    assert!(sim(&dir, &["memory", "test", "create", "remember the mug", "--energy", "1.5", "--run", "r"])
        .status
        .success());
    assert!(sim(&dir, &["memory", "test", "boost", "t-0001", "--amount", "1", "--run", "r"]).status.success());
    assert!(sim(&dir, &["memory", "test", "scenario", "gradual-decay", "--run", "r"]).status.success());
    let listed = json(&sim(&dir, &["memory", "test", "list", "--run", "r", "--json"]));
    assert_eq!(listed["test_memories"].as_array().map(Vec::len), Some(6), "survives a reload");
    assert_eq!(listed["test_memories"][0]["energy"], 2.5);

    // A dry run writes nothing at all.
    let files = |d: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .expect("dir")
            .map(|e| e.expect("entry").path())
            .map(|p| (p.display().to_string(), std::fs::read(&p).expect("read")))
            .collect();
        v.sort();
        v
    };
    let before = files(&dir.join("r"));
    let dry = json(&sim(&dir, &["memory", "consolidate", "--dry-run", "--hours", "100", "--run", "r", "--json"]));
    assert!(!dry["changes"].as_array().is_some_and(Vec::is_empty));
    assert!(before == files(&dir.join("r")), "a dry run changed a file");

    // A test-only pass over a long time expires test memories and no real one.
    assert!(sim(&dir, &["memory", "consolidate", "--test-only", "--hours", "100", "--run", "r"]).status.success());
    let after = json(&sim(&dir, &["memory", "status", "--run", "r", "--json"]));
    assert_eq!(after["real"], real_before, "--test-only never changes a real memory");
    assert_eq!(after["test"]["expired"], 6);

    assert!(sim(&dir, &["memory", "test", "delete", "t-0001", "--run", "r"]).status.success());
    let gone = json(&sim(&dir, &["memory", "inspect", "t-0001", "--run", "r", "--json"]));
    let versions = gone["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "deleting closes the version; nothing is destroyed");
    assert!(versions.iter().all(|v| !v["validTo"].is_null()));
}

#[test]
fn monitoring_commands_answer_in_json() {
    let dir = scratch("memory-monitor");
    consolidating_run(&dir, "10", "4");
    // The plan: `--memory-energy` returns the energy histogram and the
    // average energy; the records are listed with id, tier, energy and
    // last access.
    let e = json(&sim(&dir, &["memory", "energy", "--tier", "working", "--run", "r", "--json"]));
    let listed = e["records"].as_array().expect("records");
    assert!(!listed.is_empty() && listed.iter().all(|r| r["tier"] == "working" && r["last_accessed_hour"].is_u64()));
    let bucketed: u64 = e["histogram"].as_array().expect("histogram").iter().filter_map(|b| b["count"].as_u64()).sum();
    assert_eq!((e["count"].as_u64(), bucketed), (Some(listed.len() as u64), listed.len() as u64));
    let mean = listed.iter().filter_map(|r| r["energy"].as_f64()).sum::<f64>() / listed.len() as f64;
    assert!((e["average"].as_f64().expect("average") - mean).abs() < 1e-9);
    let p = json(&sim(&dir, &["memory", "promotions", "--last-ticks", "2", "--run", "r", "--json"]));
    assert!(p["promoted"].as_u64().is_some_and(|n| n > 0));
    // The plan's `--memory-promotions [--last-hours=24]`: the default window
    // is the last 24 simulated hours before the run's end (4 ticks of an
    // hour each: all of them); one hour holds only the last tick's.
    let all = json(&sim(&dir, &["memory", "promotions", "--run", "r", "--json"]));
    assert_eq!(
        (all["hours"][0].as_u64(), all["hours"][1].as_u64(), all["from_tick"].as_u64()),
        (Some(0), Some(4), Some(1))
    );
    let hour = json(&sim(&dir, &["memory", "promotions", "--last-hours", "1", "--run", "r", "--json"]));
    assert_eq!(hour["from_tick"].as_u64(), Some(3), "hours 3 to 4: the commits of ticks 3 and 4");
    let events = |v: &serde_json::Value| v["events"].as_array().map_or(0, Vec::len);
    assert!(events(&hour) <= events(&all) && events(&all) > 0);
    assert!(hour["events"].as_array().expect("events").iter().all(|e| e["tick"].as_u64().is_some_and(|t| t >= 3)));
    let h = json(&sim(&dir, &["memory", "health", "--run", "r", "--json"]));
    assert_eq!(h["config"]["rules"]["working_to_short"], 2.0);
    // The plan's decay prediction: energy * exp(-hoursSinceAccess *
    // decayConstant), 'will expire' below 0.1, hours whole, at the run's end
    // (hour 4) plus --hours-ahead; default rates per hour: working 0.5,
    // short-term 0.05, long-term 0.005.
    let check = |ahead: u64| {
        let pr = json(&sim(&dir, &["memory", "predict", "--hours-ahead", &ahead.to_string(), "--run", "r", "--json"]));
        assert_eq!(pr["at_hour"].as_u64(), Some(4 + ahead));
        let records = pr["records"].as_array().expect("records").clone();
        let mut expiring = 0;
        for r in &records {
            let rate = match r["tier"].as_str() {
                Some("working") => 0.5,
                Some("shortTerm") => 0.05,
                Some("longTerm") => 0.005,
                other => panic!("not a live tier: {other:?}"),
            };
            let since = r["hours_since_access"].as_u64().expect("whole hours");
            assert!(since >= ahead && since <= 4 + ahead, "{r}");
            let predicted = r["energy"].as_f64().expect("energy") * (-rate * since as f64).exp();
            assert!((r["predicted"].as_f64().expect("predicted") - predicted).abs() < 1e-9, "{r}");
            let expires = predicted < 0.1;
            assert_eq!(r["prediction"], if expires { "will expire" } else { "will survive" }, "{r}");
            expiring += usize::from(expires);
        }
        assert_eq!(pr["will_expire"].as_u64(), Some(expiring as u64));
        assert_eq!(pr["will_survive"].as_u64(), Some((records.len() - expiring) as u64));
        (expiring, records.len())
    };
    let (now, n) = check(0);
    let (later, _) = check(6);
    assert!(later > now && later < n, "6 hours more expire more memories, not all: {now} then {later} of {n}");
    for (args, needle) in [
        (vec!["memory", "energy", "--tier", "attic", "--run", "r"], "attic"),
        (vec!["memory", "test", "boost", "t-9999", "--run", "r"], "t-9999"),
        (vec!["memory", "test", "create", "x", "--energy", "-2", "--run", "r"], "--energy"),
        (vec!["memory", "test", "scenario", "nope", "--run", "r"], "nope"),
    ] {
        let out = sim(&dir, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

/// The plan's operator controls: force-promote, reset-energy, a one-tier
/// promotion pass, readiness, and the richer status, promotions and
/// health; every state change has a dry run that writes nothing.
#[test]
fn operator_controls_change_one_memory_and_report_the_rest() {
    let dir = scratch("memory-controls");
    assert!(sim(&dir, &["run", "--personas", "6", "--ticks", "3", "--out", "r"]).status.success());
    let ops = dir.join("r/memory-ops.jsonl");
    // Dry runs of every state-changing command write nothing.
    for args in [
        vec!["memory", "force-promote", "m-00001-0000", "r", "--dry-run"],
        vec!["memory", "reset-energy", "m-00001-0000", "--energy", "4", "r", "--dry-run"],
        vec!["memory", "test", "create", "x", "r", "--dry-run"],
        vec!["memory", "test", "scenario", "high-access", "r", "--dry-run"],
    ] {
        assert!(sim(&dir, &args).status.success(), "{args:?}");
        assert!(!ops.exists(), "{args:?} wrote the operation log");
    }
    let before = json(&sim(&dir, &["memory", "inspect", "m-00001-0000", "r", "--json"]));
    let tier = before["versions"].as_array().and_then(|v| v.last()).map(|v| v["tier"].clone()).expect("a version");
    let forced = json(&sim(&dir, &["memory", "force-promote", "m-00001-0000", "r", "--json"]));
    assert_eq!(forced["changes"][0]["change"]["promoted"]["record"], "m-00001-0000");
    let after = json(&sim(&dir, &["memory", "inspect", "m-00001-0000", "r", "--json"]));
    let versions = after["versions"].as_array().expect("versions");
    let closed = &versions[versions.len() - 2];
    assert_eq!((closed["tier"].clone(), closed["fromTier"].clone()), ("archived".into(), tier), "archived + its tier");
    assert!(json(&sim(&dir, &["memory", "reset-energy", "m-00001-0000", "--energy", "4.5", "r", "--json"]))["changes"]
        .is_array());
    let reset = json(&sim(&dir, &["memory", "inspect", "m-00001-0000", "r", "--json"]));
    assert_eq!(reset["versions"].as_array().and_then(|v| v.last()).map(|v| v["energy"].clone()), Some(4.5.into()));
    assert!(!sim(&dir, &["memory", "force-promote", "m-00001-0000", "r", "--test-only"]).status.success());

    // One tier only.
    let pass =
        json(&sim(&dir, &["memory", "consolidate", "--promote", "--tier", "shortTerm", "r", "--dry-run", "--json"]));
    assert!(pass["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .all(|c| c["change"]["promoted"]["tier"] != "shortTerm"));

    let ready = json(&sim(&dir, &["memory", "ready", "r", "--json"]));
    assert_eq!(ready["working"]["threshold"], 2.0);
    assert!(ready["working"]["not_ready"].as_u64().is_some_and(|n| n > 0));
    let status = json(&sim(&dir, &["memory", "status", "r", "--json"]));
    assert!(status["tier_stats"]["working"]["count"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(status["test_ratio"], 0.0);
    let promotions = json(&sim(&dir, &["memory", "promotions", "r", "--json"]));
    assert!(promotions["success_rate"].as_f64().is_some_and(|r| r > 0.0 && r <= 1.0));

    // A damaged log line is skipped, counted and named, never fatal.
    let mut log = std::fs::read_to_string(&ops).expect("log");
    log.push_str("{\"op\": \"teleport\"}\n");
    std::fs::write(&ops, log).expect("write");
    let health = sim(&dir, &["memory", "health", "r", "--json"]);
    assert!(stderr(&health).contains("line 3"), "{}", stderr(&health));
    let health = json(&health);
    assert_eq!(health["errors"]["ops_log_lines_rejected"], 1);
    assert_eq!(health["errors"]["consolidation_errors"], 0);
}

/// The plan's high-access scenario, consolidated by a full pass (no step
/// flags) at the scenario's own "now": record i decays from its last access
/// 10 i minutes ago, not from its creation i hours ago, so over 0 whole
/// hours, as the plan counts them; 3, 4 and 5 are above 2.0 and promote.
#[test]
fn a_full_pass_promotes_the_high_access_scenario() {
    let dir = scratch("memory-high-access");
    // Six one-hour ticks: the scenario's records were created 1 to 5 hours
    // before its "now", none before the run began.
    assert!(sim(&dir, &["run", "--personas", "3", "--ticks", "6", "--out", "r"]).status.success());
    assert!(sim(&dir, &["memory", "test", "scenario", "high-access", "r"]).status.success());
    let pass = json(&sim(&dir, &["memory", "consolidate", "--hours", "0", "r", "--json"]));
    for step in ["decay", "promote", "cluster", "clean_expired"] {
        assert_eq!(pass["op"][step], true, "a full pass runs {step}");
    }
    let test: Vec<&serde_json::Value> =
        pass["changes"].as_array().expect("changes").iter().filter(|c| c["owner"] == "test").collect();
    let promoted: Vec<(&str, &str)> = test
        .iter()
        .filter_map(|c| Some((c["change"]["promoted"]["record"].as_str()?, c["change"]["promoted"]["tier"].as_str()?)))
        .collect();
    assert_eq!(
        promoted,
        [("test-high-access-5", "shortTerm"), ("test-high-access-4", "shortTerm"), ("test-high-access-3", "shortTerm")],
        "{pass}"
    );
    assert_eq!(test.len(), 3, "nothing else happens to the scenario: {pass}");
    for c in test {
        let p = &c["change"]["promoted"];
        let i: f64 = p["record"].as_str().and_then(|r| r.strip_prefix("test-high-access-")?.parse().ok()).expect("i");
        let expected = i; // 10 i minutes: no whole hour to decay
        assert!((p["energy"].as_f64().expect("energy") - expected).abs() < 1e-9, "{c}");
    }
    let listed = json(&sim(&dir, &["memory", "test", "list", "r", "--json"]));
    let tiers: Vec<&str> =
        listed["test_memories"].as_array().expect("list").iter().filter_map(|m| m["tier"].as_str()).collect();
    assert_eq!(tiers, ["working", "working", "shortTerm", "shortTerm", "shortTerm"], "survives a reload");
}
