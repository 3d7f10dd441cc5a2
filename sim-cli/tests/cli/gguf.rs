//! A real language model offline, end to end: every local-model config
//! shipped in `fixtures/configs/` (SmolLM2-135M-Instruct, a Llama; and
//! Qwen2.5-Coder-0.5B-Instruct in `Q4_K_M`, a Qwen2) runs a tiny panel on
//! its model (every job ok, every reply within its schema, real
//! reactions) and replays with the model file gone; SmolLM2 gives the same
//! digest at one and two threads and batch one and eight; each model's
//! golden digest holds on every kernel level. Needs the models that `bash
//! scripts/fetch-model smollm2`, `bash scripts/fetch-model
//! qwen2.5-coder-0.5b` and `bash scripts/fetch-minilm` fetch (the test
//! command runs them first).

use crate::support::{digest_on_every_kernel_level, scratch, sim, stderr};
use engine::chat::schema::schema;
use engine::chat::ChatPurpose;
use engine::testing::schema_breach as breach;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json on stdout")
}

/// The shipped configs whose chat provider is `gguf`.
fn local_model_configs() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/configs"))
        .expect("fixtures/configs")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let value: toml::Value = toml::from_str(&text).unwrap_or(toml::Value::Integer(0));
            value.get("chat").and_then(|c| c.get("provider")).and_then(toml::Value::as_str) == Some("gguf")
        })
        .collect();
    found.sort();
    found
}

/// The shipped config `fixtures/configs/{name}.toml`.
fn shipped(name: &str) -> PathBuf {
    root().join(format!("fixtures/configs/{name}.toml"))
}

/// A copy of `config` in `dir` whose model file is a copy of the shipped
/// one in `dir` (so a test can take it away), with `batch` requests
/// sharing each forward pass; other relative paths are made absolute.
fn with_own_model(config: &Path, dir: &Path, batch: u64) -> (PathBuf, PathBuf) {
    let base = config.parent().expect("dir");
    let mut value: toml::Value = toml::from_str(&std::fs::read_to_string(config).expect("config")).expect("toml");
    let gguf = value["chat"]["gguf"].as_table_mut().expect("[chat.gguf]");
    let shipped = base.join(gguf["model_file"].as_str().expect("model_file"));
    let copy = dir.join("model.gguf");
    std::fs::copy(&shipped, &copy)
        .unwrap_or_else(|e| panic!("{}: {e} (run bash scripts/fetch-model NAME)", shipped.display()));
    gguf.insert("model_file".into(), copy.display().to_string().into());
    gguf.insert("batch".into(), toml::Value::Integer(batch as i64));
    if let Some(m) = value.get_mut("embedding").and_then(|e| e.get_mut("minilm")).and_then(|m| m.as_table_mut()) {
        let d = base.join(m["model_dir"].as_str().expect("model_dir"));
        m.insert("model_dir".into(), d.display().to_string().into());
    }
    let path = dir.join("config.toml");
    std::fs::write(&path, toml::to_string(&value).expect("toml")).expect("write");
    (path, copy)
}

fn purpose(name: &str) -> ChatPurpose {
    match name {
        "Reaction" => ChatPurpose::Reaction,
        "Reflection" => ChatPurpose::Reflection,
        "Probe" => ChatPurpose::Probe,
        other => panic!("a persona panel made a {other} call"),
    }
}

