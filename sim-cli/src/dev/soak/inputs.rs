//! The input campaign: seeded mutations of scenario and config files and
//! of `memory-ops.jsonl` lines (keys deleted, values of the wrong type,
//! huge numbers, NaN, unknown enum names, binary garbage, truncation,
//! repeated and swapped lines), each parsed and validated as the commands
//! do it. Every one must be a named error or valid; a panic is a failure.
//! Some valid ones are then run for real in a child process.

use super::{args, shell, Soak};
use anyhow::Result;
use engine::config::RawConfig;
use engine::maintenance::{MemoryWorld, Op};
use engine::persona::Traits;
use engine::rng::{Purpose, Stream};
use engine::scenario::{Scenario, BUILTIN};
use serde::Serialize;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

/// What the input campaign did.
#[derive(Debug, Default, Serialize)]
pub struct InputReport {
    /// Mutated inputs tried.
    pub mutated: u32,
    /// Refused with a named error.
    pub errors: u32,
    /// Accepted as valid.
    pub valid: u32,
    /// Valid ones run for real (`sim-cli run`, 3 personas, 3 ticks).
    pub ran: u32,
    /// Valid ones whose run was stopped after a minute (a per-minute limit
    /// of 1, say): slow, not broken.
    pub timed_out: u32,
    /// Panics (each is also a failure).
    pub panics: u32,
    /// Per kind of input: (kind, tried, errors).
    pub per_kind: Vec<(String, u32, u32)>,
}

/// Values a mutation puts where a value was.
const VALUES: &[&str] = &[
    "\"x\"",
    "\"not-a-known-name\"",
    "-1",
    "0",
    "-0.0",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "4294967296",
    "18446744073709551616",
    "99999999999",
    "true",
    "[]",
    "[1, \"a\"]",
    "{}",
    "\"\"",
    "null",
    "NaN",
];

/// One seeded mutation of `text`, whose values follow `sep` (`=` in TOML,
/// `:` in JSON).
fn mutate(text: &str, sep: char, r: &mut Stream) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    match r.below(8) {
        0 => {
            lines.remove(r.below(n));
        }
        1 | 2 => {
            // A value replaced: after a separator, up to the end of the line
            // (TOML) or the next delimiter (JSON).
            let i = r.below(n);
            let line = &lines[i];
            let seps: Vec<usize> = line.match_indices(sep).map(|(p, _)| p).collect();
            if let Some(&p) = seps.get(r.below(seps.len().max(1))) {
                let rest = &line[p + 1..];
                let end = if sep == ':' { rest.find([',', '}']).unwrap_or(rest.len()) } else { rest.len() };
                lines[i] = format!("{}{} {}{}", &line[..p], sep, r.pick(VALUES), &rest[end..]);
            }
        }
        3 => {
            // Binary garbage spliced in, read as a lossy text (a file that is
            // not UTF-8 at all is refused by the reader before parsing).
            let i = r.below(n);
            let garbage: Vec<u8> = (0..1 + r.below(12)).map(|_| r.below(256) as u8).collect();
            let at = r.below(lines[i].len() + 1);
            let at = (0..=at).rev().find(|&k| lines[i].is_char_boundary(k)).unwrap_or(0);
            lines[i].insert_str(at, &String::from_utf8_lossy(&garbage));
        }
        4 => {
            let i = r.below(n);
            let line = lines[i].clone();
            lines.insert(i, line);
        }
        5 => {
            let (i, j) = (r.below(n), r.below(n));
            lines.swap(i, j);
        }
        6 => {
            let keep = r.below(text.len() + 1);
            let keep = (0..=keep).rev().find(|&k| text.is_char_boundary(k)).unwrap_or(0);
            return text[..keep].to_string();
        }
        _ => {
            // A number made huge or negative in place.
            let i = r.below(n);
            let digits: Vec<usize> = lines[i].match_indices(|c: char| c.is_ascii_digit()).map(|(p, _)| p).collect();
            if let Some(&p) = digits.get(r.below(digits.len().max(1))) {
                lines[i].insert_str(p, if r.below(2) == 0 { "-" } else { "9999999999" });
            }
        }
    }
    lines.join("\n")
}

/// Memory operations as a run directory's log holds them.
fn op_lines() -> Vec<String> {
    use engine::clock::SimTime;
    use engine::memory::ledger::Tier;
    let ops = [
        Op::TestCreate {
            id: "t-1".into(),
            content: "a red kettle".into(),
            energy: 2.5,
            tier: Tier::Working,
            vector: Some(vec![0.5; 4]),
            at: SimTime(3600),
        },
        Op::TestBoost { id: "t-1".into(), amount: 1.0, at: SimTime(7200) },
        Op::TestDelete { id: Some("t-1".into()), at: SimTime(7300) },
        Op::TestScenario { name: "decay".into(), vectors: Vec::new(), at: SimTime(10) },
        Op::ForcePromote { id: "t-1".into(), test_only: true, at: SimTime(20) },
        Op::ResetEnergy { id: "t-1".into(), energy: 0.5, test_only: false, at: SimTime(30) },
        Op::Consolidate {
            decay: true,
            promote: true,
            cluster: true,
            clean_expired: true,
            test_only: false,
            tier: None,
            at: SimTime(40),
        },
    ];
    ops.iter().filter_map(|o| serde_json::to_string(o).ok()).collect()
}

/// The outcome of one input: accepted, or refused with this error.
type Verdict = std::result::Result<(), String>;

/// Runs `f`, turning a panic into `Err(message)`.
fn guarded(f: impl FnOnce() -> Verdict, last_panic: &Mutex<String>) -> std::result::Result<Verdict, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .map_err(|_| last_panic.lock().map(|m| m.clone()).unwrap_or_else(|_| "a panic".to_string()))
}

