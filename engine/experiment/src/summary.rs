//! From mission records to the experiment's summary: paired comparisons of
//! the field with message passing, the pass/fail criteria, Wilcoxon tests
//! per metric and the lambda sweep.

use super::stats::{median, wilcoxon, Wilcoxon};
pub use super::verdict::{
    decide, pairs_needed, significance_reachable, Criterion, Evidence, Recommendation, Verdict, ALPHA, RULES,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A shared-context condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Treatment: every agent injects into and queries one shared field.
    Field,
    /// Control: each agent passes messages to the next.
    MessagePassing,
}

impl Condition {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Condition::Field => "field",
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
    /// Wilcoxon test of retention, field minus message passing.
    pub retention_test: Wilcoxon,
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
    /// The lambda of the main comparison.
    pub lambda: f64,
    /// Paired comparisons.
    pub pairs: usize,
    /// Means per condition.
    pub means: BTreeMap<String, Means>,
    /// The source's criteria.
    pub criteria: Vec<Criterion>,
    /// Whether every criterion's value meets its threshold (kept for
    /// compatibility; [`Summary::verdict`] also says whether there were
    /// enough pairs to tell).
    pub pass: bool,
    /// Pass, fail or inconclusive, over all criteria.
    #[serde(default = "super::verdict::inconclusive")]
    pub verdict: Verdict,
    /// What the decision rules say to do.
    #[serde(default)]
    pub recommendation: Option<Recommendation>,
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
    /// Wilcoxon signed-rank test per metric, on field minus message passing.
    pub wilcoxon: BTreeMap<String, Wilcoxon>,
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

fn means(runs: &[&RunRecord]) -> Means {
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

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else if a > 0.0 {
        f64::MAX
    } else {
        1.0
    }
}

/// Summarises records; `lambda` is the main comparison's.
pub fn summarise(records: &[RunRecord], lambda: f64, lambdas: &[f64]) -> Summary {
    let p = pairs(records, lambda);
    let field: Vec<&RunRecord> = p.iter().map(|(f, _)| *f).collect();
    let control: Vec<&RunRecord> = p.iter().map(|(_, c)| *c).collect();
    let (mf, mc) = (means(&field), means(&control));
    let n = p.len();
    // Live prose paraphrases: its retention counts findings by meaning too.
    let (retention, retention_source) = match (mf.retention_semantic, mc.retention_semantic) {
        (Some(f), Some(c)) => (ratio(f, c), "semantic"),
        _ => (ratio(mf.retention, mc.retention), "proxy"),
    };
    let tokens = ratio(mf.tokens, mc.tokens);
    let latency = ratio(mf.latency_ms, mc.latency_ms);
    let gain = mf.quality - mc.quality;
    let latency_summary = latency_summary(&field, &control);
    let kind = latency_summary.kind.clone();
    let diff = |f: fn(&RunRecord) -> f64| p.iter().map(|(a, b)| f(a) - f(b)).collect::<Vec<f64>>();
    let mut tests = BTreeMap::new();
    // Retention is tested on the measure its criterion uses.
    let retention_diffs = match retention_source {
        "semantic" => diff(|r| r.retention_semantic.unwrap_or(0.0)),
        _ => diff(|r| r.retention),
    };
    tests.insert("retention".to_string(), wilcoxon(&retention_diffs));
    tests.insert("quality".to_string(), wilcoxon(&diff(|r| r.quality)));
    tests.insert("tokens".to_string(), wilcoxon(&diff(|r| r.tokens as f64)));
    tests.insert("latency_ms".to_string(), wilcoxon(&diff(|r| r.latency_ms)));
    let evidence = |test: &str, significance_required| Evidence {
        pairs: n,
        p_value: tests.get(test).map_or(1.0, |w| w.p_value),
        significance_required,
    };
    let criteria = vec![
        Criterion::judged(
            "retention",
            "retention ratio, field / message passing (>= 1.2: 20% more findings)",
            1.2,
            retention,
            retention >= 1.2,
            evidence("retention", true),
            retention_source,
        ),
        Criterion::judged("quality", QUALITY_NAME, 0.5, gain, gain >= 0.5, evidence("quality", true), "proxy"),
        Criterion::judged(
            "tokens",
            "token ratio, field / message passing (<= 1.2)",
            1.2,
            tokens,
            tokens <= 1.2,
            evidence("tokens", false),
            "counted",
        ),
        Criterion::judged(
            "latency",
            "latency ratio, field / message passing (<= 1.5)",
            1.5,
            latency,
            latency <= 1.5,
            evidence("latency_ms", false),
            &kind,
        ),
    ];
    let lambda_sweep: Vec<SweepPoint> = lambdas
        .iter()
        .map(|l| {
            let p = pairs(records, *l);
            let field: Vec<&RunRecord> = p.iter().map(|(f, _)| *f).collect();
            let n = field.len().max(1) as f64;
            SweepPoint {
                lambda: *l,
                means: means(&field),
                cross_agent_resonance: field.iter().map(|r| r.cross_agent_resonance.unwrap_or(0) as f64).sum::<f64>()
                    / n,
                stability: field.iter().map(|r| r.stability.unwrap_or(0.0)).sum::<f64>() / n,
                converged: field.iter().filter(|r| r.convergence_phase.is_some()).count() as f64 / n,
                monitor: FieldMonitor::of(&field),
                retention_test: wilcoxon(&p.iter().map(|(a, b)| a.retention - b.retention).collect::<Vec<_>>()),
            }
        })
        .collect();
    let pass = criteria.iter().all(|c| c.pass);
    let mut m = BTreeMap::new();
    m.insert(Condition::Field.name().to_string(), mf);
    m.insert(Condition::MessagePassing.name().to_string(), mc);
    let lambda_pick = pick_lambda(&lambda_sweep);
    let recommendation = decide(&criteria);
    let cost = cost_summary(records, &field, &control);
    Summary {
        lambda,
        pairs: p.len(),
        means: m,
        verdict: recommendation.verdict,
        recommendation: Some(recommendation),
        cost: Some(cost),
        task_accuracy: task_accuracy(&p),
        latency: latency_summary,
        criteria,
        pass,
        wilcoxon: tests,
        field_monitor: FieldMonitor::of(&field),
        lambda_sweep,
        lambda_pick,
    }
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
        assert_eq!(s.wilcoxon["retention"].n, 2);
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
            retention_test: wilcoxon(&[]),
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

    /// A summary's retention criterion uses the paired test of its own
    /// records: ten field wins of 0.1 pass; the same mean with signs split
    /// evenly does not.
    #[test]
    fn the_summary_tests_the_retention_it_judges() {
        let build = |signs: &[f64]| {
            let mut records = Vec::new();
            for (i, s) in signs.iter().enumerate() {
                let t = format!("t{i}");
                records.push(rec(&t, 1, Condition::MessagePassing, None, 0.5, 100));
                records.push(rec(&t, 1, Condition::Field, Some(0.1), 0.5 + 0.4 * s, 100));
            }
            summarise(&records, 0.1, &[0.1])
        };
        let all = build(&[1.0; 10]);
        let retention = &all.criteria[0];
        assert_eq!((retention.key.as_str(), retention.verdict), ("retention", Verdict::Pass));
        assert!(retention.p_value.is_some_and(|p| p < 0.01));
        // Seven wins of 0.4 and three losses of 0.4: ratio 0.66 / 0.5 =
        // 1.32, but p = 2 x (1 + 10 + 45 + 120) / 1024 = 0.34.
        let mixed = build(&[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0]);
        let retention = &mixed.criteria[0];
        assert!((retention.value - 1.32).abs() < 1e-9 && retention.pass, "{}", retention.value);
        assert!(retention.p_value.is_some_and(|p| (p - 352.0 / 1024.0).abs() < 1e-12), "{:?}", retention.p_value);
        assert_eq!(retention.verdict, Verdict::Inconclusive, "{}", retention.reason());
    }
}
