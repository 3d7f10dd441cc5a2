//! The kill and full-disk campaigns: runs stopped the hard way, then
//! resumed; what they committed must survive, and the resumed run must end
//! with the uninterrupted run's digests.

use super::{args, clean, digests_of, shell, summary_of, Digests, Soak};
use anyhow::{Context, Result};
use engine::rng::{Purpose, Stream};
use engine::store::trace::file::read_trace_file;
use engine::turn::TickDigests;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// Parts of at most this many bytes: a tick of a few hundred personas is
/// then dozens of frames, so kills land between the frames of one tick.
const PART_BYTES: &str = "32768";

/// What the kill campaign did.
#[derive(Debug, Default, Serialize)]
pub struct KillReport {
    /// SIGKILLs sent (runs and resumes).
    pub kills: u32,
    /// Kills that found the run between its header and its end (a tick in
    /// progress).
    pub mid_tick: u32,
    /// Kills that left a torn frame or a tick's parts with no commit frame.
    pub mid_frame: u32,
    /// Kills of a `--resume`.
    pub during_resume: u32,
    /// Kills that came after the run had finished (they prove nothing).
    pub after_finish: u32,
    /// Torn tails (or uncommitted parts) a finishing resume found.
    pub tails_seen: u32,
    /// Those it cut off and kept beside the trace.
    pub tails_kept: u32,
    /// Committed ticks a kill lost or changed.
    pub lost_committed_ticks: u32,
    /// Killed cases whose final digests differ from the uninterrupted run's.
    pub digest_mismatches: u32,
}

/// The state of a killed run directory, from its trace.
struct Killed {
    committed: usize,
    finished: bool,
    tail: Option<u64>,
}

fn inspect(trace: &Path, reference: &[TickDigests]) -> Result<(Killed, bool)> {
    let read = read_trace_file(trace, true)?;
    let intact = read.ticks.iter().zip(reference).all(|(t, r)| t.digests == *r)
        && read.ticks.iter().enumerate().all(|(i, t)| t.tick as usize == i + 1);
    let tail = read.tail.as_ref().map(|_| read.valid_len);
    Ok((Killed { committed: read.ticks.len(), finished: read.end.is_some(), tail }, intact))
}

/// The digests of each committed tick of a finished run's trace.
fn tick_digests(trace: &Path) -> Result<Vec<TickDigests>> {
    Ok(read_trace_file(trace, false)?.ticks.iter().map(|t| t.digests).collect())
}

/// Waits until `cond` holds, at most `limit`.
fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// When a kill lands.
#[derive(Debug, Clone, Copy)]
pub(super) enum Moment {
    /// This long after the trace appeared.
    After(Duration),
    /// As soon as the trace has grown this many times (plus one) since it
    /// appeared: inside the writing of a tick's frames, usually.
    OnWrite(u32),
}

impl std::fmt::Display for Moment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Moment::After(d) => write!(f, "{d:?} after the trace appeared"),
            Moment::OnWrite(n) => write!(f, "at trace write {}", n + 1),
        }
    }
}

/// Starts `a`, waits for the trace to exist, then kills it at `moment`.
/// Returns false when the process had already exited.
pub(super) fn kill_at(s: &Soak, a: &[String], trace: &Path, moment: Moment) -> Result<bool> {
    let mut child = s.command(a).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn()?;
    wait_for(Duration::from_secs(120), || trace.exists());
    match moment {
        Moment::After(d) => std::thread::sleep(d),
        Moment::OnWrite(n) => {
            let len = || std::fs::metadata(trace).map_or(0, |m| m.len());
            let mut last = len();
            for _ in 0..=n {
                // Watch without sleeping: a tick's parts go out in a few
                // milliseconds.
                let deadline = Instant::now() + Duration::from_secs(120);
                while len() == last && Instant::now() < deadline && child.try_wait()?.is_none() {
                    std::hint::spin_loop();
                }
                last = len();
            }
        }
    }
    let running = child.try_wait()?.is_none();
    let _ = child.kill();
    let _ = child.wait();
    Ok(running)
}

