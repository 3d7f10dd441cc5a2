//! The topic as the unit of analysis: each topic's means arm by arm (its
//! repetitions averaged), the three arms compared on retention with the
//! one-sided test, and the token ratios over message passing.

use super::record::{means, ratio, Condition, Means, RunRecord};
use super::stats::{one_sided, OneSided};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One topic's means, arm by arm (its repetitions averaged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicRow {
    /// The topic.
    pub topic: String,
    /// Repetitions averaged.
    pub reps: usize,
    /// Field (at the main lambda), store and message passing, by arm name.
    pub arms: BTreeMap<String, Means>,
}

/// One arm against another on retention, over topics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Mean retention of the first arm over that of the second.
    pub retention_ratio: f64,
    /// The difference tested per topic.
    pub difference: String,
    /// Its one-sided test (H1: median above 0).
    pub one_sided: OneSided,
}

/// Token ratios of an arm's totals over message passing's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRatio {
    /// Chat tokens only.
    pub chat_only: f64,
    /// Chat and embedding tokens (the criterion's figure).
    pub total: f64,
}

/// The missions of one arm, by topic name: the field at `lambda`, or the
/// store or message passing.
fn by_topic(records: &[RunRecord], arm: Condition, lambda: f64) -> BTreeMap<&str, Vec<&RunRecord>> {
    let mut out: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.condition == arm) {
        if arm != Condition::Field || r.lambda == Some(lambda) {
            out.entry(r.topic.as_str()).or_default().push(r);
        }
    }
    out
}

/// Topic names in the order they first appear in `records`.
fn topic_order(records: &[RunRecord]) -> Vec<&str> {
    let mut seen = Vec::new();
    for r in records {
        if !seen.contains(&r.topic.as_str()) {
            seen.push(r.topic.as_str());
        }
    }
    seen
}

/// The per-topic means of the arms, for the topics that have a field (at
/// `lambda`) and a message-passing mission.
pub fn topic_rows(records: &[RunRecord], lambda: f64) -> Vec<TopicRow> {
    let arms =
        [Condition::Field, Condition::Store, Condition::MessagePassing].map(|c| (c, by_topic(records, c, lambda)));
    topic_order(records)
        .into_iter()
        .filter(|t| arms[0].1.contains_key(t) && arms[2].1.contains_key(t))
        .map(|t| TopicRow {
            topic: t.to_string(),
            reps: arms[0].1[t].len(),
            arms: arms.iter().filter_map(|(c, m)| Some((c.name().to_string(), means(m.get(t)?)))).collect(),
        })
        .collect()
}

/// Per topic, `f(first arm's means, second's)`, for the topics with both.
pub(crate) fn diffs(rows: &[TopicRow], a: Condition, b: Condition, f: impl Fn(&Means, &Means) -> f64) -> Vec<f64> {
    rows.iter().filter_map(|r| Some(f(r.arms.get(a.name())?, r.arms.get(b.name())?))).collect()
}

/// The retention a criterion uses: semantic when every mission has it.
pub(crate) fn retention_of(m: &Means, semantic: bool) -> f64 {
    if semantic {
        m.retention_semantic.unwrap_or(0.0)
    } else {
        m.retention
    }
}

/// Retention of `a` against `b` over topics: `d = a - factor x b`.
fn comparison(rows: &[TopicRow], (a, b): (Condition, Condition), factor: f64, semantic: bool) -> Option<Comparison> {
    let both: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            Some((retention_of(r.arms.get(a.name())?, semantic), retention_of(r.arms.get(b.name())?, semantic)))
        })
        .collect();
    if both.is_empty() {
        return None;
    }
    let d: Vec<f64> = both.iter().map(|(x, y)| x - factor * y).collect();
    let sum = |pick: fn(&(f64, f64)) -> f64| both.iter().map(pick).sum::<f64>();
    let factor_s = if (factor - 1.0).abs() < 1e-12 { String::new() } else { format!("{factor} x ") };
    Some(Comparison {
        retention_ratio: ratio(sum(|p| p.0), sum(|p| p.1)),
        difference: format!("{} - {factor_s}{}", a.name(), b.name()),
        one_sided: one_sided(&d),
    })
}

/// Judge scores per mission, when every paired mission has one from a
/// language-model judge (never the scripted one).
pub(crate) fn judged_quality(p: &[(&RunRecord, &RunRecord)]) -> bool {
    !p.is_empty() && p.iter().all(|(f, c)| [f, c].iter().all(|r| r.task_accuracy.as_ref().is_some_and(|j| !j.scripted)))
}

/// The three arms compared on retention, over topics.
pub(crate) fn comparisons(rows: &[TopicRow], semantic: bool) -> BTreeMap<String, Comparison> {
    let (f, mp) = (Condition::Field, Condition::MessagePassing);
    let mut comparisons = BTreeMap::new();
    for (name, arms, factor) in [
        ("field_vs_message_passing", (f, mp), 1.2),
        ("store_vs_message_passing", (Condition::Store, mp), 1.2),
        ("field_vs_store", (f, Condition::Store), 1.0),
    ] {
        if let Some(c) = comparison(rows, arms, factor, semantic) {
            comparisons.insert(name.to_string(), c);
        }
    }
    comparisons
}

/// Mean tokens per mission of the field and the store over message
/// passing's, chat only and in total.
pub(crate) fn token_ratios(
    field: &[&RunRecord],
    store: &[&RunRecord],
    control: &[&RunRecord],
) -> BTreeMap<String, TokenRatio> {
    let mean = |runs: &[&RunRecord], f: fn(&RunRecord) -> u64| {
        runs.iter().map(|r| f(r) as f64).sum::<f64>() / runs.len().max(1) as f64
    };
    let of = |runs: &[&RunRecord]| TokenRatio {
        chat_only: ratio(mean(runs, |r| r.chat_tokens), mean(control, |r| r.chat_tokens)),
        total: ratio(mean(runs, |r| r.tokens), mean(control, |r| r.tokens)),
    };
    let mut out = BTreeMap::from([(Condition::Field.name().to_string(), of(field))]);
    if !store.is_empty() {
        out.insert(Condition::Store.name().to_string(), of(store));
    }
    out
}

/// Per-topic rows whose `quality` is the judge's score (1 to 5).
pub(crate) fn judge_rows(records: &[RunRecord], lambda: f64) -> Vec<TopicRow> {
    let scored: Vec<RunRecord> = records
        .iter()
        .map(|r| RunRecord { quality: r.task_accuracy.as_ref().map_or(0.0, |j| f64::from(j.score)), ..r.clone() })
        .collect();
    topic_rows(&scored, lambda)
}
