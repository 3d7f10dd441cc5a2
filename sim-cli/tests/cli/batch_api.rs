//! `[chat] mode = "batch"` against `scripts/batch-api-server`, a loopback
//! server speaking OpenAI's Batch API (files, batches, retrieval, file
//! content) and `/chat/completions`.

use crate::support::{scratch, sim, stderr};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The server, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the script with `args`, logging requests to `dir/server.log`.
fn server(dir: &Path, args: &[&str]) -> Server {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/batch-api-server");
    let log = dir.join("server.log");
    let mut child = Command::new("python3")
        .arg(script)
        .args(["--port", "0", "--log", log.to_str().expect("utf-8 path")])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the loopback Batch API server");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("the server says its port");
    let port = first.trim().strip_prefix("listening on ").and_then(|p| p.parse().ok()).expect("a port");
    Server { child, port }
}

/// A config for the server in `mode`: 1 USD per million prompt tokens and
/// 2 per million completion tokens online, so the batch price (half) is
/// exact to the nano-USD.
fn config(dir: &Path, name: &str, port: u16, mode: &str) {
    config_with(dir, name, port, mode, 16);
}

/// The same, with `direct_retries_at_most`.
fn config_with(dir: &Path, name: &str, port: u16, mode: &str, direct: usize) {
    let text = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\nmode = \"{mode}\"\n\
         [chat.batch]\npoll_first_ms = 20\npoll_max_ms = 100\ndirect_retries_at_most = {direct}\n\
         [chat.http]\nbase_url = \"http://127.0.0.1:{port}/v1\"\napi_key_env = \"\"\n\
         [prices.models.loopback-model]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n"
    );
    std::fs::write(dir.join(name), text).expect("write config");
}