/// `kills` SIGKILLs: each case kills a run at a seeded moment, then
/// resumes it, killing a third of the resumes too, until it finishes.
pub fn kills(s: &mut Soak, first: u64, kills: u32, personas: u32) -> Result<KillReport> {
    let mut rep = KillReport::default();
    if kills == 0 {
        return Ok(rep);
    }
    let run = |out: &str| {
        let mut a = args(&["run", "--json", "--outcomes", "never", "--ticks", "5", "--trace-part-bytes", PART_BYTES]);
        a.extend(["--personas".into(), personas.to_string(), "--seed".into(), first.to_string()]);
        a.extend(["--out".into(), out.to_string()]);
        a
    };
    // The uninterrupted run, timed from its trace's appearance to its end.
    let child = s.command(&run("kill-reference")).stdout(std::process::Stdio::piped()).spawn()?;
    let trace = s.path("kill-reference").join(runs::dir::TRACE);
    wait_for(Duration::from_secs(120), || trace.exists());
    let started = Instant::now();
    let out = child.wait_with_output()?;
    let span = started.elapsed();
    let expected = summary_of(&out).ok().and_then(|v| digests_of(&v)).context("the uninterrupted run failed")?;
    let reference = tick_digests(&trace)?;
    let mut r = Stream::derive(first, 0, 3, Purpose::Testing);
    let mut case = 0;
    while rep.kills < kills && !s.out_of_time() {
        let dir = format!("killed-{case}");
        let a = run(&dir);
        let trace = s.path(&dir).join(runs::dir::TRACE);
        let moment = match r.below(2) {
            0 => Moment::After(span.mul_f64(r.unit() * 1.1)),
            _ => Moment::OnWrite(r.below(40) as u32),
        };
        let running = kill_at(s, &a, &trace, moment)?;
        rep.kills += 1;
        let (mut state, intact) = match inspect(&trace, &reference) {
            Ok(read) => read,
            Err(e) => {
                s.fail("kills", format!("case {case}: killed {moment}, the trace does not read back: {e}"), shell(&a));
                case += 1;
                continue;
            }
        };
        count(&mut rep, &state, running, intact);
        let mut story = format!("case {case}: killed {moment}");
        let mut rounds = 0;
        let resume = args(&["run", "--resume", &dir, "--json", "--trace-part-bytes", PART_BYTES]);
        let summary = loop {
            rounds += 1;
            let before = state.committed;
            if !state.finished && rounds < 4 && rep.kills < kills && r.below(3) == 0 {
                let moment = match r.below(2) {
                    0 => Moment::After(span.mul_f64(r.unit() * 0.8)),
                    _ => Moment::OnWrite(r.below(20) as u32),
                };
                let running = kill_at(s, &resume, &trace, moment)?;
                rep.kills += 1;
                rep.during_resume += 1;
                story += &format!(", its resume killed {moment}");
                let Ok((next, intact)) = inspect(&trace, &reference) else {
                    break Err(format!("left a trace that does not read back ({story})"));
                };
                count(&mut rep, &next, running, intact && next.committed >= before);
                state = next;
                continue;
            }
            let out = s.sim(&resume)?;
            if let Some(t) = state.tail {
                rep.tails_seen += 1;
                rep.tails_kept += u32::from(kept(&trace, t));
            }
            break summary_of(&out);
        };
        let got = summary.as_ref().ok().and_then(digests_of);
        if got.as_ref() != Some(&expected) {
            rep.digest_mismatches += 1;
            let why = match summary {
                Err(e) => format!("the last resume {e}"),
                Ok(_) => format!("resumed to {}, not {}", show(&got), show(&Some(expected.clone()))),
            };
            s.fail("kills", format!("{story}: {why} (kill seed {first})"), shell(&resume));
        } else {
            clean(&s.path(&dir));
        }
        case += 1;
    }
    if rep.lost_committed_ticks > 0 {
        let what = format!("{} kills lost or changed committed ticks (kill seed {first})", rep.lost_committed_ticks);
        s.fail("kills", what, format!("sim-cli soak --only kills --kills {kills} --first-seed {first}"));
    }
    if rep.tails_kept < rep.tails_seen {
        let what = format!(
            "{} of {} torn tails were not kept beside the trace",
            rep.tails_seen - rep.tails_kept,
            rep.tails_seen
        );
        s.fail("kills", what, format!("sim-cli soak --only kills --kills {kills} --first-seed {first}"));
    }
    if rep.mid_tick == 0 && kills >= 3 {
        let what = "no kill landed inside a run: the campaign proved nothing (try more --kill-personas)".to_string();
        s.fail("kills", what, format!("sim-cli soak --only kills --kills {kills} --first-seed {first}"));
    }
    clean(&s.path("kill-reference"));
    Ok(rep)
}

