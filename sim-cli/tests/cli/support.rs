//! Running the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `sim-cli` with `args` in `dir`.
pub fn sim(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sim-cli")).args(args).current_dir(dir).output().expect("sim-cli runs")
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
