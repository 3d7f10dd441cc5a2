//! The shards campaign: per seed, a panel split into a seeded number of
//! shards (1 to 8), one shard killed at a seeded moment and its command run
//! again until it finishes, then `merge`; the merged digest must be the
//! unsharded run's.

use super::kills::{kill_at, Moment};
use super::{args, clean, digests_of, shell, summary_of, Soak};
use anyhow::Result;
use engine::rng::{Purpose, Stream};
use serde::Serialize;
use std::time::Instant;

/// What the shards campaign did.
#[derive(Debug, Default, Serialize)]
pub struct ShardsReport {
    /// Seeds (panels) split, run and merged.
    pub seeds: u32,
    /// Shard runs, first attempts.
    pub shards: u32,
    /// SIGKILLs of a shard.
    pub kills: u32,
    /// Kills that found the shard still running.
    pub mid_run: u32,
    /// Merged digests that differ from the unsharded run's.
    pub mismatches: u32,
}

/// `seeds` panels of `personas`, from seed `first` on.
pub fn shards(s: &mut Soak, first: u64, seeds: u32, personas: u32) -> Result<ShardsReport> {
    let mut rep = ShardsReport::default();
    let mut r = Stream::derive(first, 0, 4, Purpose::Testing);
    for k in 0..seeds {
        if s.out_of_time() {
            break;
        }
        let seed = (first + u64::from(k)).to_string();
        let count = 1 + r.below(8) as u32;
        let case = format!("shards-{seed}");
        std::fs::create_dir_all(s.path(&case))?;
        let base = |extra: &[&str]| {
            let mut a = args(&["run", "--json", "--outcomes", "never", "--ticks", "3", "--seed", &seed]);
            a.extend(["--personas".into(), personas.to_string(), "--trace-part-bytes".into(), "32768".into()]);
            a.extend(extra.iter().map(|x| x.to_string()));
            a
        };
        let whole = format!("{case}/whole");
        let started = Instant::now();
        let reference = summary_of(&s.sim(&base(&["--out", &whole]))?).ok().and_then(|v| digests_of(&v));
        let span = started.elapsed() / count.max(1);
        let Some(reference) = reference else {
            s.fail("shards", format!("seed {seed}: the unsharded run failed"), shell(&base(&["--out", &whole])));
            continue;
        };
        let victim = r.below(count as usize) as u32;
        let mut story = format!("seed {seed}, {count} shards");
        let mut dirs = Vec::new();
        for i in 0..count {
            let (spec, dir) = (format!("{i}/{count}"), format!("{case}/shard-{i}"));
            let a = base(&["--shard", &spec, "--out", &dir]);
            rep.shards += 1;
            if i == victim {
                let trace = s.path(&dir).join(runs::dir::TRACE);
                let moment = match r.below(2) {
                    0 => Moment::After(span.mul_f64(r.unit())),
                    _ => Moment::OnWrite(r.below(12) as u32),
                };
                rep.mid_run += u32::from(kill_at(s, &a, &trace, moment)?);
                rep.kills += 1;
                story += &format!(", shard {i} killed {moment}");
            }
            // The same command again: it resumes a killed shard, and runs
            // the others.
            if let Err(e) = summary_of(&s.sim(&a)?) {
                s.fail("shards", format!("{story}: shard {i} {e}"), shell(&a));
            }
            dirs.push(dir);
        }
        let mut m = args(&["merge", "--json", "--out"]);
        m.push(format!("{case}/merged"));
        m.extend(dirs);
        let merged = summary_of(&s.sim(&m)?);
        match merged.as_ref().ok().and_then(digests_of) {
            Some(d) if d.digest == reference.digest => clean(&s.path(&case)),
            got => {
                rep.mismatches += 1;
                let why = match (&merged, got) {
                    (Err(e), _) => format!("merge {e}"),
                    (Ok(_), d) => {
                        format!("merged to {:?}, not the unsharded {}", d.map(|d| d.digest), reference.digest)
                    }
                };
                s.fail("shards", format!("{story}: {why}"), shell(&m));
            }
        }
        rep.seeds += 1;
    }
    if rep.mid_run == 0 && rep.kills >= 3 {
        let what = "no kill landed inside a shard: the campaign proved nothing (try more --kill-personas)".to_string();
        s.fail("shards", what, format!("sim-cli soak --only shards --shard-seeds {seeds} --first-seed {first}"));
    }
    Ok(rep)
}