fn count(rep: &mut KillReport, state: &Killed, running: bool, intact: bool) {
    if !running || state.finished {
        rep.after_finish += 1;
    } else {
        rep.mid_tick += 1;
    }
    rep.mid_frame += u32::from(state.tail.is_some());
    rep.lost_committed_ticks += u32::from(!intact);
}

/// Whether a resume kept the bytes after `offset` beside the trace.
fn kept(trace: &Path, offset: u64) -> bool {
    trace.with_extension(format!("bin.torn-{offset}")).exists()
}

fn show(d: &Option<Digests>) -> String {
    d.as_ref().map_or("nothing".into(), |d| format!("digest {}…/{}…", &d.digest[..12], &d.full_digest[..12]))
}

/// One full disk.
#[derive(Debug, Default, Serialize)]
pub struct DiskCase {
    /// `injected` (a writer that fails after N bytes) or `tmpfs`.
    pub how: String,
    /// The trace length at which the disk was full.
    pub at_bytes: u64,
    /// The run's error.
    pub error: String,
    /// Committed ticks that survived.
    pub kept_ticks: u32,
    /// The resume after freeing space ended with the uninterrupted digests.
    pub resumed: bool,
    /// Every check passed.
    pub ok: bool,
}

/// What the full-disk campaign did.
#[derive(Debug, Default, Serialize)]
pub struct DiskReport {
    /// The cases.
    pub cases: Vec<DiskCase>,
    /// Why no real small filesystem was tried, if it was not.
    pub tmpfs_skipped: Option<String>,
}

/// A disk that fills up: three injected cut points, and a real tmpfs when
/// this process may mount one.
pub fn disk(s: &mut Soak, first: u64) -> Result<DiskReport> {
    let mut rep = DiskReport::default();
    let run = |out: &str| {
        let mut a = args(&["run", "--json", "--outcomes", "never", "--personas", "60", "--ticks", "4"]);
        a.extend(["--seed".into(), first.to_string(), "--out".into(), out.to_string()]);
        a
    };
    let out = s.sim(&run("disk-reference"))?;
    let expected = summary_of(&out).ok().and_then(|v| digests_of(&v)).context("the uninterrupted run failed")?;
    let trace = s.path("disk-reference").join(runs::dir::TRACE);
    let full = std::fs::metadata(&trace)?.len();
    let reference = tick_digests(&trace)?;
    let mut r = Stream::derive(first, 0, 4, Purpose::Testing);
    for n in 0..3 {
        let at = (full as f64 * (0.2 + 0.7 * r.unit())) as u64;
        let dir = format!("disk-{n}");
        let mut a = run(&dir);
        a.extend(["--trace-disk-full-at".into(), at.to_string()]);
        let case = full_disk(s, "injected", &a, &dir, at, &reference, &expected)?;
        rep.cases.push(case);
    }
    match tmpfs(s, &run, &reference, &expected, full) {
        Ok(case) => rep.cases.push(case),
        Err(why) => rep.tmpfs_skipped = Some(format!("{why:#}")),
    }
    clean(&s.path("disk-reference"));
    Ok(rep)
}

