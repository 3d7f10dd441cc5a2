//! One mission's record and the plain figures every part of the analysis
//! reads: the arms, a mission's measurements and spend, the means of a set
//! of missions, and a guarded ratio.

use serde::{Deserialize, Serialize};

/// A shared-context condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Treatment: every agent injects into and queries one shared field.
    Field,
    /// The third arm: one shared vector store, the field's index and
    /// retrieval without decay, reinforcement or resonance.
    Store,
    /// Control: each agent passes text messages to the next, with no
    /// vectors.
    MessagePassing,
}

impl Condition {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Condition::Field => "field",
            Condition::Store => "store",
            Condition::MessagePassing => "message_passing",
        }
    }
}

/// One mission's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Topic name.
    pub topic: String,
    /// Repetition, from 1.
    pub rep: u32,
    /// Condition.
    pub condition: Condition,
    /// The field's decay constant (`None` for message passing).
    pub lambda: Option<f64>,
    /// The mission's seed (shared by both conditions of a pair).
    pub seed: u64,
    /// Gold findings in the report over all gold findings.
    pub retention: f64,
    /// Importance-weighted rubric coverage on a 1 to 5 scale.
    pub quality: f64,
    /// Chat input + output tokens plus embedding input tokens.
    pub tokens: u64,
    /// Chat input + output tokens alone.
    #[serde(default)]
    pub chat_tokens: u64,
    /// Mission latency in milliseconds: measured (wall clock, from the
    /// mission's start to its final output) for live agents, modelled for
    /// scripted ones.
    pub latency_ms: f64,
    /// The modelled latency beside a measured one (live agents only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_latency_ms: Option<f64>,
    /// Field patterns accessed by more than one agent.
    pub cross_agent_resonance: Option<u64>,
    /// Field stability at the end.
    pub stability: Option<f64>,
    /// First phase with stability above 0.75.
    pub convergence_phase: Option<u64>,
    /// The share of the mission's queries answered by its busiest pattern
    /// (field condition): near 1 when one pattern drowns out the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_share: Option<f64>,
    /// The largest max/min effective strength ratio of any phase (field
    /// condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_strength_ratio: Option<f64>,
    /// Whether that ratio passed the field's alarm in some phase (field
    /// condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_alarm: Option<bool>,
    /// Ids of the gold findings the report carries.
    pub present: Vec<String>,
    /// Retention by key phrase or by meaning (live agents, whose prose
    /// paraphrases): see [`super::metrics::semantic_present`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_semantic: Option<f64>,
    /// The findings it counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present_semantic: Option<Vec<String>>,
    /// The final report.
    pub report: String,
    /// What the mission cost, in nano-USD through the price table.
    #[serde(default)]
    pub cost: MissionCost,
    /// The judge's score of the report (task accuracy), if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_accuracy: Option<super::judge::JudgeScore>,
}

/// One mission's spend and the field's storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissionCost {
    /// The agents' chat calls.
    pub chat_nano_usd: u64,
    /// The embedder's bill.
    pub embedding_nano_usd: u64,
    /// Both.
    pub total_nano_usd: u64,
    /// Patterns the field held at the end (field condition).
    pub field_patterns: Option<u64>,
    /// Their vectors' bytes in the flat index: patterns x dimension x 4.
    pub field_vector_bytes: Option<u64>,
}

/// Means of one condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Means {
    /// Missions.
    pub runs: usize,
    /// Mean retention.
    pub retention: f64,
    /// Mean quality.
    pub quality: f64,
    /// Mean tokens.
    pub tokens: f64,
    /// Mean latency (measured or modelled, as the runs say).
    pub latency_ms: f64,
    /// Mean semantic retention, when every run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_semantic: Option<f64>,
}

/// The means of `runs`.
pub(crate) fn means(runs: &[&RunRecord]) -> Means {
    let n = runs.len().max(1) as f64;
    Means {
        runs: runs.len(),
        retention: runs.iter().map(|r| r.retention).sum::<f64>() / n,
        quality: runs.iter().map(|r| r.quality).sum::<f64>() / n,
        tokens: runs.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
        latency_ms: runs.iter().map(|r| r.latency_ms).sum::<f64>() / n,
        retention_semantic: runs
            .iter()
            .map(|r| r.retention_semantic)
            .collect::<Option<Vec<f64>>>()
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / n),
    }
}

/// `a / b`: `f64::MAX` when only `b` is 0, 1 when both are.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else if a > 0.0 {
        f64::MAX
    } else {
        1.0
    }
}
