//! The verdict: how each pass/fail criterion, and the whole experiment,
//! comes out, and what the plan's decision rules say to do. A criterion
//! that claims an improvement passes only with its threshold met and the
//! paired Wilcoxon test below [`ALPHA`]; too few pairs are inconclusive.

use serde::{Deserialize, Serialize};

/// How a criterion, or the whole experiment, came out: one model for every
/// place that judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The threshold is met on enough pairs and, for a criterion that
    /// claims an improvement (retention, quality), the paired test gives
    /// p < 0.05.
    Pass,
    /// The threshold is missed, on enough pairs.
    Fail,
    /// Too few pairs for the signed-rank test to reach significance at all
    /// ([`significance_reachable`]), whatever the value; or an improvement
    /// criterion's threshold is met without p < 0.05.
    Inconclusive,
}

impl Verdict {
    /// Lower-case name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// The significance level of every test the experiment reports.
pub const ALPHA: f64 = 0.05;

/// Whether `pairs` paired comparisons can reach a two-sided exact Wilcoxon
/// p-value below `alpha` at all: the smallest p-value `n` pairs can give
/// (every difference of one sign) is `2 / 2^n`, so at 0.05 it takes 6.
pub fn significance_reachable(pairs: usize, alpha: f64) -> bool {
    let smallest_p = 2.0 * 0.5f64.powi(pairs.min(1024) as i32);
    smallest_p < alpha
}

/// The fewest pairs for which [`significance_reachable`] holds at `alpha`.
pub fn pairs_needed(alpha: f64) -> usize {
    (1..=1024).find(|n| significance_reachable(*n, alpha)).unwrap_or(1024)
}

/// The paired evidence behind a criterion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// Paired comparisons.
    pub pairs: usize,
    /// The exact two-sided Wilcoxon p-value of the criterion's metric,
    /// field minus message passing.
    pub p_value: f64,
    /// Whether passing needs `p < ALPHA` too: true for the criteria that
    /// claim an improvement (retention, quality), false for the bounds
    /// (tokens, latency), whose p-value is shown beside them.
    pub significance_required: bool,
}

/// One pass/fail criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Its short name: `retention`, `quality`, `tokens` or `latency`.
    #[serde(default)]
    pub key: String,
    /// What is compared.
    pub name: String,
    /// The threshold, in the criterion's own terms.
    pub threshold: f64,
    /// The measured value.
    pub value: f64,
    /// Whether the value meets the threshold.
    pub pass: bool,
    /// Pass, fail or inconclusive (too few pairs to judge, or an
    /// improvement without p < 0.05).
    #[serde(default = "inconclusive")]
    pub verdict: Verdict,
    /// The exact two-sided Wilcoxon p-value of its metric, field minus
    /// message passing.
    #[serde(default)]
    pub p_value: Option<f64>,
    /// Whether passing needs p < 0.05 (retention, quality) or the value is
    /// a bound with p shown beside it (tokens, latency).
    #[serde(default)]
    pub significance_required: bool,
    /// Paired comparisons it was judged on.
    #[serde(default)]
    pub pairs: usize,
    /// The fewest pairs an exact two-sided signed-rank test needs before
    /// p < 0.05 is possible at all (6).
    #[serde(default)]
    pub pairs_needed: usize,
    /// Where the value comes from: `proxy` (key phrases), `human` (the
    /// blind ratings), `modelled` or `measured` (latency), `counted`.
    #[serde(default)]
    pub source: String,
}

pub(super) fn inconclusive() -> Verdict {
    Verdict::Inconclusive
}

impl Criterion {
    /// A criterion judged on its paired evidence: inconclusive below
    /// [`pairs_needed`] pairs; otherwise a missed threshold fails, and a met
    /// one passes when no significance is required or `p < ALPHA`, and is
    /// inconclusive when it is required and missing.
    pub fn judged(key: &str, name: &str, threshold: f64, value: f64, pass: bool, e: Evidence, source: &str) -> Self {
        let significant = e.p_value < ALPHA;
        let verdict = match (significance_reachable(e.pairs, ALPHA), pass) {
            (false, _) => Verdict::Inconclusive,
            (true, false) => Verdict::Fail,
            (true, true) if e.significance_required && !significant => Verdict::Inconclusive,
            (true, true) => Verdict::Pass,
        };
        Criterion {
            key: key.into(),
            name: name.into(),
            threshold,
            value,
            pass,
            verdict,
            p_value: Some(e.p_value),
            significance_required: e.significance_required,
            pairs: e.pairs,
            pairs_needed: pairs_needed(ALPHA),
            source: source.into(),
        }
    }

    /// Why it came out as it did, in words.
    pub fn reason(&self) -> String {
        let p = self.p_value.map_or("no test".to_string(), |p| format!("p = {p:.4}"));
        match self.verdict {
            Verdict::Inconclusive if self.pairs < self.pairs_needed => format!(
                "{} pairs; an exact two-sided signed-rank test needs {} before p < 0.05 is possible",
                self.pairs, self.pairs_needed
            ),
            Verdict::Inconclusive => format!("threshold met but {p} (not below 0.05) on {} pairs", self.pairs),
            Verdict::Pass if self.significance_required => format!("threshold met and {p} on {} pairs", self.pairs),
            Verdict::Pass => format!("within the bound on {} pairs ({p})", self.pairs),
            Verdict::Fail => format!("threshold missed on {} pairs ({p})", self.pairs),
        }
    }
}

