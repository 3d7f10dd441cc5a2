//! What the memory commands print: one serializable view per command, the
//! same value for `--json` and for the text output.

use engine::maintenance::Op;
use engine::memory::{Change, RecordId, Tier, Version};
use serde::Serialize;
use std::collections::BTreeMap;

/// Records per tier.
#[derive(Debug, Default, Serialize)]
pub(super) struct TierCounts {
    pub(super) working: u64,
    #[serde(rename = "shortTerm")]
    pub(super) short_term: u64,
    #[serde(rename = "longTerm")]
    pub(super) long_term: u64,
    pub(super) archived: u64,
    pub(super) expired: u64,
}

impl TierCounts {
    pub(super) fn get(&self, t: Tier) -> u64 {
        match t {
            Tier::Working => self.working,
            Tier::ShortTerm => self.short_term,
            Tier::LongTerm => self.long_term,
            Tier::Archived => self.archived,
            Tier::Expired => self.expired,
        }
    }

    pub(super) fn add(&mut self, t: Tier) {
        let slot = match t {
            Tier::Working => &mut self.working,
            Tier::ShortTerm => &mut self.short_term,
            Tier::LongTerm => &mut self.long_term,
            Tier::Archived => &mut self.archived,
            Tier::Expired => &mut self.expired,
        };
        *slot += 1;
    }
}

/// Energy statistics of live records.
#[derive(Debug, Serialize)]
pub(super) struct EnergyStats {
    pub(super) n: usize,
    pub(super) average: Option<f64>,
    pub(super) median: Option<f64>,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Status {
    pub(super) run: String,
    pub(super) test_only: bool,
    pub(super) tiers: TierCounts,
    pub(super) real: TierCounts,
    pub(super) test: TierCounts,
    pub(super) energy: EnergyStats,
    /// Energy of the current versions per live tier.
    pub(super) tier_stats: BTreeMap<&'static str, TierStats>,
    /// Test records over all current records (none when there are none).
    pub(super) test_ratio: Option<f64>,
}

/// Energy statistics of one tier's current versions.
#[derive(Debug, Serialize)]
pub(super) struct TierStats {
    pub(super) count: usize,
    pub(super) mean: Option<f64>,
    pub(super) median: Option<f64>,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
}

impl TierStats {
    pub(super) fn of(mut e: Vec<f64>) -> TierStats {
        e.sort_by(f64::total_cmp);
        let k = e.len();
        if k == 0 {
            return TierStats { count: 0, mean: None, median: None, min: None, max: None };
        }
        let median = if k % 2 == 1 { e[k / 2] } else { (e[k / 2 - 1] + e[k / 2]) / 2.0 };
        let mean = e.iter().sum::<f64>() / k as f64;
        TierStats { count: k, mean: Some(mean), median: Some(median), min: Some(e[0]), max: Some(e[k - 1]) }
    }
}

/// Promotion readiness of one tier.
#[derive(Debug, Serialize)]
pub(super) struct Readiness {
    pub(super) threshold: f64,
    pub(super) ready: usize,
    pub(super) not_ready: usize,
    /// Of the records not ready: the smallest and the mean energy still needed.
    pub(super) closest_gap: Option<f64>,
    pub(super) mean_gap: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Ready {
    pub(super) working: Readiness,
    #[serde(rename = "shortTerm")]
    pub(super) short_term: Readiness,
}

#[derive(Debug, Serialize)]
pub(super) struct Bucket {
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) count: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct EnergyHistogram<'a> {
    pub(super) tier: Option<&'static str>,
    /// Live memories listed.
    pub(super) count: usize,
    /// Their mean energy; none without memories.
    pub(super) average: Option<f64>,
    /// Every live memory (of the tier), with its energy and last access.
    pub(super) records: Vec<EnergyRecord<'a>>,
    pub(super) histogram: Vec<Bucket>,
}

/// One live memory in `memory energy`.
#[derive(Debug, Serialize)]
pub(super) struct EnergyRecord<'a> {
    pub(super) record: &'a RecordId,
    pub(super) owner: String,
    pub(super) tier: &'static str,
    pub(super) energy: f64,
    /// The simulated hour of its last access (whole hours).
    pub(super) last_accessed_hour: u64,
}

