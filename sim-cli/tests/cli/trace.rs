use crate::support::{scratch, sim, stderr};
use engine::store::trace::file::read_trace_file;
use engine::store::trace::{Record, TraceWriter};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Both digests of a `--json` summary.
fn digest_of(out: &std::process::Output) -> (String, String) {
    assert!(out.status.success(), "{}", stderr(out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let get = |k: &str| v[k].as_str().expect("digest").to_string();
    (get("digest"), get("full_digest"))
}

#[test]
fn replay_matches_every_tick_with_no_provider_calls() {
    let dir = scratch("replay");
    assert!(sim(&dir, &["run", "--personas", "30", "--ticks", "3", "--out", "r"]).status.success());
    let out = sim(&dir, &["replay", "r", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["ticks_matched"], 3);
    assert_eq!(v["provider_calls"], 0);
    assert_eq!(v["cassette_misses"], 0);
    assert!(v["divergence"].is_null());
    let text = sim(&dir, &["replay", "r/trace.bin"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("Replayed 3 of 3 recorded ticks"));
}

#[test]
fn replay_names_the_first_divergence() {
    let dir = scratch("diverge");
    assert!(sim(&dir, &["run", "--personas", "20", "--ticks", "3", "--out", "r"]).status.success());
    // Rewrite the trace with one recorded reply changed at tick 2, persona 5.
    let path = dir.join("r/trace.bin");
    let mut t = read_trace_file(&path, false).expect("reads");
    let call = &mut t.ticks[1].outcomes[5].chat_calls[0];
    call.reply = call.reply.replace("REACTION: ", "REACTION: Tampered. ");
    std::fs::remove_file(&path).expect("remove");
    let mut w = TraceWriter::create(&path, &t.header).expect("rewrite");
    for f in &t.ticks {
        w.append(&Record::Tick(Box::new(f.clone()))).expect("append");
    }
    let out = sim(&dir, &["replay", "r"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("diverged after 1 matching ticks: tick 2, persona p-00005"), "{said}");
    assert!(said.contains("reaction"), "{said}");
}

#[test]
fn inspect_reconstructs_ticks_and_a_persona() {
    let dir = scratch("inspect");
    assert!(sim(&dir, &["run", "--personas", "10", "--ticks", "3", "--out", "r"]).status.success());
    let out = sim(&dir, &["inspect", "r", "--tick", "2", "--persona", "p-00004", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["header"]["personas"], 10);
    assert_eq!(v["ticks"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["tick_detail"]["tick"], 2);
    let turns = v["persona"]["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 3);
    assert!(turns[0]["new_memories"][0]["description"].as_str().is_some_and(|d| d.starts_with("Tick 1: saw")));
    assert!(!sim(&dir, &["inspect", "r", "--tick", "9"]).status.success());
    let bad = sim(&dir, &["inspect", "r", "--persona", "p-00099"]);
    assert!(stderr(&bad).contains("p-00099"));
}

#[test]
fn damaged_traces_get_a_clear_error() {
    let dir = scratch("damaged");
    assert!(sim(&dir, &["run", "--personas", "5", "--ticks", "2", "--out", "r"]).status.success());
    let path = dir.join("r/trace.bin");
    let mut b = std::fs::read(&path).expect("read");
    let mid = b.len() / 2;
    b[mid] ^= 0x10;
    std::fs::write(&path, &b).expect("write");
    for cmd in ["replay", "inspect"] {
        let out = sim(&dir, &[cmd, "r"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains("trace.bin: frame") && err.contains("byte offset"), "{cmd}: {err}");
        assert!(!err.contains("panicked"));
    }
    assert!(stderr(&sim(&dir, &["replay", "nowhere"])).contains("no trace here"));
}

#[test]
fn resuming_a_finished_run_changes_nothing() {
    let dir = scratch("resume-done");
    let first = sim(&dir, &["run", "--personas", "12", "--ticks", "2", "--out", "r", "--json"]);
    let files = [runs::dir::TRACE, runs::dir::SUMMARY, runs::dir::OUTCOMES, runs::dir::CONFIG];
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(dir.join("r").join(f)).expect("file")).collect();
    let again = sim(&dir, &["run", "--resume", "r", "--json"]);
    assert_eq!(digest_of(&first), digest_of(&again));
    let after: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(dir.join("r").join(f)).expect("file")).collect();
    assert!(before == after, "a finished run's files were changed");
    assert!(stderr(&sim(&dir, &["run", "--resume", "r", "--personas", "3"])).contains("--personas"));
}

/// Polls `cond` until it holds; false after `limit`. The limit only keeps
/// a broken run from hanging the suite: no test asserts how fast it is.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A bounded OpenAI-compatible server on loopback. `/embeddings` gets one
/// 16-dimensional vector per input; `/chat/completions` gets a JSON reply
/// for the schema it asked for (reaction, probe, reflection), except every
/// `fail_every`-th chat request, which gets a 500. Each connection closes
/// after one answer. It records each request line with its `Authorization`
/// header, and stops when
/// `stop` is set or after 2,000 requests.
pub(crate) fn openai_server(
    stop: Arc<AtomicBool>,
    fail_every: usize,
) -> (String, Arc<parking_lot::Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    openai_server_paused(stop, fail_every, None, Logprobs::Absent)
}

/// What an [`openai_server`] answers a request asking for `logprobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logprobs {
    /// A reply without them.
    Absent,
    /// The 20 alternatives of a model whose 20 likeliest tokens are words
    /// (option `o` is [`hidden_logit`]`(o)` against words at 0 to -0.95),
    /// and `/tokenize` answering as llama.cpp's server does: option `o`'s
    /// number is token `1000 + o`, ` o` two tokens. A request with
    /// `logit_bias` is honoured, its alternatives listed as llama.cpp lists
    /// them with `post_sampling_probs` (`top_probs`); or, when
    /// `honours_bias` is false, refused with a 400 naming `logit_bias`.
    Hidden {
        /// Whether `logit_bias` is taken.
        honours_bias: bool,
    },
}

/// Option `o`'s logit in [`Logprobs::Hidden`]: below every listed word's.
pub(crate) fn hidden_logit(o: usize) -> f64 {
    -3.0 - 0.5 * o as f64
}

/// [`openai_server`] whose replies to a request asking for `logprobs` carry
/// them, as `logprobs` says.
pub(crate) fn openai_logprobs_server(
    stop: Arc<AtomicBool>,
    logprobs: Logprobs,
) -> (String, Arc<parking_lot::Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    openai_server_paused(stop, 0, None, logprobs)
}

/// A pause: after this many chat answers the server stops reading requests
/// (what arrives meanwhile is never read, so never "seen") until the gate
/// goes from [`PAUSED`] to [`DRAIN`]; it then drops every connection that
/// arrived meanwhile, backlog included, and sets [`OPEN`].
type Pause = (usize, Arc<AtomicU8>);
const PAUSED: u8 = 0;
const DRAIN: u8 = 1;
const OPEN: u8 = 2;

/// [`openai_server`], recording each chat request's body as it is read
/// (after the request line) and pausing as `pause` says.
fn openai_server_paused(
    stop: Arc<AtomicBool>,
    fail_every: usize,
    pause: Option<Pause>,
    logprobs: Logprobs,
) -> (String, Arc<parking_lot::Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let auth = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = auth.clone();
    let handle = std::thread::spawn(move || {
        let (mut served, mut chats) = (0, 0usize);
        // Connections accepted while paused are held unread, then dropped
        // unread when the gate opens: their sender is gone by then.
        let mut held = Vec::new();
        while served < 2_000 && !stop.load(Ordering::Relaxed) {
            if let Some((after, gate)) = &pause {
                if chats >= *after && gate.load(Ordering::Relaxed) == PAUSED {
                    if let Ok((sock, _)) = listener.accept() {
                        held.push(sock);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                if gate.load(Ordering::Relaxed) == DRAIN {
                    while let Ok((sock, _)) = listener.accept() {
                        held.push(sock);
                    }
                    held.clear();
                    gate.store(OPEN, Ordering::Relaxed);
                }
            }
            let Ok((mut sock, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let _ = sock.set_nonblocking(false);
            let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let body = loop {
                let Ok(n) = sock.read(&mut chunk) else { break None };
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                let Some(end) = text.find("\r\n\r\n") else { continue };
                let length = text[..end]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    let head = &text[..end];
                    let first = head.lines().next().unwrap_or_default();
                    let auth = head.lines().find(|l| l.to_ascii_lowercase().starts_with("authorization:"));
                    seen.lock().push(format!("{first} | {}", auth.unwrap_or("no authorization")));
                    break Some(buf[end + 4..end + 4 + length].to_vec());
                }
            };
            let Some(body) = body else { continue };
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if request.get("messages").is_some() {
                chats += 1;
                seen.lock().push(format!("BODY {}", String::from_utf8_lossy(&body)));
                served += 1;
                let response = match (logprobs, request["logprobs"] == true) {
                    (Logprobs::Hidden { honours_bias }, true) => hidden_answer(&request, honours_bias),
                    _ => chat_answer(&request, fail_every > 0 && chats % fail_every == 0),
                };
                let _ = sock.write_all(response.as_bytes());
                continue;
            }
            if let Some(text) = request["content"].as_str() {
                // `/tokenize`, as llama.cpp's server answers it.
                let tokens: Vec<u64> =
                    text.bytes().map(|b| if b.is_ascii_digit() { 1000 + u64::from(b - b'0') } else { 220 }).collect();
                seen.lock().push(format!("TOKENIZE {text:?}"));
                let _ = sock.write_all(ok(&serde_json::json!({"tokens": tokens}).to_string()).as_bytes());
                continue;
            }
            let inputs = request["input"].as_array().map_or(0, Vec::len);
            let data: Vec<serde_json::Value> = (0..inputs)
                .map(|i| {
                    let v: Vec<f32> = (0..16).map(|d| ((i * 7 + d) % 5) as f32 + 0.5).collect();
                    serde_json::json!({"object": "embedding", "index": i, "embedding": v})
                })
                .collect();
            let reply =
                serde_json::json!({"object": "list", "data": data, "usage": {"prompt_tokens": 3 * inputs}}).to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            let _ = sock.write_all(response.as_bytes());
            served += 1;
        }
    });
    (url, auth, handle)
}

/// A 200 answer carrying `body`.
fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// [`Logprobs::Hidden`]'s answer to a weighing.
fn hidden_answer(request: &serde_json::Value, honours_bias: bool) -> String {
    let bias = &request["logit_bias"];
    if bias.is_object() && !honours_bias {
        let body =
            r#"{"error":{"message":"logit_bias is not supported by this server","type":"invalid_request_error"}}"#;
        return format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
    let prompt = request["messages"][0]["content"].as_str().unwrap_or_default();
    let k: usize = prompt.rsplit("from 1 to ").next().and_then(|t| t.trim_end_matches('.').parse().ok()).unwrap_or(5);
    let mut vocab: Vec<(String, f64)> = (0..20).map(|i| (format!("w{i}"), -0.05 * f64::from(i))).collect();
    for o in 1..=k {
        let raise = bias[(1000 + o).to_string()].as_f64().unwrap_or(0.0);
        vocab.push((o.to_string(), hidden_logit(o) + raise));
    }
    let top = vocab.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = vocab.iter().map(|v| (v.1 - top).exp()).sum();
    vocab.sort_by(|a, b| b.1.total_cmp(&a.1));
    vocab.truncate(20);
    let listed: Vec<serde_json::Value> = vocab
        .iter()
        .map(|(t, l)| match request["post_sampling_probs"] == true {
            true => serde_json::json!({"token": t, "prob": (l - top).exp() / z}),
            false => serde_json::json!({"token": t, "logprob": l - top - z.ln()}),
        })
        .collect();
    let key = if request["post_sampling_probs"] == true { "top_probs" } else { "top_logprobs" };
    let body = serde_json::json!({
        "model": "loopback-model",
        "choices": [{
            "message": {"role": "assistant", "content": vocab[0].0},
            "logprobs": {"content": [{"token": vocab[0].0, key: listed}]},
        }],
        "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": 1},
    });
    ok(&body.to_string())
}

/// How often each prompt was asked for shares, by every server of the
/// test binary (only one test asks for shares).
static SHARES_ASKED: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashMap<String, usize>>> =
    std::sync::LazyLock::new(Default::default);

/// The body answering a request for option shares: one share per option
/// (the schema's `maxItems`), except that a third of the prompts get
/// broken JSON and then a share too few before a valid reply, and another
/// third a share too few first, so that the guardrails retry them.
fn shares_answer(request: &serde_json::Value) -> String {
    let schema = &request["response_format"]["json_schema"]["schema"]["properties"]["shares"];
    let k = schema["maxItems"].as_u64().unwrap_or(2) as usize;
    let prompt = request["messages"][0]["content"].as_str().unwrap_or_default();
    let n = prompt.len();
    let asked = {
        let mut seen = SHARES_ASKED.lock();
        let count = seen.entry(prompt.to_string()).or_default();
        *count += 1;
        *count - 1
    };
    let too_few = || serde_json::json!({"shares": vec![100.0 / (k - 1).max(1) as f64; k - 1]}).to_string();
    let content = match (n % 3, asked) {
        (0, 0) => "{\"shares\": [30, 70".to_string(),
        (0, 1) | (1, 0) => too_few(),
        _ => {
            let weights: Vec<f64> = (0..k).map(|i| 1.0 + ((n + 3 * i) % 7) as f64).collect();
            serde_json::json!({"shares": weights}).to_string()
        }
    };
    serde_json::json!({
        "model": "loopback-model",
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": n / 4, "completion_tokens": 12},
    })
    .to_string()
}

/// The answer to one chat request: a reply in the schema it names, or a 500.
fn chat_answer(request: &serde_json::Value, fail: bool) -> String {
    let respond = |status: &str, body: String| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if fail {
        return respond("500 Internal Server Error", "{\"error\": \"overloaded\"}".into());
    }
    let prompt = request["messages"][0]["content"].as_str().unwrap_or_default();
    let n = prompt.len();
    let content = match request["response_format"]["json_schema"]["name"].as_str() {
        Some("probe") => serde_json::json!({"answer": 1 + n % 5, "why": "it depends on the price"}),
        Some("reflection") => serde_json::json!({"insights": [{"insight": "I care about value", "importance": 6}]}),
        Some("agent_points") => {
            let points: Vec<&str> = prompt.lines().filter(|l| l.len() > 40).take(3).collect();
            serde_json::json!({"points": points})
        }
        Some("judge_score") => serde_json::json!({"score": 1 + n % 5, "justification": "Judged on loopback."}),
        Some("survey_answer") => serde_json::json!({"answer": 1 + n % 2, "why": "I answered this on loopback."}),
        Some("option_shares") => return respond("200 OK", shares_answer(request)),
        _ => serde_json::json!({
            "reaction": format!("I read {n} characters about it and feel fine."),
            "sentiment": 0.2,
            "intent": 1 + n % 5,
            "importance": 4,
        }),
    };
    let body = serde_json::json!({
        "model": "loopback-model",
        "choices": [{"message": {"role": "assistant", "content": content.to_string()}}],
        // Like OpenAI, vLLM and llama.cpp's server: a share of the prompt
        // came from the server's prefix cache.
        "usage": {"prompt_tokens": n / 4, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": n / 8}},
    });
    respond("200 OK", body.to_string())
}

/// A panel against a live (loopback) chat model whose server fails every
/// seventh call: the run completes through the retries, and `replay`
/// reproduces it from the trace with no call and every digest matching.
/// The server reports cached prompt tokens: they are billed at the model's
/// cached price, summed in the summary, and kept in the trace.
#[test]
fn a_live_chat_run_with_faults_replays_with_no_call() {
    let dir = scratch("live-chat");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, auth, server) = openai_server(stop.clone(), 7);
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\nbackoff_base_ms = 1\nbackoff_max_ms = 2\n\
         [chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
         [prices.models.loopback-model]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\ncached_input_usd_per_mtok = 0.25\n"
    );
    std::fs::write(dir.join("live.toml"), config).expect("write");
    let out = sim(&dir, &["run", "--personas", "6", "--ticks", "3", "--config", "live.toml", "--out", "r", "--json"]);
    let calls = auth.lock().len();
    assert!(out.status.success(), "{}", stderr(&out));
    let chats = auth.lock().iter().filter(|l| l.contains("/chat/completions")).count();
    assert!(chats > 6, "the panel talked to the live model: {chats} calls");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["jobs"]["ok"].as_u64().is_some_and(|n| n > 0), "{v}");
    assert_eq!(v["cost"]["allocated_total_nano_usd"], v["cost"]["provider_total_nano_usd"]);
    let endpoints = v["chat"]["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 1);
    assert!(endpoints[0]["url"].as_str().is_some_and(|u| u.ends_with("/v1/chat/completions")));
    assert!(endpoints[0]["failures"].as_u64().is_some_and(|n| n > 0), "every seventh call failed");
    let chat = |k: &str| v["chat"][k].as_u64().unwrap_or_else(|| panic!("chat.{k} missing: {v}"));
    assert!(chat("retries") > 0);
    assert!(stderr(&out).contains("connection check: "), "{}", stderr(&out));
    let probe = 1;
    assert_eq!(chat("attempts"), (chats - probe) as u64, "every attempt the server saw, bar the probe, is recorded");
    assert_eq!(chat("requests") + chat("retries"), chat("attempts"));
    assert_eq!(chat("failures"), 0, "every failure was retried away");
    // 1 USD per million prompt tokens is 1,000 nano-USD a token, a cached
    // one 250, a completion token 2,000.
    let tokens = |k: &str| v["tokens"][k].as_u64().unwrap_or_else(|| panic!("tokens.{k} missing: {v}"));
    let (input, cached, output) = (tokens("chat_input"), tokens("chat_input_cached"), tokens("chat_output"));
    assert!(cached > 0 && cached < input, "{v}");
    assert_eq!(v["cost"]["chat_nano_usd"].as_u64(), Some((input - cached) * 1_000 + cached * 250 + output * 2_000));
    let share = v["chat"]["cached_share"].as_f64().expect("cached_share");
    assert!((share - cached as f64 / input as f64).abs() < 1e-12, "{share}");
    assert!(v["cost"]["chat_cached_input_price"].as_str().is_some_and(|p| p.starts_with("0.25 USD")), "{v}");
    let report = sim(&dir, &["report", "r", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).expect("report json");
    assert_eq!(
        report["costs"]["tokens"]["chat input from the prompt cache"].as_u64(),
        Some(cached),
        "the trace keeps them"
    );
    let replay = sim(&dir, &["replay", "r", "--json"]);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert!(replay.status.success(), "{}", stderr(&replay));
    let r: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("json");
    assert_eq!((r["provider_calls"].as_u64(), r["ticks_matched"].as_u64()), (Some(0), Some(3)), "{r}");
    assert!(r["divergence"].is_null());
    assert_eq!(auth.lock().len(), calls, "replay sent nothing to the server");
}

/// A live run killed mid-tick resumes without buying any answer twice: the
/// answers paid for before the kill come from `chat.wal`, the server sees
/// every request exactly once, and the final digest is the uninterrupted
/// run's.
#[test]
fn a_killed_live_run_never_pays_for_an_answer_twice() {
    let dir = scratch("live-kill");
    let config = |url: &str| {
        format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\nconcurrency = 2\n\
             [chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
        )
    };
    let args = ["run", "--personas", "6", "--ticks", "3", "--json"];
    // The uninterrupted run.
    let stop = Arc::new(AtomicBool::new(false));
    let (url, reference_seen, server) = openai_server(stop.clone(), 0);
    std::fs::write(dir.join("a.toml"), config(&url)).expect("write");
    let reference = sim(&dir, &[&args[..], &["--config", "a.toml", "--out", "reference"]].concat());
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let cost = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("json")["cost"]["provider_total_nano_usd"].clone()
    };
    let (expected, expected_cost) = (digest_of(&reference).0, cost(&reference));
    // The killed one: the server answers the probe and 9 calls (the
    // pilot's 3 and the run's next 6: tick 1 and part of tick 2), then
    // holds the rest.
    let (stop, gate) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU8::new(PAUSED)));
    let (url, seen, server) = openai_server_paused(stop.clone(), 0, Some((10, gate.clone())), Logprobs::Absent);
    std::fs::write(dir.join("b.toml"), config(&url)).expect("write");
    let mut child = crate::support::command()
        .args([&args[..], &["--config", "b.toml", "--out", "killed"]].concat())
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let bodies = || seen.lock().iter().filter(|l| l.starts_with("BODY")).count();
    assert!(wait_until(Duration::from_secs(60), || bodies() >= 10), "the run never reached 9 calls");
    // Tick 2 cannot commit while the server holds its calls, so answers in
    // the log now were logged as they came, not at a commit.
    let wal = dir.join("killed/chat.wal");
    let logged = || engine::store::trace::wal::read_wal(&wal).map_or(0, |(paid, _)| paid.len());
    // The pilot's three answers are logged first, then the run's nine
    // (its first three served from the pilot): twelve entries.
    assert!(wait_until(Duration::from_secs(60), || logged() >= 12), "the answers were never logged");
    let _ = child.kill();
    let _ = child.wait();
    let (paid, _) = engine::store::trace::wal::read_wal(&wal).expect("the log reads");
    assert_eq!(paid.len(), 12, "every answer was logged before the kill (the probe is not a persona's)");
    // The killed run's unanswered requests are dropped unread before the
    // resume starts, so each request the server reads is a live one.
    gate.store(DRAIN, Ordering::Relaxed);
    assert!(wait_until(Duration::from_secs(60), || gate.load(Ordering::Relaxed) == OPEN), "the server never reopened");
    let resumed = sim(&dir, &["run", "--resume", "killed", "--json"]);
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    // The configs differ only in the server's address, which full_digest
    // covers; the content digest and what was billed must match.
    assert_eq!(digest_of(&resumed).0, expected, "the resumed run ends where the uninterrupted one did");
    assert_eq!(cost(&resumed), expected_cost, "and was billed the same: nothing twice");
    assert!(stderr(&resumed).contains("connection check: "), "the resume checked the model first");
    let v: serde_json::Value = serde_json::from_slice(&resumed.stdout).expect("json");
    let sent = v["chat"]["endpoints"][0]["requests"].as_u64();
    assert!(sent.is_some_and(|n| n > 0), "the resumed run reports its live endpoint: {}", v["chat"]);
    // Each request reached the server as often as in the uninterrupted run
    // (a persona that meets the same stimulus with the same memories asks
    // the same thing twice in both).
    let counts = |log: &parking_lot::Mutex<Vec<String>>| {
        let mut m = std::collections::BTreeMap::new();
        // The connection check is sent once per command, not per run.
        for l in log.lock().iter().filter(|l| l.starts_with("BODY") && !l.contains("[connection check]")) {
            *m.entry(l.clone()).or_insert(0u32) += 1;
        }
        m
    };
    let (got, want) = (counts(&seen), counts(&reference_seen));
    let diff: Vec<String> = got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| format!("{:?} vs {:?}: {}", got.get(k), want.get(k), k.get(..400).unwrap_or(k)))
        .collect();
    assert!(
        diff.is_empty(),
        "requests seen a different number of times (killed+resumed vs uninterrupted): {diff:#?}\n{}",
        stderr(&resumed)
    );
}

/// Before a live run: an estimate above --confirm-above-usd needs --yes
/// when piped, and a model that refuses the probe request stops the run;
/// either way nothing is written.
#[test]
fn a_live_run_is_estimated_confirmed_and_probed_first() {
    let dir = scratch("live-preflight");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = openai_server(stop.clone(), 0);
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
         [prices]\nchat_input_usd_per_mtok = 1000.0\nchat_output_usd_per_mtok = 1000.0\n"
    );
    std::fs::write(dir.join("dear.toml"), config).expect("write");
    let args = ["run", "--personas", "4", "--ticks", "1", "--config", "dear.toml"];
    let refused = sim(&dir, &[&args[..], &["--out", "a"]].concat());
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("above --confirm-above-usd 1.00: pass --yes"), "{}", stderr(&refused));
    // The connection check and the pilot's three jobs were asked (and billed) for the estimate.
    let posts = || seen.lock().iter().filter(|l| l.starts_with("POST")).count();
    assert!(!dir.join("a").exists() && posts() == 4, "nothing written; {:?}", seen.lock());
    // Without a pilot nothing is asked before the go-ahead but the check.
    let unpiloted = sim(&dir, &[&args[..], &["--out", "a", "--pilot", "0"]].concat());
    assert!(!unpiloted.status.success() && !dir.join("a").exists() && posts() == 5);
    let agreed = sim(&dir, &[&args[..], &["--out", "b", "--yes", "--json"]].concat());
    assert!(agreed.status.success(), "{}", stderr(&agreed));
    assert!(stderr(&agreed).contains("chat price): about 4 chat calls to loopback-model"), "{}", stderr(&agreed));
    // The pilot's answers were served to the run: it has the digests of a
    // run without one, costs included.
    let unpiloted = sim(&dir, &[&args[..], &["--out", "c", "--yes", "--json", "--pilot", "0"]].concat());
    assert_eq!(digest_of(&agreed), digest_of(&unpiloted));
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    // A server that refuses the key: the probe fails, with its message.
    let (url, _) = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let Ok(mut s) = stream else { continue };
                let mut buf = [0u8; 65536];
                let _ = s.read(&mut buf);
                let body = "{\"error\": {\"message\": \"Incorrect API key provided\"}}";
                let _ = write!(
                    s,
                    "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, ())
    };
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
    );
    std::fs::write(dir.join("bad-key.toml"), config).expect("write");
    let probed = sim(&dir, &["run", "--personas", "2", "--ticks", "1", "--config", "bad-key.toml", "--out", "d"]);
    assert!(!probed.status.success());
    let err = stderr(&probed);
    assert!(err.contains("failed its check before the run") && err.contains("Incorrect API key"), "{err}");
    assert!(!dir.join("d").exists(), "nothing written");
}

/// A model that refuses every call (after passing the probe) trips the
/// circuit breaker at the first tick boundary: the run stops, resumable,
/// instead of failing every job of every tick. Once the model is back,
/// `--resume` finishes the run (the recorded failures are not judged again).
#[test]
fn systematic_permanent_errors_stop_the_run_at_the_tick_boundary() {
    let dir = scratch("live-breaker");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let healthy = Arc::new(AtomicBool::new(false));
    let back = healthy.clone();
    let server = std::thread::spawn(move || {
        for stream in listener.incoming().take(400) {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = vec![0u8; 1 << 16];
            let n = s.read(&mut buf).unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            let ok = serde_json::json!({"choices": [{"message": {"content": "{\"reaction\": \"ok\", \"sentiment\": 0, \"intent\": 3, \"importance\": 1}"}}]}).to_string();
            let (status, body) = if text.contains("connection check") || back.load(Ordering::Relaxed) {
                ("200 OK", ok)
            } else {
                ("404 Not Found", "{\"error\": \"model loopback-model does not exist\"}".to_string())
            };
            let _ = write!(s, "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    let config = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
    );
    std::fs::write(dir.join("gone.toml"), config).expect("write");
    let out = sim(&dir, &["run", "--personas", "12", "--ticks", "3", "--config", "gone.toml", "--out", "r", "--json"]);
    assert!(!out.status.success(), "a stopped run is not a success");
    let err = stderr(&out);
    assert!(err.contains("permanent errors") && err.contains("does not exist") && err.contains("--resume"), "{err}");
    let read = read_trace_file(&dir.join("r/trace.bin"), false).expect("reads");
    assert_eq!((read.ticks.len(), read.end.is_none()), (1, true), "one tick committed, the run resumable");
    healthy.store(true, Ordering::Relaxed);
    let resumed = sim(&dir, &["run", "--resume", "r", "--json"]);
    drop(server);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let read = read_trace_file(&dir.join("r/trace.bin"), false).expect("reads");
    assert_eq!((read.ticks.len(), read.end.is_some()), (3, true), "the resumed run finished");
}

/// Ctrl-C stops at the next tick boundary and keeps what was committed;
/// `--resume` then finishes with the uninterrupted run's digests.
#[test]
fn ctrl_c_stops_at_a_tick_boundary_and_the_run_resumes() {
    let dir = scratch("ctrl-c");
    let args = ["run", "--personas", "2000", "--ticks", "4", "--seed", "5", "--json"];
    let expected = digest_of(&sim(&dir, &[&args[..], &["--out", "reference"]].concat()));
    let child = crate::support::command()
        .args([&args[..], &["--out", "stopped"]].concat())
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let trace = dir.join("stopped/trace.bin");
    assert!(wait_until(Duration::from_secs(30), || trace.exists()), "no trace appeared");
    let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill -INT");
    assert!(sent.success());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "an interrupted run is not a success");
    assert!(err.contains("interrupted") && err.contains("--resume"), "{err}");
    let read = read_trace_file(&dir.join("stopped/trace.bin"), false).expect("a clean prefix");
    assert!(read.end.is_none() && read.ticks.len() < 4, "stopped early at a boundary, resumable");
    let resumed = sim(&dir, &["run", "--resume", "stopped", "--json"]);
    assert_eq!(digest_of(&resumed), expected);
}

/// The key of a live provider reaches the provider and nothing else: not
/// stdout, stderr at debug level, the trace, the config copy or any other
/// file of the run.
#[test]
fn no_secret_from_the_environment_reaches_any_output() {
    let dir = scratch("secrets");
    let secret = "sk-test-5ecret-a1b2c3d4e5f6";
    let stop = Arc::new(AtomicBool::new(false));
    let (url, auth, server) = openai_server(stop.clone(), 0);
    let config = format!(
        "[embedding]\nprovider = \"openai\"\nmodel = \"text-embedding-3-small\"\ndim = 16\n\
         [embedding.http]\nbase_url = \"{url}\"\napi_key_env = \"SIM_TEST_SECRET_KEY\"\n"
    );
    std::fs::write(dir.join("live.toml"), config).expect("write");
    let out = crate::support::command()
        .args(["run", "--personas", "10", "--ticks", "2", "--config", "live.toml", "--out", "r", "--json"])
        .current_dir(&dir)
        .env("SIM_TEST_SECRET_KEY", secret)
        .env("OPENAI_API_KEY", secret)
        .env("RUST_LOG", "debug")
        .output()
        .expect("runs");
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    assert!(out.status.success(), "{}", stderr(&out));
    let auth = auth.lock().clone();
    assert!(!auth.is_empty(), "the live provider was called");
    assert!(auth.iter().all(|a| a.ends_with(&format!("Bearer {secret}"))), "{auth:?}");
    let mut seen = vec![out.stdout.clone(), out.stderr.clone()];
    for entry in std::fs::read_dir(dir.join("r")).expect("run dir") {
        seen.push(std::fs::read(entry.expect("entry").path()).expect("file"));
    }
    for bytes in seen {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "the key leaked");
    }
}

/// A trace recorded by engine 0.1.0, before the digest encoding was
/// hardened: its configuration no longer hashes as recorded, and every
/// command that re-runs it says which engine to use instead of reporting a
/// bare mismatch.
#[test]
fn a_trace_from_an_older_engine_names_the_engine_that_recorded_it() {
    let dir = scratch("older");
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/traces/engine-0.1.0");
    let old = old.to_str().expect("utf-8 path");
    for args in [&["replay", old][..], &["memory", "status", old]] {
        let out = sim(&dir, args);
        assert!(!out.status.success(), "{args:?} accepted an old trace");
        let err = stderr(&out);
        assert!(
            err.contains("was recorded by engine 0.1.0 in trace format 1")
                && err.contains("replay it with engine 0.1.0"),
            "{args:?}: {err}"
        );
    }
}

/// A tick too large for one frame is written in parts. Rewritten in parts
/// of 4 KiB, a run replays and inspects as before; cut between two parts of
/// tick 3 (a kill mid-write), it resumes to the uninterrupted digests and
/// keeps the cut-off parts.
#[test]
fn a_trace_in_parts_replays_inspects_and_resumes_from_a_cut_between_parts() {
    let dir = scratch("parts");
    let args = ["run", "--personas", "200", "--ticks", "4", "--seed", "5", "--json", "--out", "whole"];
    let expected = digest_of(&sim(&dir, &args));
    let read = read_trace_file(&dir.join("whole/trace.bin"), false).expect("reads");
    let parted = dir.join("parted");
    std::fs::create_dir_all(&parted).expect("dir");
    let path = runs::RunDir::at(&parted).trace();
    let mut w = TraceWriter::create(&path, &read.header).expect("create").with_part_bytes(4096);
    let mut commits = Vec::new();
    for t in &read.ticks {
        w.append(&Record::Tick(Box::new(t.clone()))).expect("tick");
        commits.push(w.len());
    }
    w.append(&Record::End(read.end.clone().expect("finished"))).expect("end");
    assert!(commits[0] > 3 * 4096, "tick 1 is several parts");
    let replay = sim(&dir, &["replay", "parted", "--json"]);
    assert!(replay.status.success(), "{}", stderr(&replay));
    let inspect = sim(&dir, &["inspect", "parted", "--tick", "4", "--json"]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let v: serde_json::Value = serde_json::from_slice(&inspect.stdout).expect("json");
    assert_eq!(v["header"]["ticks_recorded"], 4);
    assert_eq!(v["header"]["status"], "finished");

    // Cut two frames into tick 3: its first two parts stay, uncommitted.
    let mut frames = engine::store::frame::open(&path, &engine::store::trace::TRACE_FORMAT).expect("open");
    let mut cut = 0;
    while let Some(_f) = frames.next_frame().expect("frames") {
        if frames.valid_len() > commits[1] {
            cut += 1;
            if cut == 2 {
                break;
            }
        }
    }
    let cut = frames.valid_len();
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..cut as usize]).expect("cut");
    let strict = sim(&dir, &["replay", "parted"]);
    assert!(!strict.status.success());
    assert!(stderr(&strict).contains("tick 3 is not committed: 2 part frames"), "{}", stderr(&strict));
    let resumed = sim(&dir, &["run", "--resume", "parted", "--json"]);
    assert!(stderr(&resumed).contains("tick 3 is not committed"), "{}", stderr(&resumed));
    assert_eq!(digest_of(&resumed), expected);
    let kept = parted.join(format!("trace.bin.torn-{}", commits[1]));
    assert_eq!(std::fs::read(kept).expect("the cut parts are kept"), &bytes[commits[1] as usize..cut as usize]);
    assert!(sim(&dir, &["replay", "parted"]).status.success());
}

/// A run in `probabilities` (or `verbalized`) mode records each persona's distribution over
/// purchase intent and over the probes' options in its trace: the same
/// digest at one and two threads, replayed with no call, and a panel
/// mixture in the summary. Against a server speaking the real protocol on
/// loopback, intent is weighed at the reaction's own `INTENT:` line.
#[test]
fn answers_as_probabilities_are_recorded_and_replayed_with_no_call() {
    let dir = scratch("probabilities-run");
    let run = |out: &str, threads: &str, extra: &[&str]| {
        let mut args = vec!["run", "--personas", "12", "--ticks", "2", "--threads", threads, "--out", out, "--json"];
        args.extend_from_slice(extra);
        sim(&dir, &args)
    };
    let weighed = ["--answer-mode", "probabilities"];
    let one = run("p1", "1", &weighed);
    let (digest, full) = digest_of(&one);
    assert_eq!(digest_of(&run("p2", "2", &weighed)), (digest.clone(), full), "threads change no bit");
    assert_ne!(digest_of(&run("s", "2", &[])).0, digest, "the distributions are in the digest");
    let v: serde_json::Value = serde_json::from_slice(&one.stdout).expect("json");
    for (id, d) in v["intent"].as_object().expect("intent") {
        let mixture: Vec<f64> = serde_json::from_value(d["mixture"].clone()).expect("a mixture per stimulus");
        assert_eq!(mixture.len(), 5);
        assert!((mixture.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{id}: {mixture:?}");
        assert!(mixture.iter().filter(|p| **p > 0.0).count() > 1, "{id}: a distribution, not one draw");
    }
    assert!(v["notes"].to_string().contains("probabilities"), "{v}");
    let replay = sim(&dir, &["replay", "p1", "--json"]);
    assert!(replay.status.success(), "{}", stderr(&replay));
    let r: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("json");
    assert_eq!((r["provider_calls"].as_u64(), r["ticks_matched"].as_u64()), (Some(0), Some(2)), "{r}");
    assert_eq!(r["digest"].as_str(), Some(digest.as_str()));
    // The report draws each stimulus's panel distribution beside the
    // personas' rounded means, from the trace.
    assert!(sim(&dir, &["report", "p1"]).status.success());
    let page = std::fs::read_to_string(dir.join("p1/report.html")).expect("report.html");
    assert!(page.contains("tick 1 distribution") && page.contains("tick 1 rounded"), "no distribution rows");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("p1/report.json")).expect("report.json")).expect("json");
    let first = &report["intent"][0]["all"]["mixture"];
    assert!(first.as_array().is_some_and(|m| m.len() == 5), "{}", report["intent"][0]);
    // Verbalized: the persona gives shares after reacting; replayed too.
    let (shares, _) = digest_of(&run("v", "2", &["--answer-mode", "verbalized"]));
    let replay = sim(&dir, &["replay", "v", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("json");
    assert_eq!((r["provider_calls"].as_u64(), r["digest"].as_str()), (Some(0), Some(shares.as_str())), "{r}");

    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = openai_logprobs_server(stop.clone(), Logprobs::Hidden { honours_bias: true });
    std::fs::write(
        dir.join("live.toml"),
        format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
             [answers]\nmode = \"probabilities\"\n"
        ),
    )
    .expect("config");
    let live = sim(
        &dir,
        &["run", "--personas", "4", "--ticks", "1", "--config", "live.toml", "--yes", "--out", "l", "--json"],
    );
    let (live_digest, _) = digest_of(&live);
    let replay = sim(&dir, &["replay", "l", "--json"]);
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    let bodies: Vec<String> = seen.lock().iter().filter(|l| l.starts_with("BODY ")).cloned().collect();
    let weighings: Vec<&String> = bodies.iter().filter(|b| b.contains("\"logprobs\":true")).collect();
    // The options are not among the top 20 alternatives: each reaction's
    // weighing is asked again, the options' tokens raised.
    assert_eq!(weighings.len(), 8, "one intent weighing per reaction, asked twice: {bodies:#?}");
    let raised: Vec<&&String> = weighings.iter().filter(|b| b.contains("\"logit_bias\"")).collect();
    let bias = r#""logit_bias":{"1001":100.0,"1002":100.0,"1003":100.0,"1004":100.0,"1005":100.0}"#;
    assert!(raised.len() == 4 && raised.iter().all(|b| b.contains(bias)), "{raised:#?}");
    assert!(
        weighings.iter().all(|b| b.contains("Your reply so far:\\nREACTION:") && b.contains("INTENT:\\n")),
        "{weighings:#?}"
    );
    let r: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("json");
    assert_eq!((r["provider_calls"].as_u64(), r["digest"].as_str()), (Some(0), Some(live_digest.as_str())), "{r}");
}