/// What to do next, by the plan's decision rules (its section 5.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// `proceed`, `targeted_fixes`, `reassess` or `collect_more`.
    pub action: String,
    /// The rule that fired, in words.
    pub rule: String,
    /// The overall verdict behind it.
    pub verdict: Verdict,
}

/// The decision rules, first match wins.
pub const RULES: [(&str, &str); 4] = [
    (
        "reassess",
        "information retention fails: the core hypothesis (a shared field keeps what message passing loses) does not hold; reassess building the field entirely",
    ),
    (
        "targeted_fixes",
        "a criterion other than retention fails: find the mechanism that underperformed and try targeted fixes before abandoning the field",
    ),
    (
        "collect_more",
        "no criterion fails, but some are inconclusive: too few pairs for the signed-rank test to reach p < 0.05, or a threshold met without p < 0.05; run more topics or repetitions",
    ),
    ("proceed", "all four criteria pass: the field is validated; go ahead and build it into the product"),
];

/// The overall verdict and the recommendation for `criteria`.
pub fn decide(criteria: &[Criterion]) -> Recommendation {
    let fails = |c: &&Criterion| c.verdict == Verdict::Fail;
    let rule = if criteria.iter().filter(fails).any(|c| c.key == "retention") {
        0
    } else if criteria.iter().any(|c| c.verdict == Verdict::Fail) {
        1
    } else if criteria.iter().any(|c| c.verdict == Verdict::Inconclusive) {
        2
    } else {
        3
    };
    let verdict = [Verdict::Fail, Verdict::Fail, Verdict::Inconclusive, Verdict::Pass][rule];
    Recommendation { action: RULES[rule].0.into(), rule: RULES[rule].1.into(), verdict }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::wilcoxon;

    #[test]
    fn six_pairs_are_the_fewest_that_can_reach_significance() {
        assert!(!significance_reachable(5, ALPHA), "2/32 = 0.0625");
        assert!(significance_reachable(6, ALPHA), "2/64 = 0.03125");
        assert!(!significance_reachable(0, ALPHA));
        assert!(significance_reachable(10_000, ALPHA));
        // The exact test agrees: six pairs of one sign give p = 2/64.
        assert!((wilcoxon(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).p_value - 2.0 / 64.0).abs() < 1e-12);
    }

    /// A criterion on `pairs` pairs whose test gave p = 0.01.
    fn judged(key: &str, pass: bool, pairs: usize) -> Criterion {
        let e = Evidence { pairs, p_value: 0.01, significance_required: matches!(key, "retention" | "quality") };
        Criterion::judged(key, key, 1.0, 1.0, pass, e, "proxy")
    }

    fn action(criteria: &[Criterion]) -> (String, Verdict) {
        let r = decide(criteria);
        (r.action, r.verdict)
    }

    #[test]
    fn a_failed_retention_says_reassess_whatever_else_holds() {
        let c = [judged("retention", false, 15), judged("quality", false, 15), judged("tokens", true, 3)];
        assert_eq!(action(&c), ("reassess".into(), Verdict::Fail));
    }

    #[test]
    fn another_failed_criterion_says_targeted_fixes() {
        let c = [judged("retention", true, 15), judged("quality", true, 15), judged("latency", false, 15)];
        assert_eq!(action(&c), ("targeted_fixes".into(), Verdict::Fail));
    }

    #[test]
    fn too_few_pairs_say_collect_more_even_when_every_value_passes() {
        let c = [judged("retention", true, 2), judged("quality", true, 2)];
        assert_eq!(c[0].verdict, Verdict::Inconclusive);
        assert_eq!(action(&c), ("collect_more".into(), Verdict::Inconclusive));
        let missed = [judged("retention", false, 5)];
        assert_eq!(action(&missed), ("collect_more".into(), Verdict::Inconclusive), "a miss on 5 pairs is no fail");
    }

    /// The plan's decision needs evidence: an improvement (retention,
    /// quality) whose threshold is met passes only with p < 0.05, and is
    /// inconclusive without it; a bound (tokens, latency) passes on its
    /// value, its p shown beside it.
    #[test]
    fn an_improvement_without_significance_is_inconclusive() {
        let with_p = |key: &str, p_value: f64, required: bool| {
            let e = Evidence { pairs: 15, p_value, significance_required: required };
            Criterion::judged(key, key, 1.2, 1.3, true, e, "proxy")
        };
        let weak = with_p("retention", 0.2, true);
        assert_eq!(weak.verdict, Verdict::Inconclusive);
        assert!(weak.reason().contains("p = 0.2000"), "{}", weak.reason());
        assert_eq!(with_p("retention", 0.049, true).verdict, Verdict::Pass);
        assert_eq!(with_p("retention", 0.05, true).verdict, Verdict::Inconclusive, "p must be below 0.05");
        let bound = with_p("tokens", 0.9, false);
        assert_eq!((bound.verdict, bound.p_value), (Verdict::Pass, Some(0.9)));
        let c = [weak, with_p("quality", 0.01, true), bound];
        assert_eq!(action(&c), ("collect_more".into(), Verdict::Inconclusive));
        // Too few pairs are named with the number the test needs.
        let few = judged("retention", true, 5);
        assert_eq!((few.pairs, few.pairs_needed), (5, 6));
        assert!(few.reason().contains("5 pairs") && few.reason().contains("needs 6"), "{}", few.reason());
        assert_eq!(pairs_needed(ALPHA), 6);
    }

    #[test]
    fn all_passing_on_enough_pairs_says_proceed() {
        let c = ["retention", "quality", "tokens", "latency"].map(|k| judged(k, true, 6));
        assert_eq!(action(&c), ("proceed".into(), Verdict::Pass));
    }
}
