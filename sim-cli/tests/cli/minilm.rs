//! The local MiniLM model end to end: a run, its replay, both strategies,
//! thread counts, and the embedding sanity check. Needs the model that
//! `bash scripts/fetch-minilm` fetches (the test command runs it first).

use crate::support::{digest_on_every_kernel_level, scratch, sim, stderr};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn config() -> String {
    root().join("fixtures/configs/minilm.toml").display().to_string()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json on stdout")
}

#[test]
fn a_minilm_run_replays_with_no_call_and_both_strategies_share_its_digest() {
    let dir = scratch("minilm-run");
    let cfg = config();
    let run = |out: &str| {
        json(&sim(&dir, &["run", "--config", &cfg, "--personas", "20", "--ticks", "3", "--out", out, "--json"]))
    };
    let batched = run("b");
    // The per-persona baselines live in the benchmark: every strategy, cold
    // and warm, gives the run's own digest, and batching sends fewer
    // requests upstream.
    let bench = json(&sim(
        &dir,
        &["bench", "embed", "--config", &cfg, "--personas", "20", "--ticks", "3", "--reps", "1", "--json"],
    ));
    let rows = bench["results"].as_array().expect("results");
    assert_eq!(rows.len(), 6, "three strategies, cold and warm");
    assert!(rows.iter().all(|r| r["digest"] == batched["digest"]), "{bench}");
    let upstream =
        |s: &str| rows.iter().find(|r| r["strategy"] == s && r["cache"] == "cold").map(|r| &r["upstream_requests"]);
    assert!(upstream("batched").and_then(|v| v.as_u64()) < upstream("per-persona").and_then(|v| v.as_u64()));
    assert_eq!(batched["cost"]["embedding_price_label"], "local");
    assert_eq!(batched["cost"]["embedding_nano_usd"], 0);
    let header = sim(&dir, &["inspect", "b", "--json"]);
    let header = String::from_utf8_lossy(&header.stdout);
    assert!(
        header.contains("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        "the trace header names the weights"
    );
    let replay = json(&sim(&dir, &["replay", "b", "--json"]));
    assert_eq!((replay["complete"].as_bool(), replay["ticks_matched"].as_u64()), (Some(true), Some(3)), "{replay}");
    assert!(replay["divergence"].is_null(), "{replay}");
    assert_eq!(replay["provider_calls"], 0, "{replay}");
}

/// The digest of `run --personas 5 --ticks 2` on the scripted chat model
/// with MiniLM's vectors (`fixtures/configs/minilm.toml`), pinned on an AMD
/// EPYC Zen 5 with AVX-512. MiniLM's arithmetic is the project's own, in
/// an order fixed by the shapes, so it holds on every CPU; a change of
/// kernel, tokenizer or pooling that moves it is seen here (and goes in the
/// CHANGELOG).
const GOLDEN_DIGEST: &str = "7c8330ef1934ac67223fc9a7f411910cdef6647f30a7113e9015f210acddc82e";

/// One run, one digest, on every kernel level this CPU runs (forced through
/// `[embedding.minilm] kernel`) at one and two threads, the level that ran
/// in the summary and `inspect`; and it is the golden digest.
#[test]
fn a_minilm_run_has_one_digest_on_every_kernel_level() {
    let dir = scratch("minilm-kernels");
    let mut value: toml::Value = toml::from_str(&std::fs::read_to_string(config()).expect("config")).expect("toml");
    let model = root().join("models/all-MiniLM-L6-v2");
    let minilm = value["embedding"]["minilm"].as_table_mut().expect("[embedding.minilm]");
    minilm.insert("model_dir".into(), model.display().to_string().into());
    let digests = digest_on_every_kernel_level(&dir, value, &["embedding", "minilm"], "minilm_kernel", "5", "2");
    for (level, digest) in &digests {
        assert_eq!(digest, GOLDEN_DIGEST, "{level}: the golden digest ({digests:?})");
    }
}

#[test]
fn vectors_do_not_depend_on_the_thread_count() {
    let dir = scratch("minilm-threads");
    let corpus = std::fs::read_to_string(root().join("fixtures/minilm/corpus.txt")).expect("corpus");
    let texts: Vec<&str> = corpus.lines().skip(1).collect();
    let cfg = config();
    let embed = |threads: &str| {
        let mut args = vec!["embed", "text", "--config", &cfg, "--threads", threads, "--json"];
        args.extend(texts.iter().copied());
        let out = crate::support::command()
            .args(&args)
            .current_dir(&dir)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
    };
    let one = embed("1");
    let two = embed("2");
    let v: serde_json::Value = serde_json::from_slice(&one).expect("json");
    assert_eq!((v["dim"].as_u64(), v["vectors"].as_array().map(Vec::len)), (Some(384), Some(texts.len())));
    assert!(one == two, "a vector changed with the thread count (tokio workers and rayon's threads)");
}

/// An OpenAI-compatible `/embeddings` server on loopback that answers every
/// text with the same vector: a deliberately broken embedder.
fn broken_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    reader.read_exact(&mut body).expect("body");
                    let req: serde_json::Value = serde_json::from_slice(&body).expect("json body");
                    let n = req["input"].as_array().map_or(0, Vec::len);
                    let data: Vec<serde_json::Value> = (0..n)
                        .map(|i| serde_json::json!({"object": "embedding", "index": i, "embedding": vec![0.5f32; 384]}))
                        .collect();
                    let reply = serde_json::json!({"object": "list", "data": data, "model": "broken", "usage": {"prompt_tokens": n, "total_tokens": n}}).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        reply.len()
                    );
                    if stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.as_bytes())).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn the_check_passes_minilm_reports_the_hash_embedder_as_lexical_and_fails_a_broken_provider() {
    let dir = scratch("minilm-check");
    let good = json(&sim(&dir, &["embed", "check", "--config", &config(), "--json"]));
    assert_eq!((good["passed"].as_bool(), good["similarity"].as_str()), (Some(true), Some("semantic")), "{good}");
    let lexical = json(&sim(&dir, &["embed", "check", "--json"]));
    assert_eq!(lexical["similarity"], "lexical");
    assert!(lexical["verdict"].as_str().is_some_and(|v| v.contains("lexical by design")));
    let broken = dir.join("broken.toml");
    let toml = format!(
        "[embedding]\nprovider = \"openai\"\nmodel = \"broken\"\ndim = 384\n[embedding.http]\nbase_url = \"{}\"\napi_key_env = \"\"\n",
        broken_server()
    );
    std::fs::write(&broken, toml).expect("write");
    let out = sim(&dir, &["embed", "check", "--config", broken.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("broken fails the check") && err.contains("He drove to the stadium."), "{err}");
    {
        // The experiment runs the check first, and refuses unless told to skip it.
        let broken = broken.to_str().expect("utf-8");
        let refused = sim(&dir, &["experiment", "--config", broken, "--topics", "1", "--reps", "1", "--out", "x"]);
        assert!(!refused.status.success() && stderr(&refused).contains("--skip-embed-check"), "{}", stderr(&refused));
        assert!(!dir.join("x").exists(), "a refused experiment writes nothing");
        let args = [
            "experiment",
            "--config",
            broken,
            "--topics",
            "1",
            "--reps",
            "1",
            "--out",
            "x",
            "--skip-embed-check",
            "--json",
        ];
        json(&sim(&dir, &args));
        let report = std::fs::read_to_string(dir.join("x/report.md")).expect("report");
        assert!(report.contains("Embedder check: skipped"), "{report}");
    }
}

#[test]
fn memory_commands_and_the_experiment_embed_through_minilm() {
    let dir = scratch("minilm-memory");
    let cfg = config();
    json(&sim(&dir, &["run", "--config", &cfg, "--personas", "10", "--ticks", "2", "--out", "r", "--json"]));
    json(&sim(&dir, &["memory", "test", "scenario", "cluster-formation", "r", "--json"]));
    let pass = json(&sim(&dir, &["memory", "consolidate", "--cluster", "--test-only", "r", "--json"]));
    let similarity = pass["changes"][0]["change"]["clustered"]["similarity"].as_f64().expect("a cluster link");
    // sentence-transformers gives this pair 0.92161 (fixtures/minilm/reference.json, texts 3 and 4).
    assert!((similarity - 0.92161).abs() < 1e-3, "{pass}");
    let ops = std::fs::read_to_string(dir.join("r/memory-ops.jsonl")).expect("ops");
    let op: serde_json::Value = serde_json::from_str(ops.lines().next().expect("a line")).expect("json");
    assert_eq!(op["vectors"][0].as_array().map(Vec::len), Some(384), "the scenario's vectors are recorded");

    {
        let out =
            json(&sim(&dir, &["experiment", "--config", &cfg, "--topics", "1", "--reps", "1", "--out", "x", "--json"]));
        assert!(out["summary"].is_object(), "{out}");
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("x/results.json")).expect("results")).expect("json");
        let e = &results["experiment"]["embedder"];
        assert_eq!(
            (e["model"].as_str(), e["dim"].as_u64(), e["check_passed"].as_bool()),
            (Some("all-MiniLM-L6-v2"), Some(384), Some(true))
        );
        let refused = sim(&dir, &["experiment", "--config", &cfg, "--dim", "64", "--out", "y"]);
        assert!(!refused.status.success() && stderr(&refused).contains("--dim 64"), "{}", stderr(&refused));
    }
}