/// Runs `a` (which must fail for want of space), checks the error and the
/// prefix, then resumes without the limit.
fn full_disk(
    s: &mut Soak,
    how: &str,
    a: &[String],
    dir: &str,
    at: u64,
    reference: &[TickDigests],
    expected: &Digests,
) -> Result<DiskCase> {
    let out = s.sim(a)?;
    let error = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let mut case = DiskCase { how: how.into(), at_bytes: at, error: error.clone(), ..Default::default() };
    let mut problems = Vec::new();
    if out.status.success() || out.status.code() == Some(101) || error.contains("panic") {
        problems.push(format!("the run exited with {} ({error})", out.status));
    }
    if !(error.contains(runs::dir::TRACE) && error.contains("No space left on device")) {
        problems.push(format!("the error does not name the file and the cause: {error}"));
    }
    let trace = s.path(dir).join(runs::dir::TRACE);
    match inspect(&trace, reference) {
        Ok((state, intact)) => {
            case.kept_ticks = state.committed as u32;
            if !intact {
                problems.push("the trace is not a prefix of the uninterrupted run".into());
            }
        }
        Err(e) => problems.push(format!("the trace does not read back: {e}")),
    }
    let resume = args(&["run", "--resume", dir, "--json"]);
    let resumed = s.sim(&resume)?;
    case.resumed = summary_of(&resumed).ok().and_then(|v| digests_of(&v)).as_ref() == Some(expected);
    if !case.resumed {
        problems.push(format!(
            "the resume did not end with the uninterrupted digests: {}",
            String::from_utf8_lossy(&resumed.stderr).trim()
        ));
    }
    case.ok = problems.is_empty();
    for p in problems {
        s.fail("disk", format!("{how} full disk at {at} bytes: {p}"), shell(a));
    }
    if case.ok {
        clean(&s.path(dir));
    }
    Ok(case)
}

/// The same on a real tmpfs of half the trace's size, grown after the
/// failure; needs the right to mount (root outside a sandbox).
fn tmpfs(
    s: &mut Soak,
    run: &dyn Fn(&str) -> Vec<String>,
    reference: &[TickDigests],
    expected: &Digests,
    full: u64,
) -> Result<DiskCase> {
    let mount = s.path("tmpfs");
    std::fs::create_dir_all(&mount)?;
    let size = (full / 2).div_ceil(4096) * 4096;
    let sh = |args: &[&str]| -> Result<()> {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .with_context(|| format!("cannot run {}", args[0]))?;
        anyhow::ensure!(
            out.status.success(),
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    };
    let m = mount.display().to_string();
    sh(&["mount", "-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", &m])?;
    let result = (|| {
        let dir = "tmpfs/run";
        let a = run(dir);
        let out = s.sim(&a)?;
        anyhow::ensure!(!out.status.success(), "the run on a {size}-byte tmpfs finished: the disk never filled");
        let error = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let (state, intact) = inspect(&s.path(dir).join(runs::dir::TRACE), reference)?;
        sh(&["mount", "-o", &format!("remount,size={}", full * 4), &m])?;
        let resume = args(&["run", "--resume", dir, "--json"]);
        let resumed = s.sim(&resume)?;
        let ok_resume = summary_of(&resumed).ok().and_then(|v| digests_of(&v)).as_ref() == Some(expected);
        let named = error.contains(runs::dir::TRACE) || error.contains(dir);
        let ok = intact && ok_resume && named && error.contains("No space left on device") && !error.contains("panic");
        if !ok {
            s.fail(
                "disk",
                format!("tmpfs of {size} bytes: error {error:?}, prefix intact {intact}, resume matches {ok_resume}"),
                shell(&a),
            );
        }
        Ok(DiskCase {
            how: "tmpfs".into(),
            at_bytes: size,
            error,
            kept_ticks: state.committed as u32,
            resumed: ok_resume,
            ok,
        })
    })();
    let _ = sh(&["umount", &m]);
    result
}
