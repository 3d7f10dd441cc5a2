//! A panel split into shards: shard `index` of `count` runs a contiguous
//! range of persona indices, as its own run (see docs/GUIDE.md, "Panels
//! past one machine").
//!
//! Nothing a persona draws depends on the shard: its profile, its
//! exposures and its model calls are derived from (seed, persona, tick,
//! purpose) alone, and personas never read one another. So each persona's
//! outcomes are the same in any layout, and the shards' ticks, put back
//! together in persona order, are the unsharded run's ticks (only which
//! texts one embedding call shared changes, which reaches the full digest
//! and the allocated estimates, never the digest).
//!
//! ```
//! use engine::shard::Shard;
//!
//! let s = Shard::new(1, 4).unwrap();
//! assert_eq!(s.personas(10), 2..5);
//! assert_eq!(s.dir_name(), "shard-0001-of-0004");
//! assert_eq!(Shard::parse("1/4", |_| None).unwrap().0, s);
//! // auto/N reads the index a Kubernetes Indexed Job gives each pod.
//! let env = |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| "3".to_string());
//! assert_eq!(Shard::parse("auto/4", env).unwrap(), (Shard::new(3, 4).unwrap(), Some("JOB_COMPLETION_INDEX")));
//! ```

use crate::digest::DigestWriter;
use crate::turn::TickDigests;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// The environment variables `auto/N` reads, in order: Kubernetes Indexed
/// Jobs, then Slurm job arrays.
pub const INDEX_VARIABLES: [&str; 2] = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"];

/// Why a shard is not valid: a message naming the text and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShardError(pub String);

/// The most shards a panel is split into: `merge` holds every shard's
/// trace open at once, and a process commonly may open 1,024 files.
pub const MAX_SHARDS: u32 = 1000;

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: u32,
    /// How many shards the panel is split into.
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