fn outcomes(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(runs::RunDir::at(dir).outcomes()).expect("outcomes.jsonl");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn reactions(outcomes: &[Value]) -> Vec<(u64, u64, String)> {
    outcomes
        .iter()
        .filter_map(|o| {
            let text = o["reaction"]["text"].as_str()?;
            Some((o["tick"].as_u64()?, o["persona"].as_u64()?, text.to_string()))
        })
        .collect()
}

#[test]
fn every_shipped_local_model_config_runs_a_tiny_panel_on_the_real_model() {
    let configs = local_model_configs();
    assert!(!configs.is_empty(), "fixtures/configs ships a gguf config");
    let dir = scratch("gguf-panel");
    let scripted = json(&sim(&dir, &["run", "--personas", "5", "--ticks", "3", "--out", "scripted", "--json"]));
    assert_eq!(scripted["jobs"]["ok"], 15);
    let scripted: BTreeSet<String> = reactions(&outcomes(&dir.join("scripted"))).into_iter().map(|r| r.2).collect();
    for (n, config) in configs.iter().enumerate() {
        let own = dir.join(format!("c{n}"));
        std::fs::create_dir_all(&own).expect("dir");
        let (cfg, model) = with_own_model(config, &own, 1);
        let out = format!("c{n}/run");
        let args = ["run", "--config", cfg.to_str().expect("utf-8"), "--personas", "5", "--ticks", "3"];
        let summary = json(&sim(&dir, &[&args[..], &["--out", &out, "--json"]].concat()));
        let name = config.display();
        assert_eq!((summary["jobs"]["total"].as_u64(), summary["jobs"]["ok"].as_u64()), (Some(15), Some(15)), "{name}");
        assert_eq!(summary["cost"]["chat_price_label"], "local", "{name}");
        let all = outcomes(&dir.join(&out));
        let mut calls = 0;
        for call in all.iter().flat_map(|o| o["chat_calls"].as_array().into_iter().flatten()) {
            let reply: Value = serde_json::from_str(call["reply"].as_str().expect("reply")).unwrap_or_else(|e| {
                panic!("{name}: a reply that is not JSON ({e}): {}", call["reply"]);
            });
            let schema = schema(purpose(call["purpose"].as_str().expect("purpose")));
            assert_eq!(breach(&reply, &schema, "reply"), None, "{name}: {reply}");
            calls += 1;
        }
        assert!(calls >= 20, "{name}: every reaction and probe made a call ({calls})");
        let reacted = reactions(&all);
        assert_eq!(reacted.len(), 15, "{name}");
        assert!(reacted.iter().all(|r| r.2.chars().count() >= 10), "{name}: {reacted:?}");
        let first: BTreeSet<&str> = reacted.iter().filter(|r| r.0 == 1).map(|r| r.2.as_str()).collect();
        assert!(first.len() >= 4, "{name}: at least 4 of 5 personas react differently: {first:?}");
        assert!(reacted.iter().all(|r| !scripted.contains(&r.2)), "{name}: a reply is the scripted model's");
        let probes = summary["probes"].to_string();
        assert!(probes.contains("recommend"), "{name}: the probe ran: {probes}");

        // Replay needs no model: the file is gone.
        std::fs::remove_file(&model).expect("remove the model");
        let replay = json(&sim(&dir, &["replay", &out, "--json"]));
        assert_eq!((replay["complete"].as_bool(), replay["ticks_matched"].as_u64()), (Some(true), Some(3)), "{replay}");
        assert_eq!(replay["digest"], summary["digest"], "{name}");
    }
}

/// One digest whether each request runs alone (batch 1, one thread) or
/// three personas' requests share their forward passes (batch 8, two
/// threads); and the retired `workers` key is refused naming `batch`.
#[test]
fn a_local_model_panel_has_the_same_digest_at_batch_one_and_eight_and_one_and_two_threads() {
    let dir = scratch("gguf-threads");
    let config = &shipped("smollm2");
    let (cfg, _) = with_own_model(config, &dir, 1);
    std::fs::create_dir_all(dir.join("b8")).expect("dir");
    let (batched, _) = with_own_model(config, &dir.join("b8"), 8);
    let run = |cfg: &Path, threads: &str| {
        let out = format!("t{threads}");
        let cfg = cfg.to_str().expect("utf-8");
        let args = ["run", "--config", cfg, "--personas", "3", "--ticks", "1", "--threads", threads, "--out", &out];
        json(&sim(&dir, &[&args[..], &["--json"]].concat()))
    };
    let one = run(&cfg, "1");
    let two = run(&batched, "2");
    assert_eq!(one["jobs"]["ok"], 3);
    // `full_digest` covers the whole config, `batch` included; the content
    // digest and every recorded reply do not move.
    assert_eq!(one["digest"].as_str(), two["digest"].as_str());
    let replies = |out: &str| -> Vec<String> {
        let all = outcomes(&dir.join(out));
        all.iter()
            .flat_map(|o| o["chat_calls"].as_array().cloned().unwrap_or_default())
            .map(|c| c["reply"].to_string())
            .collect()
    };
    assert_eq!(replies("t1"), replies("t2"));
    assert!(replies("t1").len() >= 3);
    let cfg = cfg.to_str().expect("utf-8");
    let old = dir.join("old.toml");
    let text = std::fs::read_to_string(cfg).expect("config").replace("batch = 1", "workers = 2");
    std::fs::write(&old, text).expect("write");
    let out = sim(&dir, &["run", "--config", old.to_str().expect("utf-8"), "--personas", "1", "--out", "old"]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("old.toml") && err.contains("batch = 2"), "{err}");
    let corrupt = dir.join("model.gguf");
    std::fs::write(&corrupt, b"GGUF but nothing else").expect("write");
    let out = sim(&dir, &["run", "--config", cfg, "--personas", "1", "--ticks", "1", "--out", "bad"]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("model.gguf") && err.contains("fetch-model smollm2"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The digest of a 2-persona, 1-tick run of the shipped SmolLM2 config on
/// the hashed embedder, seed 42: the local model's arithmetic, pinned. A
/// change of kernel, decoding or sampling that moves it is seen here (and
/// goes in the CHANGELOG).
const GOLDEN_DIGEST: &str = "93862ec827e6127c60a550e0b9c87f2a0adb2cebe0fdb43c032874f05c8693d8";

/// The same for the shipped Qwen2.5-Coder-0.5B config, 1 persona x 1 tick:
/// a second architecture (biases, NeoX RoPE) and the K-quants, pinned.
const QWEN_GOLDEN_DIGEST: &str = "ffe862d3ef325e838ea03860495a39961fe7e036b7a1329cc0a1752888a40873";

/// The shipped config `name` on the hashed embedder (the digest pins the
/// chat model's arithmetic alone), its model file made absolute, run on
/// every kernel level (forced through `[chat.gguf] kernel`), with the
/// environment variables candle's kernels read set or not, at one and two
/// threads: each level's digest.
fn digests_of(name: &str, personas: &str) -> Vec<(String, String)> {
    let dir = scratch(&format!("gguf-kernels-{name}"));
    let config = shipped(name);
    let base = config.parent().expect("dir");
    let mut value: toml::Value = toml::from_str(&std::fs::read_to_string(&config).expect("config")).expect("toml");
    let gguf = value["chat"]["gguf"].as_table_mut().expect("[chat.gguf]");
    let model = base.join(gguf["model_file"].as_str().expect("model_file"));
    gguf.insert("model_file".into(), model.display().to_string().into());
    value.as_table_mut().expect("table").remove("embedding");
    digest_on_every_kernel_level(&dir, value, &["chat", "gguf"], "gguf_kernel", personas, "1")
}

/// SmolLM2's run has one digest on every kernel level, and it is the
/// golden digest.
#[test]
fn a_local_model_run_has_one_digest_on_every_kernel_level() {
    let digests = digests_of("smollm2", "2");
    for (level, digest) in &digests {
        assert_eq!(digest, GOLDEN_DIGEST, "{level}: the golden digest ({digests:?})");
    }
}

/// Qwen2.5-Coder-0.5B's run has one digest on every kernel level, and it
/// is its golden digest.
#[test]
fn a_qwen2_run_has_one_digest_on_every_kernel_level() {
    let digests = digests_of("qwen2.5-coder-0.5b", "1");
    for (level, digest) in &digests {
        assert_eq!(digest, QWEN_GOLDEN_DIGEST, "{level}: the golden digest ({digests:?})");
    }
}

/// `bench chat --config` on the local model: one sequence a pass without
/// and with the prefix cache, then a batch of eight where the panel's
/// requests share passes (measured), all three with one digest; the
/// tokens of full passes counted apart.
#[test]
fn bench_chat_measures_one_sequence_and_a_batch_with_one_digest() {
    let dir = scratch("gguf-bench");
    let (cfg, _) = with_own_model(&shipped("smollm2"), &dir, 2);
    let cfg = cfg.to_str().expect("utf-8");
    let args = ["bench", "chat", "--config", cfg, "--personas", "2", "--ticks", "1", "--json"];
    let report = json(&sim(&dir, &args));
    let rows = report["results"].as_array().expect("results");
    assert_eq!(rows.len(), 3, "{report}");
    assert_eq!(report["same_digest"], true, "{report}");
    let field = |i: usize, name: &str| rows[i][name].as_f64().unwrap_or_else(|| panic!("{name} in {}", rows[i]));
    for i in 0..3 {
        assert!(field(i, "prompt_tokens_per_second") > 0.0 && field(i, "generated_tokens_per_second") > 0.0);
    }
    assert_eq!((field(0, "sequences"), field(1, "sequences")), (1.0, 1.0), "one sequence a pass");
    assert_eq!((rows[2]["batch"].as_u64(), field(2, "prefix_cache_mib")), (Some(8), 512.0), "at least 8");
    assert!(field(2, "sequences") > 1.0, "the panel's requests shared passes: {}", rows[2]);
    // A batch of one is always full; two personas never fill eight.
    let full = |i: usize| rows[i]["full_batch_generated_tokens"].as_u64().expect("full_batch_generated_tokens");
    let generated = |i: usize| rows[i]["generated_tokens"].as_u64().expect("generated_tokens");
    assert_eq!((full(0), full(1), full(2)), (generated(0), generated(1), 0), "{report}");
    assert!(field(2, "full_batch_generated_tokens_per_second") <= 0.0, "no full pass, no rate");
}

/// `bench gguf --depth`: every test starts from sequences that hold the
/// depth's tokens, named as llama-bench names them, with finite positive
/// rates; a depth the model's context cannot hold is refused by name.
#[test]
fn bench_gguf_measures_the_forward_pass_at_a_depth() {
    let dir = scratch("gguf-bench-depth");
    let (cfg, _) = with_own_model(&shipped("smollm2"), &dir, 1);
    let cfg = cfg.to_str().expect("utf-8");
    let args = ["bench", "gguf", "--config", cfg, "--prompt", "8", "--generate", "2", "--depth", "20"];
    let report = json(&sim(&dir, &[&args[..], &["--batch", "2", "--reps", "1", "--threads", "2", "--json"]].concat()));
    assert_eq!(report["depth"], 20, "{report}");
    let names: Vec<&str> =
        report["tests"].as_array().expect("tests").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["pp8 @ d20", "tg2 @ d20", "tg2 x2 @ d20"], "{report}");
    for t in report["tests"].as_array().expect("tests") {
        let rate = t["tokens_per_second"].as_f64().expect("tokens_per_second");
        assert!(rate.is_finite() && rate > 0.0, "{t}");
    }
    let out = sim(&dir, &["bench", "gguf", "--config", cfg, "--depth", "9000", "--reps", "1"]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("--depth 9000") && err.contains("context of 8192"), "{err}");
}