fn run(dir: &Path, config: &str, out: &str) -> serde_json::Value {
    let o = sim(dir, &["run", "--personas", "12", "--ticks", "3", "--config", config, "--out", out, "--yes", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("json")
}

/// How many times the server saw `line` (`POST /v1/batches`, ...).
fn seen(dir: &Path, line: &str) -> usize {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default().lines().filter(|l| *l == line).count()
}

/// A batch run gets the online run's replies, so its digest; it pays half;
/// each round of a tick is one batch, and nothing but the connection check
/// goes online.
#[test]
fn a_batch_run_costs_half_and_gives_the_online_digest() {
    let dir = scratch("batch-half");
    let s = server(&dir, &[]);
    config(&dir, "online.toml", s.port, "online");
    config(&dir, "batch.toml", s.port, "batch");
    let online = run(&dir, "online.toml", "online");
    let online_calls = seen(&dir, "POST /v1/chat/completions");
    let batch = run(&dir, "batch.toml", "batch");
    assert_eq!(batch["digest"], online["digest"], "the same replies, the same digest");
    assert_ne!(batch["full_digest"], online["full_digest"], "the transport and the bill differ");
    let chat_cost = |v: &serde_json::Value| v["cost"]["chat_nano_usd"].as_u64().expect("chat cost");
    assert!(chat_cost(&online) > 0);
    assert_eq!(2 * chat_cost(&batch), chat_cost(&online), "the batch price is half");
    assert_eq!(batch["cost"]["allocated_total_nano_usd"], batch["cost"]["provider_total_nano_usd"]);
    assert_eq!(seen(&dir, "POST /v1/chat/completions"), online_calls + 1, "only the connection check went online");
    let batches = seen(&dir, "POST /v1/batches");
    assert_eq!(seen(&dir, "POST /v1/files"), batches);
    // Each tick's reactions are a round; the tick with the probe adds one,
    // and reflections another when a persona reflects.
    assert!((4..=7).contains(&batches), "{batches} batches for 3 ticks");
    let endpoint = &batch["chat"]["endpoints"][0];
    assert!(endpoint["url"].as_str().is_some_and(|u| u.ends_with("/v1/batches")), "{endpoint}");
    assert_eq!(endpoint["requests"], batch["chat"]["requests"]);
    let replay = sim(&dir, &["replay", "batch", "--json"]);
    assert!(replay.status.success(), "{}", stderr(&replay));
    // Rounds larger than a file may be are split: each tick's 12 reactions
    // at 5 lines a file are 3 batches, with the same replies.
    let small = std::fs::read_to_string(dir.join("batch.toml"))
        .expect("config")
        .replace("poll_first_ms", "max_lines = 5\npoll_first_ms");
    std::fs::write(dir.join("small.toml"), small).expect("write");
    let before = seen(&dir, "POST /v1/batches");
    let split = run(&dir, "small.toml", "split");
    assert_eq!(split["digest"], online["digest"]);
    assert!(seen(&dir, "POST /v1/batches") - before >= batches + 3 * 2, "split at 5 lines");
}

/// Lines the batch failed, and lines an expired batch never ran, fail their
/// jobs like failed calls, unbilled; the other jobs go on.
#[test]
fn failed_and_expired_lines_fail_their_jobs_alone() {
    for (name, args, cause) in
        [("fail", &["--fail-every", "5"][..], "line failed"), ("expire", &["--expire"][..], "expired")]
    {
        let dir = scratch(&format!("batch-{name}"));
        let s = server(&dir, args);
        config(&dir, "batch.toml", s.port, "batch");
        let v = run(&dir, "batch.toml", "r");
        let (ok, failed) = (v["jobs"]["ok"].as_u64().expect("ok"), v["jobs"]["failed"].as_u64().expect("failed"));
        assert!(ok > 0 && failed > 0, "{name}: {}", v["jobs"]);
        assert!(v["chat"]["failures"].as_u64().is_some_and(|n| n > 0), "{name}: {}", v["chat"]);
        assert_eq!(v["chat"]["endpoints"][0]["failures"], v["chat"]["failures"], "each failed line counted once");
        let report = sim(&dir, &["report", "r", "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&report.stdout).expect("report json");
        let causes = report["failures"].to_string();
        assert!(causes.contains(cause), "{name}: {causes}");
    }
}

/// Runs the panel in batch mode against a server whose batches take two
/// seconds, and kills it once the first batch has been polled.
fn killed_during_first_batch(dir: &Path) -> Server {
    let s = server(dir, &["--hold", "2"]);
    config(dir, "batch.toml", s.port, "batch");
    let mut child = crate::support::command()
        .args(["run", "--personas", "12", "--ticks", "3", "--config", "batch.toml", "--out", "k", "--yes", "--json"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim-cli runs");
    // However slow the machine: wait for the poll, unless sim-cli ends first.
    while seen(dir, "GET /v1/batches/batch_1") == 0 {
        let ended = child.try_wait().expect("the child's status");
        assert!(ended.is_none(), "sim-cli ended ({ended:?}) before it polled the first batch");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    let _ = child.wait();
    assert_eq!(seen(dir, "POST /v1/batches"), 1, "killed while the first batch ran");
    s
}

/// The digest, bill and batch count of the panel run uninterrupted.
fn uninterrupted(dir: &Path) -> (serde_json::Value, usize) {
    let s = server(dir, &[]);
    config(dir, "batch.toml", s.port, "batch");
    let v = run(dir, "batch.toml", "clean");
    let batches = seen(dir, "POST /v1/batches");
    std::fs::remove_file(dir.join("server.log")).expect("fresh log");
    (v, batches)
}

fn resume(dir: &Path) -> serde_json::Value {
    let resumed = sim(dir, &["run", "--resume", "k", "--json"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    serde_json::from_slice(&resumed.stdout).expect("json")
}

/// A run killed after a batch was submitted and before it ended resumes by
/// polling that batch: it is never submitted twice, and the run ends with
/// the digest and the bill of an uninterrupted one.
#[test]
fn a_batch_run_killed_before_its_batch_ends_resumes_without_submitting_it_again() {
    let dir = scratch("batch-kill");
    let (clean, batches) = uninterrupted(&dir);
    let _server = killed_during_first_batch(&dir);
    let v = resume(&dir);
    assert_eq!(seen(&dir, "POST /v1/batches"), batches, "no batch submitted twice");
    assert_eq!(v["digest"], clean["digest"]);
    assert_eq!(v["cost"]["chat_nano_usd"], clean["cost"]["chat_nano_usd"]);
}

/// When the batch a killed run was waiting for is gone by the time it
/// resumes (here: the server lost it), its requests are submitted again
/// and the run ends as an uninterrupted one would.
#[test]
fn a_batch_gone_while_the_run_was_down_is_submitted_again() {
    let dir = scratch("batch-gone");
    let (clean, batches) = uninterrupted(&dir);
    let port = killed_during_first_batch(&dir).port.to_string();
    std::fs::remove_file(dir.join("server.log")).expect("fresh log");
    // A new server on the port the run recorded, knowing no batch.
    let _server = server(&dir, &["--port", &port]);
    let v = resume(&dir);
    assert!(seen(&dir, "GET /v1/batches/batch_1") > 0, "the recorded batch was asked for first");
    assert_eq!(seen(&dir, "POST /v1/batches"), batches, "then every round went out once");
    assert_eq!(v["digest"], clean["digest"]);
    assert_eq!(v["cost"]["chat_nano_usd"], clean["cost"]["chat_nano_usd"]);
}

/// Replies that fail the guardrails are asked again: a few retries alone go
/// online at once (at the online price), more go as a follow-up batch; the
/// replies, so the digest, are the same either way.
#[test]
fn guardrail_retries_go_online_when_few_and_as_a_batch_otherwise() {
    let mut results = Vec::new();
    for direct in [16, 0] {
        let dir = scratch(&format!("batch-retries-{direct}"));
        let s = server(&dir, &["--bad-every", "3"]);
        config_with(&dir, "batch.toml", s.port, "batch", direct);
        let v = run(&dir, "batch.toml", "r");
        assert!(v["chat"]["guardrail_retries"].as_u64().is_some_and(|n| n > 0), "{}", v["chat"]);
        results.push((v, seen(&dir, "POST /v1/chat/completions"), seen(&dir, "POST /v1/batches")));
    }
    let ((direct, online_calls, batches), (batched, online_calls_0, batches_0)) = (&results[0], &results[1]);
    assert_eq!(direct["digest"], batched["digest"]);
    assert!(*online_calls > 1, "retries went online");
    assert_eq!(*online_calls_0, 1, "only the connection check went online");
    assert!(batches_0 > batches, "retries went as follow-up batches: {batches_0} against {batches}");
    let cost = |v: &serde_json::Value| v["cost"]["chat_nano_usd"].as_u64().expect("cost");
    assert!(cost(direct) > cost(batched), "online retries cost the online price");
}

/// Commands that ask one question at a time have no rounds to batch: they
/// refuse batch mode, naming the setting, and call nothing.
#[test]
fn validate_and_experiment_refuse_batch_mode() {
    let dir = scratch("batch-refused");
    let s = server(&dir, &[]);
    config(&dir, "batch.toml", s.port, "batch");
    let commands = [
        vec!["validate", "--config", "batch.toml", "--sample", "10", "--yes"],
        vec!["experiment", "--config", "batch.toml"],
    ];
    for args in commands {
        let o = sim(&dir, &args);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("mode = \"batch\" is for `sim-cli run`") && !err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("server.log")).unwrap_or_default(), "", "nothing was called");
}
