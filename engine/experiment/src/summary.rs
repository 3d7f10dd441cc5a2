//! From mission records to the experiment's summary, by the pre-registered
//! analysis ([`PREREGISTERED`]): per-topic means of each arm (field, plain
//! store, message passing), the criteria judged on the topics, the three
//! comparisons with their one-sided tests, and the lambda sweep.

use super::analysis::{comparisons, diffs, judge_rows, judged_quality, retention_of, token_ratios};
pub use super::analysis::{topic_rows, Comparison, TokenRatio, TopicRow};
use super::record::{means, ratio};
pub use super::record::{Condition, Means, MissionCost, RunRecord};
use super::stats::{median, one_sided, wilcoxon, OneSided, Wilcoxon};
pub use super::verdict::{decide, Criterion, Recommendation, Verdict, ALPHA, MIN_TOPICS, PREREGISTERED, RULES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the latency criterion's figures were obtained.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// `measured` (wall clock, live agents) or `modelled`.
    pub kind: String,
    /// Mean modelled latency per condition beside measured figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_means_ms: Option<BTreeMap<String, f64>>,
}

/// Task accuracy over the main comparison's pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskAccuracy {
    /// The judge model.
    pub judge: String,
    /// True for the scripted rubric scorer.
    pub scripted: bool,
    /// Pairs whose two reports were both scored.
    pub judged_pairs: usize,
    /// Mean score per condition, 1 to 5.
    pub means: BTreeMap<String, f64>,
    /// Wilcoxon signed-rank test on field minus message passing.
    pub wilcoxon: Wilcoxon,
}

fn task_accuracy(pairs: &[(&RunRecord, &RunRecord)]) -> Option<TaskAccuracy> {
    let scored: Vec<(&super::judge::JudgeScore, &super::judge::JudgeScore)> =
        pairs.iter().filter_map(|(f, c)| Some((f.task_accuracy.as_ref()?, c.task_accuracy.as_ref()?))).collect();
    let first = scored.first()?.0;
    let n = scored.len() as f64;
    let mean = |pick: fn(&(&super::judge::JudgeScore, &super::judge::JudgeScore)) -> u8| {
        scored.iter().map(|s| f64::from(pick(s))).sum::<f64>() / n
    };
    Some(TaskAccuracy {
        judge: first.judge.clone(),
        scripted: first.scripted,
        judged_pairs: scored.len(),
        means: BTreeMap::from([
            (Condition::Field.name().to_string(), mean(|s| s.0.score)),
            (Condition::MessagePassing.name().to_string(), mean(|s| s.1.score)),
        ]),
        wilcoxon: wilcoxon(&scored.iter().map(|(f, c)| f64::from(f.score) - f64::from(c.score)).collect::<Vec<_>>()),
    })
}

/// Spend of one condition's missions in the main comparison.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConditionCost {
    /// Missions.
    pub runs: usize,
    /// Chat, summed.
    pub chat_nano_usd: u64,
    /// Embedding, summed.
    pub embedding_nano_usd: u64,
    /// Both, summed.
    pub total_nano_usd: u64,
    /// Per mission.
    pub mean_nano_usd: f64,
    /// Mean patterns the field held (field condition).
    pub mean_field_patterns: Option<f64>,
    /// Mean bytes of their vectors (field condition).
    pub mean_field_vector_bytes: Option<f64>,
}

/// What the experiment cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostSummary {
    /// Per condition, over the main comparison's pairs.
    pub per_condition: BTreeMap<String, ConditionCost>,
    /// Mean cost per mission, field / message passing.
    pub ratio: f64,
    /// Every mission of the experiment, the lambda sweep included.
    pub all_missions_nano_usd: u64,
    /// What the chat price is: `nominal` (a placeholder table),
    /// `configured` or `local`.
    pub chat_price: String,
    /// The same for the embedding price.
    pub embedding_price: String,
}

