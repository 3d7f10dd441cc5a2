//! `sim-cli check-determinism`: the same run twice, at 1 thread and at the
//! machine's thread count (at least 2), in child processes of this binary;
//! `ok`, or the first place the two traces differ.

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;

/// Options of `sim-cli check-determinism`.
#[derive(Debug, Args)]
#[command(
    after_help = "Every argument after the options is passed to `sim-cli run` (not --out, --threads or --resume).\n\
    Both runs are written under --keep DIR when given (as DIR/threads-1 and DIR/threads-N), otherwise to\n\
    a temporary directory deleted afterwards. Exits non-zero on a divergence.\n\n\
    Examples:\n  \
    sim-cli check-determinism --scenario my.toml --personas 200 --ticks 4\n  \
    sim-cli check-determinism --threads 8 --config c.toml --seed 7 --json"
)]
pub struct CheckArgs {
    /// Threads of the second run. Default: one per core, at least 2.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub threads: Option<u32>,
    /// Keep both runs in this (new or empty) directory.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print the verdict as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// The flags of `sim-cli run`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "RUN FLAGS")]
    pub run: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Verdict {
    ok: bool,
    threads: [u32; 2],
    digest: Option<String>,
    full_digest: Option<String>,
    divergence: Option<String>,
}

/// Runs `sim-cli check-determinism`.
pub fn check(a: CheckArgs) -> Result<()> {
    if let Some(bad) = a.run.iter().find(|f| ["--out", "--threads", "--resume"].iter().any(|o| f.starts_with(o))) {
        bail!("{bad}: check-determinism chooses where and on how many threads the two runs go; leave it out");
    }
    // `--json` after the run flags is still this command's.
    let json = a.json || a.run.iter().any(|f| f == "--json");
    let run: Vec<&String> = a.run.iter().filter(|f| *f != "--json").collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    let threads = a.threads.unwrap_or(cores.max(2));
    let (root, temporary) = match &a.keep {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("sim-check-{}", std::process::id())), true),
    };
    if root.exists() && std::fs::read_dir(&root).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("--keep {}: exists and is not empty", root.display());
    }
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let exe = std::env::current_exe().context("cannot find this program's own binary")?;
    let mut digests = Vec::new();
    for t in [1, threads] {
        let dir = root.join(format!("threads-{t}"));
        let out = Command::new(&exe)
            .arg("--quiet")
            .arg("run")
            .args(&run)
            .args(["--json", "--threads", &t.to_string(), "--out"])
            .arg(&dir)
            .output()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        if !out.status.success() {
            bail!("the run at {t} thread(s) failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("the run printed no JSON summary")?;
        let get = |k: &str| v[k].as_str().map(str::to_string);
        digests.push((get("digest"), get("full_digest")));
    }
    let divergence = if digests[0] == digests[1] && digests[0].0.is_some() {
        None
    } else {
        let (one, two) = (root.join("threads-1/trace.bin"), root.join(format!("threads-{threads}/trace.bin")));
        let names = ("1-thread", &*format!("{threads}-thread"));
        Some(match actors::replay::first_divergence(&one, &two, names)? {
            Some(d) => d.to_string(),
            None => "the summaries' digests differ, but every recorded tick agrees".into(),
        })
    };
    let v = Verdict {
        ok: divergence.is_none(),
        threads: [1, threads],
        digest: digests[0].0.clone(),
        full_digest: digests[0].1.clone(),
        divergence: divergence.clone(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if v.ok {
        println!("ok: 1 and {threads} threads give digest {}", v.digest.as_deref().unwrap_or("?"));
    }
    if temporary && v.ok {
        let _ = std::fs::remove_dir_all(&root);
    }
    match divergence {
        None => Ok(()),
        Some(d) => bail!("not deterministic: {d} (both runs are kept in {})", root.display()),
    }
}
