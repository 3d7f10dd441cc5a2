//! The local MiniLM model end to end: a run, its replay, both strategies,
//! thread counts, and the embedding sanity check. Needs the model that
//! `bash scripts/fetch-minilm` fetches (the test command runs it first).

use crate::support::{scratch, sim, stderr};
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
    let run = |strategy: &str, out: &str| {
        json(&sim(
            &dir,
            &[
                "run",
                "--config",
                &cfg,
                "--personas",
                "50",
                "--ticks",
                "3",
                "--embed-strategy",
                strategy,
                "--out",
                out,
                "--json",
            ],
        ))
    };
    let batched = run("batched", "b");
    let per_persona = run("per-persona", "p");
    assert_eq!(batched["digest"], per_persona["digest"]);
    assert!(
        batched["embedding"]["upstream_requests"].as_u64() < per_persona["embedding"]["upstream_requests"].as_u64()
    );
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

#[test]
fn vectors_do_not_depend_on_the_thread_count() {
    let dir = scratch("minilm-threads");
    let corpus = std::fs::read_to_string(root().join("fixtures/minilm/corpus.txt")).expect("corpus");
    let texts: Vec<&str> = corpus.lines().skip(1).collect();
    let cfg = config();
    let embed = |threads: &str| {
        let mut args = vec!["embed", "text", "--config", &cfg, "--threads", threads, "--json"];
        args.extend(texts.iter().copied());
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim-cli"))
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
    assert!(one == two, "a vector changed with the thread count (tokio workers and candle's threads)");
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