#[test]
fn ssr_is_exact_across_threads_strategies_and_replay_and_compares_with_a_survey() {
    let dir = scratch("minilm-ssr");
    let cfg = root().join("fixtures/configs/minilm-ssr.toml").display().to_string();
    let run = |out: &str, threads: &str| {
        let args =
            ["run", "--config", &cfg, "--personas", "30", "--ticks", "2", "--threads", threads, "--out", out, "--json"];
        let o = crate::support::command()
            .args(args)
            .current_dir(&dir)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("runs");
        json(&o)
    };
    let one = run("t1", "1");
    let four = run("t4", "4");
    assert_eq!(one["digest"], four["digest"]);
    // The per-persona baselines (in the benchmark) rate by SSR to the bit as well.
    let bench = json(&sim(
        &dir,
        &["bench", "embed", "--config", &cfg, "--personas", "30", "--ticks", "2", "--reps", "1", "--json"],
    ));
    let rows = bench["results"].as_array().expect("results");
    assert!(rows.len() == 6 && rows.iter().all(|r| r["digest"] == one["digest"]), "{bench}");
    assert_eq!(one["intent_method"], "both");
    let stimuli = one["intent"].as_object().expect("intent");
    for (id, d) in stimuli {
        let ssr = &d["ssr"];
        let pmf: f64 = ssr["pmf"].as_array().expect("pmf").iter().map(|p| p.as_f64().expect("p")).sum();
        assert!((pmf - 1.0).abs() < 1e-9, "{id}: {ssr}");
        let (e, lo, hi) =
            (ssr["expected"].as_f64(), ssr["expected_ci95"][0].as_f64(), ssr["expected_ci95"][1].as_f64());
        assert!(lo <= e && e <= hi && e.is_some_and(|e| (1.0..=5.0).contains(&e)), "{id}: {ssr}");
        assert!(ssr["ks_similarity_to_direct"].as_f64().is_some_and(|k| (0.0..=1.0).contains(&k)), "{id}: {ssr}");
    }
    assert!(one["tokens"]["ssr_embedding"].as_u64() > Some(0), "SSR's texts are counted apart");
    let line = std::fs::read_to_string(dir.join("t1/outcomes.jsonl")).expect("outcomes");
    let first: serde_json::Value = serde_json::from_str(line.lines().next().expect("a line")).expect("json");
    assert!(first["ssr"]["expected"].is_number() && first["reaction"]["intent"].is_number(), "{first}");
    let replay = json(&sim(&dir, &["replay", "t4", "--json"]));
    assert_eq!((replay["provider_calls"].as_u64(), replay["ticks_matched"].as_u64()), (Some(0), Some(2)), "{replay}");
    let text = sim(&dir, &["run", "--config", &cfg, "--personas", "30", "--ticks", "2", "--out", "text"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("semantic similarity rating") && text.contains("KS sim") && text.contains("(direct)"),
        "{text}"
    );

    let stimulus = stimuli.keys().next().expect("a stimulus");
    std::fs::write(
        dir.join("ref.csv"),
        format!("stimulus,1,2,3,4,5\n{stimulus},10,20,30,25,15\nnever-shown,1,1,1,1,1\n"),
    )
    .expect("write");
    let c = json(&sim(&dir, &["compare-intent", "t1", "--reference", "ref.csv", "--json"]));
    assert_eq!(c["stimuli"][0]["stimulus"].as_str(), Some(stimulus.as_str()));
    assert!(c["stimuli"][0]["ssr_ks_similarity"].as_f64().is_some() && c["missing"][0] == "never-shown", "{c}");
    std::fs::write(dir.join("bad.csv"), format!("stimulus,1,2,3,4,5\n{stimulus},10,20,-3,25,15\n")).expect("write");
    let bad = sim(&dir, &["compare-intent", "t1", "--reference", "bad.csv"]);
    assert!(!bad.status.success() && stderr(&bad).contains("bad.csv: line 2: count of point 3"), "{}", stderr(&bad));

    let scored = json(&sim(
        &dir,
        &["intent", "score", "I am buying it today", "I would never buy this", "--config", &config(), "--json"],
    ));
    let expected: Vec<f64> =
        scored["results"].as_array().expect("results").iter().map(|r| r["expected"].as_f64().expect("e")).collect();
    assert!(expected[0] > expected[1] + 1.0, "{scored}");
    let unknown = sim(&dir, &["intent", "score", "x", "--anchors", "nope", "--config", &config()]);
    assert!(!unknown.status.success() && stderr(&unknown).contains("purchase-plain"), "{}", stderr(&unknown));
}
