//! The pre-flight estimate of a live run against its bill, on the project's
//! own OpenAI-compatible server (`scripts/prefix-cache-server`) with its
//! reply lengths fixed.

use crate::support::{scratch, sim, stderr};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

/// `scripts/prefix-cache-server` on a free port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/prefix-cache-server");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("0")
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs scripts/prefix-cache-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the server printed {line:?}, not its port"));
        Server { child, port }
    }

    /// Chat requests the server answered.
    fn requests(&self) -> u64 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(s, "GET /stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").expect("write");
        let mut response = String::new();
        s.read_to_string(&mut response).expect("read");
        let body = response.split("\r\n\r\n").nth(1).expect("a body");
        serde_json::from_str::<serde_json::Value>(body).expect("json")["requests"].as_u64().expect("a count")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A 30-persona, 3-tick live run with no response cache: the pilot's answers
/// are served to the run (the server sees no call twice, and the run has
/// the digest of a run without a pilot), and the bill falls inside the
/// estimate's range, within 1.5x of its expected figure, in money and in
/// tokens.
#[test]
fn a_live_runs_estimate_brackets_its_bill_and_the_pilot_is_not_paid_twice() {
    let dir = scratch("estimate-live");
    let server = Server::start(&["--reply-tokens", "60"]);
    let config = |server: &Server| {
        format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"http://127.0.0.1:{}/v1\"\napi_key_env = \"\"\n\
             [prices.models.\"loopback-model\"]\ninput_usd_per_mtok = 0.15\noutput_usd_per_mtok = 0.60\ncached_input_usd_per_mtok = 0.075\n",
            server.port
        )
    };
    std::fs::write(dir.join("live.toml"), config(&server)).expect("write");
    let args = ["run", "--personas", "30", "--ticks", "3", "--no-cache", "--yes", "--json"];
    let piloted = sim(&dir, &[&args[..], &["--config", "live.toml", "--out", "a"]].concat());
    assert!(piloted.status.success(), "{}", stderr(&piloted));
    let err = stderr(&piloted);
    assert!(
        err.contains("estimate (configured chat price): about") && err.contains("(a pilot of 3 jobs made 3 of them"),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_slice(&piloted.stdout).expect("summary");
    // Every call the run recorded, and the connection check: the pilot's
    // three jobs were asked once.
    assert_eq!(server.requests(), s["chat"]["attempts"].as_u64().expect("attempts") + 1);
    let e = &s["estimate"];
    let bill = s["cost"]["provider_total_usd"].as_f64().expect("bill");
    let [low, expected, high] = ["low_usd", "expected_usd", "high_usd"].map(|k| e[k].as_f64().expect(k));
    assert!(low <= bill && bill <= high, "bill {bill} outside [{low}, {high}]: {e:#}");
    assert!(expected / bill < 1.5 && bill / expected < 1.5, "expected {expected} against bill {bill}: {e:#}");
    let tokens =
        (s["tokens"]["chat_input"].as_u64().unwrap_or(0) + s["tokens"]["chat_output"].as_u64().unwrap_or(0)) as f64;
    let [low, expected, high] = ["low_tokens", "expected_tokens", "high_tokens"].map(|k| e[k].as_f64().expect(k));
    assert!(low <= tokens && tokens <= high, "tokens {tokens} outside [{low}, {high}]: {e:#}");
    assert!(expected / tokens < 1.5 && tokens / expected < 1.5, "expected {expected} tokens against {tokens}: {e:#}");
    assert_eq!(e["pilot"]["jobs"], 3, "{e:#}");
    assert!(e["assumptions"].as_array().is_some_and(|a| a.len() >= 4), "{e:#}");

    // Without a pilot, on a fresh server: the same run (the full digests
    // differ here, as the server's prompt cache depends on the order
    // requests arrive in; the trace tests compare them), and replies priced
    // at their cap.
    let fresh = Server::start(&["--reply-tokens", "60"]);
    std::fs::write(dir.join("fresh.toml"), config(&fresh)).expect("write");
    let plain = sim(&dir, &[&args[..], &["--config", "fresh.toml", "--out", "b", "--pilot", "0"]].concat());
    assert!(plain.status.success(), "{}", stderr(&plain));
    let p: serde_json::Value = serde_json::from_slice(&plain.stdout).expect("summary");
    assert_eq!(p["digest"], s["digest"]);
    let ceiling = p["estimate"]["expected_usd"].as_f64().expect("expected_usd");
    let piloted = e["expected_usd"].as_f64().expect("expected_usd");
    assert!(p["estimate"]["pilot"].is_null() && ceiling > piloted, "{:#}", p["estimate"]);
    assert!(stderr(&plain).contains("no pilot: replies"), "{}", stderr(&plain));
}