fn condition_cost(runs: &[&RunRecord]) -> ConditionCost {
    let n = runs.len().max(1) as f64;
    let sum = |f: fn(&MissionCost) -> u64| runs.iter().map(|r| f(&r.cost)).sum::<u64>();
    let mean_of = |f: fn(&MissionCost) -> Option<u64>| {
        let v: Vec<u64> = runs.iter().filter_map(|r| f(&r.cost)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64 / v.len() as f64)
    };
    ConditionCost {
        runs: runs.len(),
        chat_nano_usd: sum(|c| c.chat_nano_usd),
        embedding_nano_usd: sum(|c| c.embedding_nano_usd),
        total_nano_usd: sum(|c| c.total_nano_usd),
        mean_nano_usd: sum(|c| c.total_nano_usd) as f64 / n,
        mean_field_patterns: mean_of(|c| c.field_patterns),
        mean_field_vector_bytes: mean_of(|c| c.field_vector_bytes),
    }
}

/// The lambda sweep: the field at one lambda against message passing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Lambda.
    pub lambda: f64,
    /// The field's means.
    pub means: Means,
    /// Mean cross-agent resonance.
    pub cross_agent_resonance: f64,
    /// Mean final stability.
    pub stability: f64,
    /// Share of missions that converged.
    pub converged: f64,
    /// The field's monitor over these missions.
    #[serde(default)]
    pub monitor: FieldMonitor,
    /// The retention test at this lambda, over topics: d = field - 1.2 x
    /// message passing, one-sided.
    pub retention_test: OneSided,
}

/// The field's monitor over a set of field missions: does one pattern
/// drown out the rest?
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldMonitor {
    /// Field missions with figures.
    pub missions: usize,
    /// The mean share of a mission's queries answered by its busiest
    /// pattern.
    pub busiest_share_mean: f64,
    /// The largest such share.
    pub busiest_share_max: f64,
    /// The largest max/min effective strength ratio seen in any phase.
    pub max_strength_ratio: f64,
    /// Missions whose ratio passed the alarm.
    pub alarmed_missions: usize,
}

impl FieldMonitor {
    /// The monitor over `runs` (those without field figures are skipped).
    pub fn of(runs: &[&RunRecord]) -> FieldMonitor {
        let shares: Vec<f64> = runs.iter().filter_map(|r| r.busiest_share).collect();
        FieldMonitor {
            missions: shares.len(),
            busiest_share_mean: if shares.is_empty() { 0.0 } else { shares.iter().sum::<f64>() / shares.len() as f64 },
            busiest_share_max: shares.iter().copied().fold(0.0, f64::max),
            max_strength_ratio: runs.iter().filter_map(|r| r.max_strength_ratio).fold(0.0, f64::max),
            alarmed_missions: runs.iter().filter(|r| r.ratio_alarm == Some(true)).count(),
        }
    }
}

/// The summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The pre-registered analysis, in words.
    pub analysis: Vec<String>,
    /// The lambda of the main comparison.
    pub lambda: f64,
    /// Topics with a field and a message-passing mission: the unit.
    pub topics: usize,
    /// Field and message-passing missions paired on (topic, repetition).
    pub pairs: usize,
    /// Means per arm over those missions.
    pub means: BTreeMap<String, Means>,
    /// Each topic's means, arm by arm.
    pub per_topic: Vec<TopicRow>,
    /// The criteria.
    pub criteria: Vec<Criterion>,
    /// Whether every counted criterion's value meets its threshold.
    pub pass: bool,
    /// Pass, fail or inconclusive, over all criteria and the third arm.
    pub verdict: Verdict,
    /// What the decision rules say to do.
    pub recommendation: Option<Recommendation>,
    /// `field_vs_message_passing`, `store_vs_message_passing` and
    /// `field_vs_store`, on retention.
    pub comparisons: BTreeMap<String, Comparison>,
    /// Token ratios over message passing, for `field` and `store`.
    pub token_ratios: BTreeMap<String, TokenRatio>,
    /// What it cost (the price labels are filled in by the caller, which
    /// knows the price table).
    #[serde(default)]
    pub cost: Option<CostSummary>,
    /// Task accuracy by the judge, when the missions were judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_accuracy: Option<TaskAccuracy>,
    /// How latency was obtained.
    #[serde(default)]
    pub latency: LatencySummary,
    /// The field's monitor over the main comparison's field missions.
    #[serde(default)]
    pub field_monitor: FieldMonitor,
    /// The field at every lambda.
    pub lambda_sweep: Vec<SweepPoint>,
    /// The lambda the sweep picks (`None` without a sweep point with runs).
    pub lambda_pick: Option<LambdaPick>,
}

