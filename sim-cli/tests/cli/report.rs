//! `sim-cli report`: the aggregates against a direct computation, the page
//! in a real headless Chromium, and bad input.

use crate::support::{chromium, scratch, sim, stderr};
use std::collections::BTreeMap;

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

#[test]
fn the_report_matches_a_direct_computation_and_renders_in_chromium() {
    let dir = scratch("report");
    ok(&sim(&dir, &["run", "--personas", "50", "--ticks", "3", "--out", "r", "--json"]));
    let out = sim(&dir, &["report", "r", "--by", "age,income,interests", "--json"]);
    ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report.json on stdout");
    assert_eq!(report["overview"]["status"], "finished");

    // Mean intent by age band, computed here from outcomes.jsonl and the persona profiles.
    let traits = engine::persona::profile::Traits::builtin();
    let mut sums: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let outcomes = std::fs::read_to_string(dir.join("r/outcomes.jsonl")).expect("outcomes");
    for line in outcomes.lines() {
        let o: serde_json::Value = serde_json::from_str(line).expect("json");
        let Some(intent) = o["reaction"]["intent"].as_u64() else { continue };
        if o["status"] != "ok" {
            continue;
        }
        let p = engine::persona::profile::generate(&traits, 42, o["persona"].as_u64().expect("persona") as u32);
        let band = traits.age_bands.iter().find(|b| (b.min..=b.max).contains(&p.age)).expect("a band");
        let key = (format!("{}-{}", band.min, band.max), o["stimulus"].as_str().expect("stimulus").to_string());
        let cell = sums.entry(key).or_default();
        cell.0 += intent;
        cell.1 += 1;
    }
    let age = report["segments"].as_array().expect("segments").iter().find(|t| t["by"] == "age").expect("by age");
    let values: Vec<&str> = age["values"].as_array().expect("values").iter().map(|v| v.as_str().expect("s")).collect();
    let mut checked = 0;
    for (stimulus, row) in age["cells"].as_object().expect("cells") {
        for (value, cell) in values.iter().zip(row.as_array().expect("row")) {
            let (sum, n) = sums.get(&(value.to_string(), stimulus.clone())).copied().unwrap_or_default();
            assert_eq!(cell["n"].as_u64(), Some(n), "{value} {stimulus}");
            if n > 0 {
                assert!((cell["mean_intent"].as_f64().expect("mean") - sum as f64 / n as f64).abs() < 1e-9);
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} cells");

    // The page in a real browser: no console error, every section, every chart drawn, not blank.
    let page = dir.join("r/report.html");
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(!html.contains("http://") && !html.contains("https://"), "the page loads nothing from the network");
    let url = format!("file://{}", page.display());
    let dom = chromium(&dir, &["--dump-dom", &url]);
    assert!(dom.status.success(), "{}", stderr(&dom));
    let log = stderr(&dom);
    assert!(!log.contains("Uncaught") && !log.contains(":CONSOLE"), "console messages: {log}");
    let dom = String::from_utf8_lossy(&dom.stdout);
    for section in ["overview", "intent", "segments", "reactions", "probes", "costs", "memory", "failures"] {
        assert!(dom.contains(&format!("<section id=\"{section}\"><h2>")), "no {section} section");
    }
    let charts: Vec<&str> = dom.split("<svg class=\"chart\"").skip(1).collect();
    assert!(charts.len() >= 3, "{} charts", charts.len());
    for chart in charts {
        let chart = &chart[..chart.find("</svg>").expect("closed")];
        assert!(chart.contains("<rect class=\"bar\""), "a chart without a bar");
    }
    let shot = dir.join("shot.png");
    let flag = format!("--screenshot={}", shot.display());
    ok(&chromium(&dir, &["--window-size=1200,1600", &flag, &url]));
    let png = std::fs::read(&shot).expect("screenshot");
    // A blank page compresses to a few kilobytes; this one has text, tables and bars.
    assert!(png.len() > 40_000, "the screenshot is {} bytes: blank?", png.len());
}

#[test]
fn bad_input_to_report_is_named() {
    let dir = scratch("report-bad");
    let not_a_run = sim(&dir, &["report", "."]);
    assert!(!not_a_run.status.success() && stderr(&not_a_run).contains("no trace here"), "{}", stderr(&not_a_run));
    ok(&sim(&dir, &["run", "--personas", "5", "--ticks", "2", "--out", "r", "--json"]));
    let unknown = sim(&dir, &["report", "r", "--by", "shoe-size"]);
    assert!(!unknown.status.success() && stderr(&unknown).contains("--by shoe-size"), "{}", stderr(&unknown));
    let trace = dir.join("r/trace.bin");
    let mut bytes = std::fs::read(&trace).expect("trace");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&trace, bytes).expect("damage");
    let damaged = sim(&dir, &["report", "r"]);
    let err = stderr(&damaged);
    assert!(!damaged.status.success() && err.contains("trace.bin") && err.contains("frame"), "{err}");
}

#[test]
fn export_gives_the_runs_outcomes_byte_for_byte_and_a_csv_with_traits() {
    let dir = scratch("export");
    ok(&sim(&dir, &["run", "--personas", "20", "--ticks", "2", "--out", "r", "--json"]));
    let jsonl = sim(&dir, &["export", "outcomes", "r"]);
    ok(&jsonl);
    let written = std::fs::read(dir.join("r/outcomes.jsonl")).expect("outcomes");
    assert!(jsonl.stdout == written, "export outcomes differs from outcomes.jsonl");
    ok(&sim(&dir, &["export", "outcomes", "r", "--format", "csv", "--tick", "2", "--out", "o.csv"]));
    let mut reader = csv::Reader::from_path(dir.join("o.csv")).expect("csv");
    let header = reader.headers().expect("header").clone();
    let col = |name: &str| header.iter().position(|h| h == name).expect("column");
    let rows: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().expect("parses");
    let tick2: Vec<serde_json::Value> = String::from_utf8_lossy(&written)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|o| o["tick"] == 2)
        .collect();
    assert_eq!(rows.len(), tick2.len());
    for (row, o) in rows.iter().zip(&tick2) {
        assert_eq!(row[col("reaction")], *o["reaction"]["text"].as_str().expect("text"));
        assert_eq!(row[col("intent")], o["reaction"]["intent"].to_string());
        assert!(!row[col("age_band")].is_empty() && !row[col("income")].is_empty());
    }
    let with = sim(&dir, &["export", "outcomes", "r", "--with-traits", "--tick", "1"]);
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&with.stdout).lines().next().expect("a line")).expect("json");
    assert!(first["traits"]["age"].is_number() && first["traits"]["interests"].is_array(), "{first}");
    // One persona's lines, in order.
    let one = sim(&dir, &["export", "outcomes", "r", "--persona", "p-00003"]);
    ok(&one);
    let all = String::from_utf8_lossy(&written);
    let mine: Vec<&str> = all.lines().filter(|l| l.contains("\"persona\":3,")).collect();
    assert!(mine.len() >= 2);
    assert_eq!(String::from_utf8_lossy(&one.stdout).lines().collect::<Vec<_>>(), mine);
    assert!(!sim(&dir, &["export", "outcomes", "r", "--persona", "p-00020"]).status.success());
    // A run that writes no outcomes.jsonl exports the same lines.
    let never = sim(&dir, &["run", "--personas", "20", "--ticks", "2", "--out", "n", "--outcomes", "never"]);
    ok(&never);
    assert!(!dir.join("n/outcomes.jsonl").exists());
    assert!(String::from_utf8_lossy(&never.stdout).contains("sim-cli export outcomes"));
    assert!(sim(&dir, &["export", "outcomes", "n"]).stdout == written);
}

