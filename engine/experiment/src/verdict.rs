//! The verdict, pre-registered: how each criterion, and the whole
//! experiment, comes out, and what the design document's decision rules
//! say to do. The topic is the unit of analysis; the improvement criteria
//! (retention, quality) are one-sided exact signed-rank tests on a
//! difference that builds the document's threshold in; the bounds (tokens,
//! latency) are judged on their value. At or above the minimum design
//! ([`MIN_TOPICS`] topics) every criterion passes or fails; below it the
//! experiment can only ask for more.

use crate::stats::{one_sided, OneSided};
use serde::{Deserialize, Serialize};

/// How a criterion, or the whole experiment, came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The test gives p < [`ALPHA`] (an improvement) or the value is within
    /// its bound, on at least [`MIN_TOPICS`] topics.
    Pass,
    /// Not a pass, on at least [`MIN_TOPICS`] topics.
    Fail,
    /// Fewer than [`MIN_TOPICS`] topics: below the minimum design nothing
    /// is decided.
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

/// The significance level of every test the experiment decides by.
pub const ALPHA: f64 = 0.05;

/// The minimum design: the design document's 5 topics (x 1 repetition).
/// Five topics of one sign give a one-sided p of 1/32 = 0.031, so a
/// criterion can pass there; a miss fails.
pub const MIN_TOPICS: usize = 5;

/// The analysis, fixed before any run and printed before the results.
pub const PREREGISTERED: [&str; 8] = [
    "Unit: the topic. A topic's repetitions are averaged, arm by arm, before any test.",
    "Test: exact Wilcoxon signed-rank, one-sided (H1: the median over topics of d is above 0), alpha = 0.05; ties (d = 0) by Pratt's method (ranked, then given no sign).",
    "Retention: d = field - 1.2 x message passing (the document's \"at least 20% more findings\").",
    "Quality: d = field - message passing - 0.5 (\"at least 0.5 points\"); counted in the decision only when a language-model judge or human ratings score it (the scripted judge counts the same key phrases as retention).",
    "Tokens (<= 1.2) and latency (<= 1.5): ratios of totals, field over message passing, judged on their value with no test; tokens count the field's embeddings, and the control is text message passing with none.",
    "At 5 topics or more every criterion passes or fails (a test that misses p < 0.05 fails); below 5 the decision is collect_more.",
    "Decision: retention fails -> reassess; another counted criterion fails -> targeted_fixes; all pass -> the third arm decides.",
    "Third arm: field against the plain shared store, d = field - store retention, the same test; p < 0.05 -> proceed (the field's mechanisms earn their cost), else store_suffices.",
];

/// One criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Its short name: `retention`, `quality`, `tokens` or `latency`.
    pub key: String,
    /// What is compared.
    pub name: String,
    /// The threshold, in the criterion's own terms.
    pub threshold: f64,
    /// The measured value (a ratio of means, a gain or a ratio of totals).
    pub value: f64,
    /// Whether the value meets the threshold.
    pub pass: bool,
    /// Pass, fail, or inconclusive below the minimum design.
    pub verdict: Verdict,
    /// The difference tested per topic (improvement criteria).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    /// The topic-level one-sided test (improvement criteria).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_sided: Option<OneSided>,
    /// Topics it was judged on.
    pub topics: usize,
    /// The minimum design's topics ([`MIN_TOPICS`]).
    pub minimum_topics: usize,
    /// Whether it counts in the decision (quality with the scripted judge
    /// does not).
    pub counted: bool,
    /// Where the value comes from: `proxy` (key phrases), `semantic`,
    /// `judge`, `human`, `modelled` or `measured` (latency), `counted`.
    pub source: String,
}

impl Criterion {
    /// An improvement criterion: passes when the one-sided test on the
    /// per-topic differences `d` gives p < [`ALPHA`].
    pub fn tested(
        key: &str,
        name: &str,
        measured: (f64, f64, bool),
        difference: &str,
        d: &[f64],
        source: &str,
        counted: bool,
    ) -> Criterion {
        let test = one_sided(d);
        let passes = test.p_value < ALPHA;
        let mut c = Criterion::judged((key, name, source), measured, d.len(), passes, counted);
        (c.difference, c.one_sided) = (Some(difference.into()), Some(test));
        c
    }

    /// A bound: passes when the value is within it.
    pub fn bound(key: &str, name: &str, measured: (f64, f64, bool), topics: usize, source: &str) -> Criterion {
        Criterion::judged((key, name, source), measured, topics, measured.2, true)
    }

    /// A criterion judged on `topics` topics: inconclusive below the
    /// minimum design, else pass or fail as `passes` says.
    fn judged(
        (key, name, source): (&str, &str, &str),
        (threshold, value, pass): (f64, f64, bool),
        topics: usize,
        passes: bool,
        counted: bool,
    ) -> Criterion {
        let verdict = match (topics >= MIN_TOPICS, passes) {
            (false, _) => Verdict::Inconclusive,
            (true, true) => Verdict::Pass,
            (true, false) => Verdict::Fail,
        };
        Criterion {
            key: key.into(),
            name: name.into(),
            threshold,
            value,
            pass,
            verdict,
            difference: None,
            one_sided: None,
            topics,
            minimum_topics: MIN_TOPICS,
            counted,
            source: source.into(),
        }
    }