/// The sweep's choice of lambda.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaPick {
    /// The lambda with the highest mean field retention.
    pub chosen: f64,
    /// How it was chosen.
    pub rule: String,
    /// The lifetime-based calibration beside it (field missions only).
    pub calibrated: Option<LambdaCalibration>,
}

/// A lambda calibrated from how long patterns stay useful: `L` is the
/// median lifetime of the patterns that were accessed (simulated hours from
/// injection to last access), `S0` their median strength at injection, and
/// the calibrated lambda is the one under which an untouched pattern decays
/// from `S0` to the archival threshold in `L` hours: `ln(S0 / threshold) / L`.
/// Slower decay keeps patterns past their useful life; faster decay archives
/// half of them before their last use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaCalibration {
    /// Accessed patterns it is drawn from.
    pub accessed_patterns: usize,
    /// Their median lifetime `L`, in simulated hours.
    pub median_lifetime_hours: f64,
    /// Their median strength at injection `S0`.
    pub median_initial_strength: f64,
    /// The archival threshold.
    pub archive_below: f64,
    /// `ln(S0 / threshold) / L`; `None` when `L` is 0 (patterns last used
    /// the hour they were made) or `S0` is not above the threshold.
    pub lambda: Option<f64>,
}

/// Calibrates lambda from `(strength at injection, lifetime hours)` of the
/// accessed patterns; `None` when none was accessed.
pub fn calibrate_lambda(accessed: &[(f64, f64)], archive_below: f64) -> Option<LambdaCalibration> {
    if accessed.is_empty() {
        return None;
    }
    let life = median(&accessed.iter().map(|a| a.1).collect::<Vec<_>>());
    let s0 = median(&accessed.iter().map(|a| a.0).collect::<Vec<_>>());
    let lambda = (life > 0.0 && s0 > archive_below && archive_below > 0.0).then(|| (s0 / archive_below).ln() / life);
    Some(LambdaCalibration {
        accessed_patterns: accessed.len(),
        median_lifetime_hours: life,
        median_initial_strength: s0,
        archive_below,
        lambda,
    })
}

/// The rule [`pick_lambda`] applies.
pub const LAMBDA_PICK_RULE: &str = "highest mean field retention; ties go to the smaller lambda";

/// Picks the lambda whose field runs retained the most findings on average,
/// the smaller lambda on a tie. Means that differ by less than
/// [`RETENTION_TIE`] tie: they differ only by the order of summation.
/// Sweep points without runs take no part.
pub fn pick_lambda(sweep: &[SweepPoint]) -> Option<LambdaPick> {
    let ran: Vec<&SweepPoint> = sweep.iter().filter(|p| p.means.runs > 0).collect();
    let best = ran.iter().map(|p| p.means.retention).max_by(f64::total_cmp)?;
    let chosen =
        ran.iter().filter(|p| p.means.retention >= best - RETENTION_TIE).map(|p| p.lambda).min_by(f64::total_cmp)?;
    Some(LambdaPick { chosen, rule: LAMBDA_PICK_RULE.into(), calibrated: None })
}

/// Mean retentions closer than this are a tie.
pub const RETENTION_TIE: f64 = 1e-9;

/// Field runs at `lambda` paired with the message-passing run of the same
/// topic and repetition, in record order.
pub fn pairs(records: &[RunRecord], lambda: f64) -> Vec<(&RunRecord, &RunRecord)> {
    let control: BTreeMap<(&str, u32), &RunRecord> = records
        .iter()
        .filter(|r| r.condition == Condition::MessagePassing)
        .map(|r| ((r.topic.as_str(), r.rep), r))
        .collect();
    records
        .iter()
        .filter(|r| r.condition == Condition::Field && r.lambda == Some(lambda))
        .filter_map(|f| control.get(&(f.topic.as_str(), f.rep)).map(|c| (f, *c)))
        .collect()
}