impl Shard {
    /// Shard `index` of `count`, or why not.
    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 || count > MAX_SHARDS {
            return Err(ShardError(format!("the shard count must be 1 to {MAX_SHARDS}, got {count}")));
        }
        if index >= count {
            let why = format!("the shard index must be 0 to {} for {count} shards, got {index}", count - 1);
            return Err(ShardError(why));
        }
        Ok(Shard { index, count })
    }

    /// Parses `I/N`, or `auto/N` with the index from the first of
    /// [`INDEX_VARIABLES`] that `env` has; returns the shard and the
    /// variable it read, if any.
    pub fn parse(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Shard, Option<&'static str>), ShardError> {
        Shard::parse_text(text, env).map_err(ShardError)
    }

    fn parse_text(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<(Shard, Option<&'static str>), String> {
        let Some((index, count)) = text.split_once('/') else {
            return Err(format!("{text:?}: expected I/N (such as 3/16) or auto/N"));
        };
        let count: u32 =
            count.trim().parse().map_err(|_| format!("{text:?}: the shard count {count:?} is not a whole number"))?;
        let (index, from) = match index.trim() {
            "auto" => {
                let found = INDEX_VARIABLES.iter().find_map(|v| env(v).map(|value| (*v, value)));
                let Some((variable, value)) = found else {
                    return Err(format!(
                        "{text:?}: auto reads the shard index from {} or {}, and neither is set",
                        INDEX_VARIABLES[0], INDEX_VARIABLES[1]
                    ));
                };
                let index = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{text:?}: {variable}={value:?} is not a whole number"))?;
                (index, Some(variable))
            }
            i => {
                (i.parse().map_err(|_| format!("{text:?}: the shard index {i:?} is not a whole number or auto"))?, None)
            }
        };
        Shard::new(index, count).map(|s| (s, from)).map_err(|e| format!("{text:?}: {}", e.0))
    }

    /// The persona indices this shard runs out of a panel of `panel`:
    /// contiguous, in order, and together the whole panel.
    pub fn personas(&self, panel: u32) -> Range<u32> {
        let at = |i: u32| (u64::from(panel) * u64::from(i) / u64::from(self.count)) as u32;
        at(self.index)..at(self.index + 1)
    }

    /// This shard's run directory name, e.g. `shard-0003-of-0016`.
    pub fn dir_name(&self) -> String {
        format!("shard-{:04}-of-{:04}", self.index, self.count)
    }

    /// This shard's share of a whole-run quantity (a rate limit, a budget):
    /// `total / count`, the remainder going one unit each to the first
    /// shards, so that the shares add up to `total`.
    pub fn share(&self, total: u64) -> u64 {
        let n = u64::from(self.count);
        total / n + u64::from(u64::from(self.index) < total % n)
    }

    /// The digests a shard's own chain starts from: the unsharded run's
    /// genesis, then the shard. A shard's digests are its own; only a
    /// merge of every shard gives the unsharded run's.
    pub fn genesis(&self, whole: TickDigests) -> TickDigests {
        let digest = DigestWriter::new("shard v1").digest(&whole.digest).u32(self.index).u32(self.count).finish();
        let full_digest = DigestWriter::new("shard full v1").digest(&whole.full_digest).digest(&digest).finish();
        TickDigests { digest, full_digest }
    }

    /// A run configuration with this shard's share of the whole run's
    /// request- and token-per-minute limits (an unlimited one stays
    /// unlimited; a share never drops below 1).
    pub fn share_rates(&self, config: &crate::config::Config) -> crate::config::Config {
        let mut c = config.clone();
        let part = |v: u64| if v == 0 { 0 } else { self.share(v).max(1) };
        let chat = &mut c.raw.chat;
        chat.requests_per_minute = part(u64::from(chat.requests_per_minute)) as u32;
        chat.tokens_per_minute = part(chat.tokens_per_minute);
        let e = &mut c.raw.embedding;
        e.requests_per_minute = part(u64::from(e.requests_per_minute)) as u32;
        e.tokens_per_minute = part(e.tokens_per_minute);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_panel_in_order_and_shares_add_up() {
        for (panel, count) in [(10, 4), (7, 7), (1_000_000, 16), (5, 3)] {
            let mut next = 0;
            let mut budget = 0;
            for i in 0..count {
                let s = Shard::new(i, count).unwrap();
                let r = s.personas(panel);
                assert_eq!(r.start, next);
                next = r.end;
                budget += s.share(1_000_003);
            }
            assert_eq!(next, panel);
            assert_eq!(budget, 1_000_003);
        }
    }

    #[test]
    fn a_shard_takes_its_share_of_the_rate_limits() {
        let mut c = crate::config::Config::defaults();
        c.raw.chat.requests_per_minute = 10;
        c.raw.chat.tokens_per_minute = 1_000_001;
        let shares: Vec<(u32, u64, u32)> = (0..4)
            .map(|i| {
                let s = Shard::new(i, 4).unwrap().share_rates(&c);
                (s.raw.chat.requests_per_minute, s.raw.chat.tokens_per_minute, s.raw.embedding.requests_per_minute)
            })
            .collect();
        // 10 = 3 + 3 + 2 + 2; unlimited (0) stays unlimited.
        assert_eq!(shares, [(3, 250_001, 0), (3, 250_000, 0), (2, 250_000, 0), (2, 250_000, 0)]);
        c.raw.chat.requests_per_minute = 2;
        assert_eq!(Shard::new(3, 4).unwrap().share_rates(&c).raw.chat.requests_per_minute, 1, "never below 1");
    }

    #[test]
    fn bad_shards_are_named() {
        let none = |_: &str| None;
        let err = |t: &str| Shard::parse(t, none).unwrap_err().0;
        assert!(err("4/4").contains("0 to 3"));
        assert!(err("0/0").contains("1 to 1000"));
        assert!(err("x/4").contains("\"x\""));
        assert!(err("3").contains("I/N"));
        let e = err("auto/4");
        assert!(e.contains("JOB_COMPLETION_INDEX") && e.contains("SLURM_ARRAY_TASK_ID"), "{e}");
        let slurm = |v: &str| (v == "SLURM_ARRAY_TASK_ID").then(|| "2".to_string());
        assert_eq!(Shard::parse("auto/4", slurm).unwrap(), (Shard { index: 2, count: 4 }, Some("SLURM_ARRAY_TASK_ID")));
        let bad = |v: &str| (v == "SLURM_ARRAY_TASK_ID").then(|| "two".to_string());
        assert!(Shard::parse("auto/4", bad).unwrap_err().0.contains("SLURM_ARRAY_TASK_ID=\"two\""));
    }
}