/// `mutations` seeded mutations spread over scenarios, configs and memory
/// operations; valid scenarios and configs are run, up to 40 of each.
pub fn inputs(s: &mut Soak, first: u64, mutations: u32) -> Result<InputReport> {
    let mut rep = InputReport::default();
    let mut scenarios: Vec<String> = BUILTIN.iter().map(|(_, t)| t.to_string()).collect();
    scenarios.push(super::runs::generated_scenario(first));
    let full_config = toml::to_string(&RawConfig::default())?;
    let configs = [full_config, super::runs::fault_config(0.2, first, true, true)];
    let ops = op_lines();
    let traits = Traits::builtin();
    let rules = engine::config::Config::defaults().raw.consolidation.rules.clone();
    // Panics are caught and counted; their message is kept instead of
    // printed.
    let last_panic = Arc::new(Mutex::new(String::new()));
    let keep = last_panic.clone();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Ok(mut m) = keep.lock() {
            *m = info.to_string();
        }
    }));
    let mut r = Stream::derive(first, 0, 5, Purpose::Testing);
    let mut per = [(0u32, 0u32); 3];
    let (mut ran_scenarios, mut ran_configs) = (0, 0);
    for n in 0..mutations {
        if s.out_of_time() {
            break;
        }
        let kind = (n % 3) as usize;
        let (source, sep): (String, char) = match kind {
            0 => (r.pick(&scenarios).clone(), '='),
            1 => (r.pick(&configs).clone(), '='),
            _ => (r.pick(&ops).clone(), ':'),
        };
        let mut text = source;
        for _ in 0..1 + r.below(3) {
            text = mutate(&text, sep, &mut r);
        }
        let verdict = guarded(
            || match kind {
                0 => Scenario::from_toml(&text, "mutated scenario")
                    .and_then(|sc| sc.check_run("mutated scenario", 3, &traits.interests).map(|_| ()))
                    .map_err(|e| e.to_string()),
                1 => RawConfig::from_toml(&text, "mutated config")
                    .and_then(|c| c.resolve("mutated config"))
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                _ => serde_json::from_str::<Op>(&text).map_err(|e| e.to_string()).and_then(|op| {
                    // A world holding the test memory the operations name.
                    let mut world = MemoryWorld::default();
                    let create = serde_json::from_str::<Op>(&ops[0]).map_err(|e| e.to_string())?;
                    world.apply(&create, &rules, false).map_err(|e| e.to_string())?;
                    world.apply(&op, &rules, false).map(|_| ()).map_err(|e| e.to_string())
                }),
            },
            &last_panic,
        );
        rep.mutated += 1;
        per[kind].0 += 1;
        match verdict {
            Err(panic) => {
                rep.panics += 1;
                let file = format!("panic-{n}.{}", if kind == 2 { "jsonl" } else { "toml" });
                let _ = std::fs::write(s.path(&file), &text);
                let what = ["scenario", "config", "memory operation"][kind];
                let path = s.path(&file).display().to_string();
                let reproduce = match kind {
                    0 => shell(&args(&["run", "--personas", "3", "--ticks", "3", "--scenario", &path])),
                    1 => shell(&args(&["run", "--personas", "3", "--ticks", "3", "--config", &path])),
                    _ => format!("copy {path} to a run directory's memory-ops.jsonl, then `sim-cli memory status DIR`"),
                };
                s.fail("inputs", format!("a mutated {what} panicked: {panic}"), reproduce);
            }
            Ok(Err(_)) => {
                rep.errors += 1;
                per[kind].1 += 1;
            }
            Ok(Ok(())) => {
                rep.valid += 1;
                let budget = if kind == 0 { &mut ran_scenarios } else { &mut ran_configs };
                if kind < 2 && *budget < 40 {
                    *budget += 1;
                    run_valid(s, kind, n, &text, &mut rep)?;
                }
            }
        }
    }
    std::panic::set_hook(hook);
    rep.per_kind = ["scenario", "config", "memory operation"]
        .iter()
        .zip(per)
        .map(|(k, (tried, errors))| (k.to_string(), tried, errors))
        .collect();
    Ok(rep)
}

/// Runs a valid mutated scenario or config for real: it may fail with a
/// named error (a provider with no key, say), never panic.
fn run_valid(s: &mut Soak, kind: usize, n: u32, text: &str, rep: &mut InputReport) -> Result<()> {
    let file = format!("valid-{n}.toml");
    std::fs::write(s.path(&file), text)?;
    let out_dir = format!("valid-{n}");
    let mut a = args(&["run", "--personas", "3", "--ticks", "3", "--json", "--outcomes", "never", "--out", &out_dir]);
    a.extend([if kind == 0 { "--scenario" } else { "--config" }.to_string(), file.clone()]);
    let mut child = s.command(&a).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn()?;
    let start = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            // Valid, but slow (a per-minute limit of 1, say): not a panic.
            let _ = child.kill();
            let _ = child.wait();
            rep.timed_out += 1;
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = child.wait_with_output()?;
    rep.ran += 1;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(101) || stderr.contains("panic") {
        rep.panics += 1;
        s.fail("inputs", format!("a valid mutated input made the run panic: {}", stderr.trim()), shell(&a));
    } else if !out.status.success() && !stderr.contains("error") {
        s.fail("inputs", format!("the run failed with {} and no error message", out.status), shell(&a));
    } else {
        let _ = std::fs::remove_file(s.path(&file));
        let _ = std::fs::remove_dir_all(s.path(&out_dir));
    }
    Ok(())
}