/// Summarises records by the pre-registered analysis; `lambda` is the
/// main comparison's.
pub fn summarise(records: &[RunRecord], lambda: f64, lambdas: &[f64]) -> Summary {
    let p = pairs(records, lambda);
    let field: Vec<&RunRecord> = p.iter().map(|(f, _)| *f).collect();
    let control: Vec<&RunRecord> = p.iter().map(|(_, c)| *c).collect();
    let store: Vec<&RunRecord> = records.iter().filter(|r| r.condition == Condition::Store).collect();
    let rows = topic_rows(records, lambda);
    let n = rows.len();
    let (mf, mc) = (means(&field), means(&control));
    // Live prose paraphrases: its retention counts findings by meaning too.
    let semantic = mf.retention_semantic.is_some() && mc.retention_semantic.is_some();
    let retention_source = if semantic { "semantic" } else { "proxy" };
    let (fm, cm) = (retention_of(&mf, semantic), retention_of(&mc, semantic));
    let retention = ratio(fm, cm);
    let sum = |runs: &[&RunRecord], f: fn(&RunRecord) -> f64| runs.iter().map(|r| f(r)).sum::<f64>();
    let tokens = ratio(sum(&field, |r| r.tokens as f64), sum(&control, |r| r.tokens as f64));
    let latency = ratio(sum(&field, |r| r.latency_ms), sum(&control, |r| r.latency_ms));
    let latency_summary = latency_summary(&field, &control);
    let kind = latency_summary.kind.clone();
    let (f, mp) = (Condition::Field, Condition::MessagePassing);
    let retention_d = diffs(&rows, f, mp, |x, y| retention_of(x, semantic) - 1.2 * retention_of(y, semantic));
    // Quality: the judge's scores when a language-model judge scored every
    // report, else the key-phrase proxy (reported, not counted).
    let judged = judged_quality(&p);
    let judge_means = |runs: &[&RunRecord]| {
        runs.iter().map(|r| r.task_accuracy.as_ref().map_or(0.0, |j| f64::from(j.score))).sum::<f64>()
            / runs.len().max(1) as f64
    };
    let (quality_d, gain, quality_source) = if judged {
        let judge_rows = judge_rows(records, lambda);
        let d = diffs(&judge_rows, f, mp, |x, y| x.quality - y.quality - 0.5);
        (d, judge_means(&field) - judge_means(&control), "judge")
    } else {
        (diffs(&rows, f, mp, |x, y| x.quality - y.quality - 0.5), mf.quality - mc.quality, "proxy")
    };
    let criteria = vec![
        Criterion::tested(
            "retention",
            "retention ratio, field / message passing (>= 1.2: 20% more findings)",
            (1.2, retention, retention >= 1.2),
            "field - 1.2 x message_passing",
            &retention_d,
            retention_source,
            true,
        ),
        Criterion::tested(
            "quality",
            QUALITY_NAME,
            (0.5, gain, gain >= 0.5),
            "field - message_passing - 0.5",
            &quality_d,
            quality_source,
            judged,
        ),
        Criterion::bound(
            "tokens",
            "token ratio of totals, field / message passing (<= 1.2)",
            (1.2, tokens, tokens <= 1.2),
            n,
            "counted",
        ),
        Criterion::bound(
            "latency",
            "latency ratio of totals, field / message passing (<= 1.5)",
            (1.5, latency, latency <= 1.5),
            n,
            &kind,
        ),
    ];
    let comparisons = comparisons(&rows, semantic);
    let token_ratios = token_ratios(&field, &store, &control);
    let lambda_sweep = sweep(records, lambdas);
    let pass = criteria.iter().filter(|c| c.counted).all(|c| c.pass);
    let mut m = BTreeMap::new();
    m.insert(f.name().to_string(), mf);
    if !store.is_empty() {
        m.insert(Condition::Store.name().to_string(), means(&store));
    }
    m.insert(mp.name().to_string(), mc);
    let lambda_pick = pick_lambda(&lambda_sweep);
    let recommendation = decide(&criteria, n, comparisons.get("field_vs_store").map(|c| &c.one_sided));
    let cost = cost_summary(records, &field, &control);
    Summary {
        analysis: PREREGISTERED.iter().map(|s| s.to_string()).collect(),
        lambda,
        topics: n,
        pairs: p.len(),
        means: m,
        per_topic: rows,
        verdict: recommendation.verdict,
        recommendation: Some(recommendation),
        comparisons,
        token_ratios,
        cost: Some(cost),
        task_accuracy: task_accuracy(&p),
        latency: latency_summary,
        criteria,
        pass,
        field_monitor: FieldMonitor::of(&field),
        lambda_sweep,
        lambda_pick,
    }
}

