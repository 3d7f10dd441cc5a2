//! Running the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `sim-cli` binary, with a response cache of its own (`sim-engine/
/// responses` under a fresh `XDG_CACHE_HOME`): no command is served what
/// another kept, so every call a test counts is made. A test of the cache
/// names its directory in its config.
pub fn command() -> Command {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cache = std::env::temp_dir().join(format!("sim-cli-test-cache-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let mut command = Command::new(env!("CARGO_BIN_EXE_sim-cli"));
    command.env("XDG_CACHE_HOME", cache);
    command
}

/// Runs `sim-cli` with `args` in `dir`.
pub fn sim(dir: &std::path::Path, args: &[&str]) -> Output {
    command().args(args).current_dir(dir).output().expect("sim-cli runs")
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Chromium from Debian's package (the test command installs it), with the
/// flags this machine's closed network needs. Only `report` uses it, which
/// runs in the full build.
#[cfg(feature = "agents")]
pub fn chromium(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let profile = dir.join("chromium-profile");
    let profile = format!("--user-data-dir={}", profile.display());
    let mut all = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        profile.as_str(),
    ];
    all.extend_from_slice(args);
    std::process::Command::new("chromium")
        .args(&all)
        .current_dir(dir)
        .output()
        .expect("chromium runs (the test command installs Debian's chromium package)")
}

/// Runs `value` (a config, as TOML) with its local model's kernel level
/// (at `kernel`, a path of tables such as `["chat", "gguf"]`) set to every
/// level this CPU runs, alternating two threads and one, for `personas` x
/// `ticks`, with the environment variables candle's kernels read set at
/// `avx2`. Each run must finish every job, its summary must name the level
/// that ran under
/// `summary_key`, and `inspect` must say it; returns each level's digest.
#[cfg(feature = "agents")]
pub fn digest_on_every_kernel_level(
    dir: &std::path::Path,
    mut value: toml::Value,
    kernel: &[&str],
    summary_key: &str,
    personas: &str,
    ticks: &str,
) -> Vec<(String, String)> {
    let mut levels = vec!["auto", "portable"];
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        levels.push("avx2");
    }
    let mut digests = Vec::new();
    for (i, level) in levels.iter().enumerate() {
        let table = kernel.iter().fold(&mut value, |v, k| &mut v[*k]).as_table_mut().expect("the kernel's table");
        table.insert("kernel".into(), level.to_string().into());
        let cfg = dir.join(format!("{level}.toml"));
        std::fs::write(&cfg, toml::to_string(&value).expect("toml")).expect("write");
        let out = format!("run-{level}");
        let threads = if i % 2 == 0 { "2" } else { "1" };
        let args = ["run", "--config", cfg.to_str().expect("utf-8"), "--personas", personas, "--ticks", ticks];
        let mut command = self::command();
        command.args(args).args(["--out", &out, "--threads", threads, "--json"]).current_dir(dir);
        command.env("RAYON_NUM_THREADS", threads);
        if *level == "avx2" {
            // What candle's own kernels read: it must change nothing.
            command.env("MISTRALRS_FORCE_AVX2", "1").env("MISTRALRS_FORCE_AVXVNNI", "1");
        }
        let output = command.output().expect("sim-cli runs");
        assert!(output.status.success(), "{level}: {}", stderr(&output));
        let summary: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json on stdout");
        let jobs = personas.parse::<u64>().expect("a count") * ticks.parse::<u64>().expect("a count");
        assert_eq!(summary["jobs"]["ok"].as_u64(), Some(jobs), "{level}: {summary}");
        let ran = summary[summary_key].as_str().expect("the summary names the kernel level").to_string();
        assert!(*level == "auto" || ran == *level, "{level} ran as {ran}");
        let inspect = sim(dir, &["inspect", &out]);
        assert!(String::from_utf8_lossy(&inspect.stdout).contains(&format!("computed on the {ran} kernels")));
        digests.push((level.to_string(), summary["digest"].as_str().expect("digest").to_string()));
    }
    digests
}