    /// Why it came out as it did, in words.
    pub fn reason(&self) -> String {
        let counted = if self.counted { "" } else { "; reported, not counted in the decision" };
        let test = self.one_sided.as_ref().map(|t| format!("one-sided p = {:.4}", t.p_value));
        let why = match (self.verdict, &test) {
            (Verdict::Inconclusive, _) => {
                format!("{} topics, below the minimum design of {}", self.topics, self.minimum_topics)
            }
            (Verdict::Pass, Some(p)) => format!("{p} on {} topics", self.topics),
            (Verdict::Fail, Some(p)) => format!("{p} on {} topics (not below 0.05)", self.topics),
            (Verdict::Pass, None) => format!("within the bound, on {} topics", self.topics),
            (Verdict::Fail, None) => format!("outside the bound, on {} topics", self.topics),
        };
        format!("{why}{counted}")
    }
}

/// What to do next, by the decision rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// One of [`RULES`]' names.
    pub action: String,
    /// The rule that fired, in words.
    pub rule: String,
    /// The overall verdict behind it.
    pub verdict: Verdict,
}

/// The decision rules, first match wins.
pub const RULES: [(&str, &str); 5] = [
    (
        "collect_more",
        "below the minimum design (5 topics): nothing is decided; run at least 5 topics",
    ),
    (
        "reassess",
        "information retention fails: the core hypothesis (a shared field keeps what message passing loses) does not hold; reassess building the field entirely",
    ),
    (
        "targeted_fixes",
        "a counted criterion other than retention fails: find the mechanism that underperformed and try targeted fixes before abandoning the field",
    ),
    (
        "store_suffices",
        "every criterion passes against message passing, but the field does not retain more than a plain shared store: a shared store is enough; the field's decay, reinforcement and resonance do not earn their cost",
    ),
    (
        "proceed",
        "every criterion passes and the field retains more than a plain shared store: the field's mechanisms earn their cost; go ahead and build it into the product",
    ),
];

/// The recommendation for `criteria` judged on `topics` topics;
/// `field_vs_store` is the third arm's test (`None` without a store arm,
/// which then cannot clear the field).
pub fn decide(criteria: &[Criterion], topics: usize, field_vs_store: Option<&OneSided>) -> Recommendation {
    let fails = |c: &&Criterion| c.counted && c.verdict == Verdict::Fail;
    let rule = if topics < MIN_TOPICS {
        0
    } else if criteria.iter().filter(fails).any(|c| c.key == "retention") {
        1
    } else if criteria.iter().any(|c| fails(&c)) {
        2
    } else if field_vs_store.is_none_or(|t| t.p_value >= ALPHA) {
        3
    } else {
        4
    };
    let verdict = [Verdict::Inconclusive, Verdict::Fail, Verdict::Fail, Verdict::Fail, Verdict::Pass][rule];
    Recommendation { action: RULES[rule].0.into(), rule: RULES[rule].1.into(), verdict }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(d: &[f64]) -> Criterion {
        Criterion::tested("retention", "retention", (1.2, 1.3, true), "field - 1.2 x mp", d, "proxy", true)
    }

    fn bound(key: &str, pass: bool, topics: usize) -> Criterion {
        Criterion::bound(key, key, (1.2, 1.0, pass), topics, "counted")
    }

    const WINS: [f64; 5] = [0.1, 0.2, 0.3, 0.4, 0.5];

    /// The minimum design decides: five topics of one sign pass (p =
    /// 1/32), a tie among them fails (Pratt: p = 1/16), and four topics
    /// decide nothing.
    #[test]
    fn five_topics_decide_and_four_do_not() {
        let pass = retention(&WINS);
        assert_eq!(pass.verdict, Verdict::Pass, "{}", pass.reason());
        let tie = retention(&[0.0, 0.1, 0.2, 0.3, 0.4]);
        assert_eq!(tie.verdict, Verdict::Fail, "{}", tie.reason());
        assert!(tie.reason().contains("one-sided p = 0.0625"), "{}", tie.reason());
        let four = retention(&WINS[..4]);
        assert_eq!(four.verdict, Verdict::Inconclusive);
        assert_eq!(decide(&[four], 4, None).action, "collect_more");
    }

    #[test]
    fn the_rules_apply_in_order() {
        let store_loses = crate::stats::one_sided(&WINS);
        let store_ties = crate::stats::one_sided(&[0.0; 5]);
        let lost = retention(&[-0.1; 5]);
        let action = |c: &[Criterion], s: Option<&OneSided>| decide(c, 5, s).action;
        assert_eq!(action(&[lost.clone(), bound("tokens", false, 5)], Some(&store_loses)), "reassess");
        assert_eq!(action(&[retention(&WINS), bound("tokens", false, 5)], Some(&store_loses)), "targeted_fixes");
        assert_eq!(action(&[retention(&WINS), bound("tokens", true, 5)], Some(&store_ties)), "store_suffices");
        assert_eq!(action(&[retention(&WINS), bound("tokens", true, 5)], None), "store_suffices");
        let all = [retention(&WINS), bound("tokens", true, 5), bound("latency", true, 5)];
        let r = decide(&all, 5, Some(&store_loses));
        assert_eq!((r.action.as_str(), r.verdict), ("proceed", Verdict::Pass));
        // A criterion that does not count (quality by the scripted judge)
        // never decides.
        let mut quality = retention(&[-0.1; 5]);
        (quality.key, quality.counted) = ("quality".into(), false);
        assert_eq!(action(&[retention(&WINS), quality], Some(&store_loses)), "proceed");
    }
}