/// The field at each lambda against the same message-passing missions.
fn sweep(records: &[RunRecord], lambdas: &[f64]) -> Vec<SweepPoint> {
    let (f, mp) = (Condition::Field, Condition::MessagePassing);
    lambdas
        .iter()
        .map(|l| {
            let p = pairs(records, *l);
            let field: Vec<&RunRecord> = p.iter().map(|(f, _)| *f).collect();
            let k = field.len().max(1) as f64;
            let rows = topic_rows(records, *l);
            SweepPoint {
                lambda: *l,
                means: means(&field),
                cross_agent_resonance: field.iter().map(|r| r.cross_agent_resonance.unwrap_or(0) as f64).sum::<f64>()
                    / k,
                stability: field.iter().map(|r| r.stability.unwrap_or(0.0)).sum::<f64>() / k,
                converged: field.iter().filter(|r| r.convergence_phase.is_some()).count() as f64 / k,
                monitor: FieldMonitor::of(&field),
                retention_test: one_sided(&diffs(&rows, f, mp, |x, y| x.retention - 1.2 * y.retention)),
            }
        })
        .collect()
}

/// Measured when any mission of the pairs measured its latency.
fn latency_summary(field: &[&RunRecord], control: &[&RunRecord]) -> LatencySummary {
    let measured = field.iter().chain(control).any(|r| r.modelled_latency_ms.is_some());
    let modelled_mean = |runs: &[&RunRecord]| {
        runs.iter().map(|r| r.modelled_latency_ms.unwrap_or(r.latency_ms)).sum::<f64>() / runs.len().max(1) as f64
    };
    LatencySummary {
        kind: if measured { "measured" } else { "modelled" }.into(),
        modelled_means_ms: measured.then(|| {
            BTreeMap::from([
                (Condition::Field.name().to_string(), modelled_mean(field)),
                (Condition::MessagePassing.name().to_string(), modelled_mean(control)),
            ])
        }),
    }
}

/// Spend per condition of the pairs, and over every mission.
fn cost_summary(records: &[RunRecord], field: &[&RunRecord], control: &[&RunRecord]) -> CostSummary {
    let (cf, cc) = (condition_cost(field), condition_cost(control));
    CostSummary {
        ratio: ratio(cf.mean_nano_usd, cc.mean_nano_usd),
        per_condition: BTreeMap::from([
            (Condition::Field.name().to_string(), cf),
            (Condition::MessagePassing.name().to_string(), cc),
        ]),
        all_missions_nano_usd: records.iter().map(|r| r.cost.total_nano_usd).sum(),
        chat_price: String::new(),
        embedding_price: String::new(),
    }
}

