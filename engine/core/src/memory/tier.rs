//! Tiers (working, short-term, long-term, archived, expired) and the
//! thresholds and rates that move records between them
//! (`[consolidation.rules]`), from the consolidation plan.

use serde::{Deserialize, Serialize};

/// A record's tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "camelCase")]
pub enum Tier {
    /// Fresh; decays fast.
    Working,
    /// Promoted once.
    ShortTerm,
    /// Promoted twice; decays slowly.
    LongTerm,
    /// A version closed by promotion.
    Archived,
    /// A record whose energy fell below the expiry threshold.
    Expired,
}

impl Tier {
    /// The code this value has in a digest. Explicit, so that reordering or
    /// adding variants never moves an existing digest.
    pub fn digest_code(self) -> u8 {
        match self {
            Tier::Working => 0,
            Tier::ShortTerm => 1,
            Tier::LongTerm => 2,
            Tier::Archived => 3,
            Tier::Expired => 4,
        }
    }
}

impl Tier {
    /// The name used in commands and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Working => "working",
            Tier::ShortTerm => "shortTerm",
            Tier::LongTerm => "longTerm",
            Tier::Archived => "archived",
            Tier::Expired => "expired",
        }
    }

    /// Parses a tier name.
    pub fn parse(s: &str) -> Option<Tier> {
        [Tier::Working, Tier::ShortTerm, Tier::LongTerm, Tier::Archived, Tier::Expired]
            .into_iter()
            .find(|t| t.as_str() == s)
    }

    /// Whether records in this tier still live (decay, promote, expire).
    pub fn live(self) -> bool {
        matches!(self, Tier::Working | Tier::ShortTerm | Tier::LongTerm)
    }
}

/// Thresholds and rates. The defaults are the source plan's, except the
/// long-term decay rate, which the plan does not give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsolidationConfig {
    /// Working records above this energy promote to short-term. Default 2.0.
    pub working_to_short: f64,
    /// Short-term records above this energy promote to long-term. Default 5.0.
    pub short_to_long: f64,
    /// Working decay constant per simulated hour. Default 0.5.
    pub working_decay: f64,
    /// Short-term decay constant per hour. Default 0.05.
    pub short_term_decay: f64,
    /// Long-term decay constant per hour. Default 0.005: a tenth of the
    /// short-term rate, continuing the plan's tenfold step from working to
    /// short-term, so a long-term record at the promotion energy of 5.0
    /// stays above the 0.1 expiry for about 32 simulated days unaccessed.
    pub long_term_decay: f64,
    /// Records below this energy expire. Default 0.1.
    pub expire_below: f64,
    /// Most promotions per run. Default 10.
    pub promotion_batch_size: usize,
    /// Energy an access adds. Default 1.0.
    pub access_boost: f64,
    /// Energy of a new record. Default 1.0.
    pub initial_energy: f64,
    /// At a session boundary, working records above this are queued for
    /// promotion. Default 1.5.
    pub session_threshold: f64,
    /// Co-activations that make a cluster candidate. Default 3.
    pub coactivation_threshold: u32,
    /// Cosine similarity a cluster needs. Default 0.7.
    pub similarity_threshold: f64,
    /// Simulated seconds between promotion passes at tick commits: a commit
    /// runs one only when this much time has passed since the last. Default
    /// 600, the plan's ten minutes (with one-hour ticks, every commit).
    pub promotion_interval_seconds: u64,
}

impl Default for ConsolidationConfig {
    fn default() -> Self {
        ConsolidationConfig {
            working_to_short: 2.0,
            short_to_long: 5.0,
            working_decay: 0.5,
            short_term_decay: 0.05,
            long_term_decay: 0.005,
            expire_below: 0.1,
            promotion_batch_size: 10,
            access_boost: 1.0,
            initial_energy: 1.0,
            session_threshold: 1.5,
            coactivation_threshold: 3,
            similarity_threshold: 0.7,
            promotion_interval_seconds: 600,
        }
    }
}

impl ConsolidationConfig {
    /// The decay constant of a tier (zero for closed tiers).
    pub fn decay_rate(&self, tier: Tier) -> f64 {
        match tier {
            Tier::Working => self.working_decay,
            Tier::ShortTerm => self.short_term_decay,
            Tier::LongTerm => self.long_term_decay,
            Tier::Archived | Tier::Expired => 0.0,
        }
    }
}