/// A promotion, or one blocked by the batch size, at a tick commit or in a
/// manual pass (`tick` null, `hour` set).
#[derive(Debug, Serialize)]
pub(super) struct PromotionEvent<'a> {
    pub(super) tick: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) hour: Option<f64>,
    pub(super) persona: String,
    pub(super) record: &'a RecordId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) to: Option<&'static str>,
    /// The node the promotion made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) node: Option<RecordId>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) blocked: bool,
    pub(super) energy: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct Promotions<'a> {
    pub(super) from_tick: u32,
    pub(super) to_tick: u32,
    /// The window in whole simulated hours, `[from, to]`, unless
    /// `--last-ticks` chose ticks instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) hours: Option<[u64; 2]>,
    pub(super) promoted: usize,
    pub(super) blocked: usize,
    /// Promoted over ready (promoted and blocked); none when nothing was ready.
    pub(super) success_rate: Option<f64>,
    pub(super) events: Vec<PromotionEvent<'a>>,
}

#[derive(Debug, Serialize)]
pub(super) struct AtCommit {
    pub(super) enabled: bool,
    pub(super) dry_run: bool,
    pub(super) last_tick: Option<u32>,
}

#[derive(Debug, Serialize)]
pub(super) struct HealthErrors<'a> {
    pub(super) failed_jobs: usize,
    pub(super) ops_log_lines_rejected: usize,
    pub(super) consolidation_errors: usize,
    pub(super) details: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
pub(super) struct Health<'a> {
    pub(super) config: &'a engine::config::ConsolidationSection,
    pub(super) consolidation_at_commit: AtCommit,
    pub(super) operations_last_ran_at_hour: &'a BTreeMap<&'static str, f64>,
    pub(super) errors: HealthErrors<'a>,
    pub(super) ops_log: String,
}

#[derive(Debug, Serialize)]
pub(super) struct RecordView<'a> {
    pub(super) id: &'a RecordId,
    pub(super) owner: &'a str,
    pub(super) description: Option<String>,
    pub(super) kind: Option<engine::persona::MemoryKind>,
    pub(super) tick: Option<u32>,
    pub(super) importance: Option<u8>,
    /// The node of the lineage that is current, if any.
    pub(super) current: Option<&'a RecordId>,
    /// Every version of every node of the lineage, oldest first.
    pub(super) versions: &'a [&'a Version],
    /// The plan's `PROMOTED_TO` links, oldest first.
    pub(super) promoted_to: Vec<PromotionLink<'a>>,
    pub(super) cluster_links: Vec<&'a RecordId>,
}

/// A promotion: the node closed, the node made, when and at what energy
/// (the plan's `(m)-[:PROMOTED_TO {at, energy}]->(promoted)`).
#[derive(Debug, Serialize)]
pub(super) struct PromotionLink<'a> {
    pub(super) from: &'a RecordId,
    pub(super) to: &'a RecordId,
    pub(super) at_hour: u64,
    pub(super) energy: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct Predicted<'a> {
    pub(super) record: &'a RecordId,
    pub(super) owner: String,
    pub(super) tier: &'static str,
    pub(super) energy: f64,
    /// Whole simulated hours from its last access to the predicted hour.
    pub(super) hours_since_access: u64,
    pub(super) predicted: f64,
    pub(super) prediction: &'static str,
}

#[derive(Debug, Serialize)]
pub(super) struct Prediction<'a> {
    /// Hours past the run's end.
    pub(super) hours_ahead: u32,
    /// The simulated hour predicted for: the run's end plus `hours_ahead`.
    pub(super) at_hour: u64,
    pub(super) will_expire: usize,
    pub(super) will_survive: usize,
    pub(super) records: Vec<Predicted<'a>>,
}

#[derive(Debug, Serialize)]
pub(super) struct OwnedChange<'a> {
    pub(super) owner: &'a str,
    pub(super) change: &'a Change,
    /// For a promotion, the new node it made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) node: Option<RecordId>,
}

#[derive(Debug, Serialize)]
pub(super) struct Operated<'a> {
    pub(super) op: &'a Op,
    pub(super) dry_run: bool,
    pub(super) changes: Vec<OwnedChange<'a>>,
}

#[derive(Debug, Serialize)]
pub(super) struct TestMemory<'a> {
    pub(super) id: &'a RecordId,
    pub(super) tier: &'static str,
    pub(super) energy: f64,
    pub(super) content: Option<&'a String>,
}

#[derive(Debug, Serialize)]
pub(super) struct TestMemories<'a> {
    pub(super) test_memories: Vec<TestMemory<'a>>,
}