/// The quality criterion's name.
pub const QUALITY_NAME: &str = "quality gain, field - message passing, 1-5 scale (>= 0.5)";

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(topic: &str, rep: u32, condition: Condition, lambda: Option<f64>, retention: f64, tokens: u64) -> RunRecord {
        RunRecord {
            topic: topic.into(),
            rep,
            condition,
            lambda,
            seed: u64::from(rep),
            retention,
            quality: 1.0 + 4.0 * retention,
            tokens,
            chat_tokens: tokens,
            latency_ms: 1000.0,
            modelled_latency_ms: None,
            cross_agent_resonance: None,
            stability: None,
            convergence_phase: None,
            busiest_share: None,
            max_strength_ratio: None,
            ratio_alarm: None,
            present: Vec::new(),
            retention_semantic: None,
            present_semantic: None,
            report: String::new(),
            cost: MissionCost { total_nano_usd: tokens * 10, ..MissionCost::default() },
            task_accuracy: None,
        }
    }

    /// Pairs are matched on (topic, rep) exactly, whatever the record order,
    /// and only at the requested lambda.
    #[test]
    fn pairing_is_exact_and_criteria_follow_the_means() {
        let records = vec![
            rec("b", 1, Condition::Field, Some(0.1), 0.9, 120),
            rec("a", 2, Condition::MessagePassing, None, 0.4, 100),
            rec("a", 1, Condition::Field, Some(0.1), 0.6, 110),
            rec("a", 1, Condition::Field, Some(0.2), 0.0, 110),
            rec("b", 1, Condition::MessagePassing, None, 0.5, 100),
            rec("a", 1, Condition::MessagePassing, None, 0.5, 100),
            rec("c", 1, Condition::Field, Some(0.1), 1.0, 100),
        ];
        let p = pairs(&records, 0.1);
        let keys: Vec<(&str, u32, &str, u32)> =
            p.iter().map(|(f, c)| (f.topic.as_str(), f.rep, c.topic.as_str(), c.rep)).collect();
        assert_eq!(
            keys,
            vec![("b", 1, "b", 1), ("a", 1, "a", 1)],
            "unpaired runs (a/2 control, c/1 field) are left out"
        );
        let s = summarise(&records, 0.1, &[0.1, 0.2]);
        assert_eq!(s.pairs, 2);
        let ret = &s.criteria[0];
        assert!((ret.value - 0.75 / 0.5).abs() < 1e-12 && ret.pass);
        assert!((s.criteria[2].value - 1.15).abs() < 1e-12 && s.criteria[2].pass);
        assert_eq!(s.lambda_sweep[1].means.runs, 1);
        assert_eq!(s.topics, 2, "topics a and b have both arms");
        let cost = s.cost.expect("a cost summary");
        assert_eq!(cost.per_condition["field"].total_nano_usd, 2300, "b/1 and a/1 at lambda 0.1");
        assert_eq!(cost.per_condition["message_passing"].total_nano_usd, 2000);
        assert!((cost.ratio - 1.15).abs() < 1e-12);
        assert_eq!(cost.all_missions_nano_usd, 7400, "every mission, unpaired and swept ones too");
    }

    #[test]
    fn the_sweep_picks_the_best_retention_and_the_smaller_lambda_on_a_tie() {
        let point = |lambda: f64, retention: f64, runs: usize| SweepPoint {
            lambda,
            means: Means { runs, retention, quality: 0.0, tokens: 0.0, latency_ms: 0.0, retention_semantic: None },
            cross_agent_resonance: 0.0,
            stability: 0.0,
            converged: 0.0,
            monitor: FieldMonitor::default(),
            retention_test: one_sided(&[]),
        };
        let chosen = |sweep: &[SweepPoint]| pick_lambda(sweep).map(|p| p.chosen);
        assert_eq!(chosen(&[point(0.05, 0.7, 3), point(0.1, 0.8, 3), point(0.2, 0.75, 3)]), Some(0.1));
        assert_eq!(chosen(&[point(0.2, 0.8, 3), point(0.05, 0.8, 3), point(0.1, 0.8, 3)]), Some(0.05), "a tie");
        let rounding = [point(0.05, 0.7777777777777775, 3), point(0.2, 0.7777777777777776, 3)];
        assert_eq!(chosen(&rounding), Some(0.05), "summation order is not a difference");
        assert_eq!(chosen(&[point(0.05, 0.9, 0), point(0.1, 0.5, 3)]), Some(0.1), "a point without runs");
        assert_eq!(chosen(&[]), None);
    }

    #[test]
    fn calibration_takes_an_untouched_pattern_to_the_threshold_over_the_median_lifetime() {
        // Lifetimes 2, 4 and 10 hours at strength 1: L = 4, S0 = 1.
        let c = calibrate_lambda(&[(1.0, 10.0), (1.0, 2.0), (1.0, 4.0)], 0.05).expect("accessed patterns");
        assert_eq!((c.accessed_patterns, c.median_lifetime_hours, c.median_initial_strength), (3, 4.0, 1.0));
        let lambda = c.lambda.expect("defined");
        assert!((lambda - 20f64.ln() / 4.0).abs() < 1e-12, "{lambda}");
        assert!(((-lambda * 4.0).exp() - 0.05).abs() < 1e-12, "strength 1 reaches 0.05 after L hours");
        let even = calibrate_lambda(&[(1.0, 2.0), (0.5, 6.0)], 0.05).expect("two");
        assert_eq!((even.median_lifetime_hours, even.median_initial_strength), (4.0, 0.75), "even counts average");
        assert_eq!(calibrate_lambda(&[(1.0, 0.0)], 0.05).map(|c| c.lambda), Some(None), "no lifetime, no lambda");
        assert_eq!(calibrate_lambda(&[], 0.05), None);
    }

    /// Five topics, two repetitions each, with a store arm: the topic's
    /// repetitions are averaged before the one-sided test.
    fn five_topics(field: [f64; 5], store: f64) -> Vec<RunRecord> {
        let mut records = Vec::new();
        for (i, f) in field.iter().enumerate() {
            let t = format!("t{i}");
            for rep in 1..=2 {
                // The repetitions straddle the topic's mean.
                let wobble = if rep == 1 { 0.05 } else { -0.05 };
                records.push(rec(&t, rep, Condition::MessagePassing, None, 0.5, 100));
                records.push(rec(&t, rep, Condition::Store, None, store, 110));
                records.push(rec(&t, rep, Condition::Field, Some(0.1), f + wobble, 110));
            }
        }
        records
    }

    /// The minimum design decides: five topics whose field keeps 20% more
    /// than message passing pass, and the store arm then decides between
    /// proceed and store_suffices; one topic below 1.2 x message passing
    /// fails retention (reassess), though the ratio of means is above 1.2.
    #[test]
    fn five_topics_pass_or_fail_and_the_store_arm_decides() {
        let s = summarise(&five_topics([0.7, 0.75, 0.8, 0.85, 0.9], 0.6), 0.1, &[0.1]);
        assert_eq!((s.topics, s.pairs), (5, 10));
        assert_eq!(s.per_topic.len(), 5);
        assert!((s.per_topic[0].arms["field"].retention - 0.7).abs() < 1e-12, "repetitions averaged");
        let retention = &s.criteria[0];
        let test = retention.one_sided.as_ref().expect("tested");
        assert_eq!((test.n, test.zeros), (5, 0));
        assert!((test.p_value - 1.0 / 32.0).abs() < 1e-12, "{}", test.p_value);
        assert_eq!(retention.verdict, Verdict::Pass, "{}", retention.reason());
        assert!(!s.criteria[1].counted, "the scripted quality does not count");
        assert_eq!(s.recommendation.as_ref().map(|r| r.action.as_str()), Some("proceed"));
        assert!((s.token_ratios["field"].total - 1.1).abs() < 1e-12);
        let fs = &s.comparisons["field_vs_store"];
        assert_eq!(fs.difference, "field - store");
        // A store that keeps as much as the field: a store suffices.
        let same = summarise(&five_topics([0.7, 0.75, 0.8, 0.85, 0.9], 0.9), 0.1, &[0.1]);
        assert_eq!(same.recommendation.map(|r| r.action), Some("store_suffices".into()));
        // One topic at exactly 1.2 x (d = 0) among five: Pratt gives p =
        // 1/16, and retention fails though the mean ratio is 1.5.
        let tied = summarise(&five_topics([0.6, 0.75, 0.8, 0.85, 0.9], 0.6), 0.1, &[0.1]);
        let retention = &tied.criteria[0];
        assert!(retention.value > 1.2 && retention.verdict == Verdict::Fail, "{}", retention.reason());
        assert_eq!(tied.recommendation.map(|r| r.action), Some("reassess".into()));
        // Four topics decide nothing.
        let four: Vec<RunRecord> =
            five_topics([0.7, 0.75, 0.8, 0.85, 0.9], 0.6).into_iter().filter(|r| r.topic != "t4").collect();
        assert_eq!(summarise(&four, 0.1, &[0.1]).recommendation.map(|r| r.action), Some("collect_more".into()));
    }
}