#[test]
fn reactions_are_picked_by_vector_centroid_with_embeddings_else_by_intent() {
    let dir = scratch("report-picks");
    std::fs::write(dir.join("none.toml"), "[embedding]\nmodel = \"none\"\n").expect("write");
    for (out, extra) in [("b", vec![]), ("n", vec!["--config", "none.toml"])] {
        let mut args = vec!["run", "--personas", "30", "--ticks", "2", "--out", out, "--json"];
        args.extend(extra);
        ok(&sim(&dir, &args));
        let r = sim(&dir, &["report", out, "--json"]);
        ok(&r);
        let report: serde_json::Value = serde_json::from_slice(&r.stdout).expect("json");
        let method = report["reactions_method"].as_str().expect("method");
        assert_eq!(method.contains("centroid"), out != "n", "{out}: {method}");
        let picks = report["reactions"].as_array().expect("reactions");
        assert!(!picks.is_empty());
        for p in picks {
            let n = report["intent"]
                .as_array()
                .expect("intent")
                .iter()
                .find(|s| s["stimulus"] == p["stimulus"])
                .expect("s")["all"]["n"]
                .as_u64()
                .expect("n");
            let want = n.min(3) as usize;
            assert_eq!(p["typical"].as_array().map(Vec::len), Some(want), "{p}");
            assert_eq!(p["unusual"].as_array().map(Vec::len), Some(want), "{p}");
        }
    }
}

#[test]
fn the_reports_tier_counts_agree_with_memory_status() {
    let dir = scratch("report-tiers");
    std::fs::write(dir.join("auto.toml"), "[consolidation]\nenabled = true\n").expect("config");
    ok(&sim(&dir, &["run", "--config", "auto.toml", "--personas", "30", "--ticks", "4", "--out", "r", "--json"]));
    let r = sim(&dir, &["report", "r", "--json"]);
    ok(&r);
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).expect("json");
    let last = report["memory"].as_array().and_then(|m| m.last()).expect("ticks")["tiers"].clone();
    let s = sim(&dir, &["memory", "status", "r", "--json"]);
    ok(&s);
    let status: serde_json::Value = serde_json::from_slice(&s.stdout).expect("json");
    assert!(status["tiers"]["shortTerm"].as_u64() > Some(0), "the run promotes: {status}");
    for tier in ["working", "shortTerm", "longTerm", "expired"] {
        assert_eq!(last[tier].as_u64().unwrap_or(0), status["tiers"][tier].as_u64().expect("count"), "{tier}");
    }
}
