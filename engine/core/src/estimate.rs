//! The pre-flight estimate of a live run or validation: a range of what it
//! will cost, with the assumptions that bound it.
//!
//! A plan is a list of [`Calls`]: kinds of call, each with how many and
//! each one's prompt and reply tokens, as a [`Span`] of low, expected and
//! high. What the caller measured (a pilot of the job's first calls) and
//! what it could count exactly (jobs, probes) go into those spans; this
//! module only prices and sums them.

use crate::cost::{Price, Spend, NANO_PER_USD};
use serde::{Deserialize, Serialize};

/// Low, expected and high, `low <= expected <= high`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// The low case.
    pub low: f64,
    /// The expected case.
    pub expected: f64,
    /// The high case.
    pub high: f64,
}

impl Span {
    /// One value in every case.
    pub fn exact(v: f64) -> Span {
        Span { low: v, expected: v, high: v }
    }

    /// The three cases; an expected value outside `[low, high]` widens
    /// the range to it.
    pub fn new(low: f64, expected: f64, high: f64) -> Span {
        Span { low: low.min(expected), expected, high: high.max(expected) }
    }

    /// Case by case `self + other`.
    pub fn plus(self, other: Span) -> Span {
        Span { low: self.low + other.low, expected: self.expected + other.expected, high: self.high + other.high }
    }

    /// Case by case `self * other`.
    pub fn times(self, other: Span) -> Span {
        Span { low: self.low * other.low, expected: self.expected * other.expected, high: self.high * other.high }
    }
}

/// One kind of call in a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Calls {
    /// What they are (`reactions`, `probes`, `reflections`, `answers`).
    pub what: &'static str,
    /// How many.
    pub count: Span,
    /// Each one's prompt tokens.
    pub prompt: Span,
    /// Each one's reply tokens.
    pub reply: Span,
}

/// What a pilot of a job's first calls measured: calls, tokens and cost,
/// before the job is confirmed. Its answers are the job's: they are billed
/// once, in the job's ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PilotReport {
    /// Jobs piloted (a run's reacting jobs, a validation's questions).
    pub jobs: u32,
    /// Chat calls they made.
    pub calls: u64,
    /// What they were billed (prompt and reply tokens, nano-USD).
    pub spend: Spend,
}

/// The estimate: what a job will cost, as a range, and what it assumes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Chat calls expected.
    pub calls: u64,
    /// USD in the low case.
    pub low_usd: f64,
    /// USD expected.
    pub expected_usd: f64,
    /// USD in the high case.
    pub high_usd: f64,
    /// Chat tokens (prompt and reply) in the low case.
    pub low_tokens: u64,
    /// Chat tokens expected.
    pub expected_tokens: u64,
    /// Chat tokens in the high case.
    pub high_tokens: u64,
    /// The pilot the figures rest on; absent when none was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pilot: Option<PilotReport>,
    /// What the figures assume, a sentence each.
    pub assumptions: Vec<String>,
}

impl Estimate {
    /// Prices and sums `plan`. `cached` is the share of prompt tokens a
    /// prompt cache serves in each case, billed at `price`'s cached-input
    /// rate (the most in the low case: not ordered as [`Span::new`] orders).
    pub fn priced(plan: &[Calls], price: &Price, cached: Span) -> Estimate {
        let nano_per_token = |mtok: u64| mtok as f64 / 1e6;
        let (input, cached_input, output) = (
            nano_per_token(price.input_nano_per_mtok),
            nano_per_token(price.cached_input_nano_per_mtok),
            nano_per_token(price.output_nano_per_mtok),
        );
        let case = |pick: fn(&Span) -> f64| {
            let share = pick(&cached).clamp(0.0, 1.0);
            let (mut nano, mut tokens) = (0.0, 0.0);
            for c in plan {
                let (n, prompt, reply) = (pick(&c.count), pick(&c.prompt), pick(&c.reply));
                nano += n * (prompt * (1.0 - share) * input + prompt * share * cached_input + reply * output);
                tokens += n * (prompt + reply);
            }
            (nano / NANO_PER_USD as f64, tokens.round() as u64)
        };
        let (low_usd, low_tokens) = case(|s| s.low);
        let (expected_usd, expected_tokens) = case(|s| s.expected);
        let (high_usd, high_tokens) = case(|s| s.high);
        let calls = plan.iter().map(|c| c.count.expected).sum::<f64>().round() as u64;
        Estimate {
            calls,
            low_usd,
            expected_usd,
            high_usd,
            low_tokens,
            expected_tokens,
            high_tokens,
            pilot: None,
            assumptions: Vec::new(),
        }
    }

    /// One line for a terminal: the calls, the expected cost and its range.
    pub fn line(&self, model: &str) -> String {
        let pilot = match &self.pilot {
            Some(p) => format!(
                " (a pilot of {} jobs made {} of them, ${:.4}, reused)",
                p.jobs,
                p.calls,
                p.spend.nano_usd as f64 / NANO_PER_USD as f64
            ),
            None => String::new(),
        };
        format!(
            "about {} chat calls to {model}{pilot}: ${:.4} expected, ${:.4} to ${:.4}; {} tokens expected, {} to {}",
            self.calls,
            self.expected_usd,
            self.low_usd,
            self.high_usd,
            self.expected_tokens,
            self.low_tokens,
            self.high_tokens
        )
    }
}

impl Estimate {
    /// The estimate against what the chat calls were billed (nano-USD)
    /// and used, for a summary: says when either fell outside its range.
    pub fn against(&self, billed_nano_usd: u64, tokens: u64) -> String {
        let billed_usd = billed_nano_usd as f64 / NANO_PER_USD as f64;
        let outside = |inside: bool| if inside { "" } else { ", outside the range" };
        let billed = outside(self.low_usd <= billed_usd && billed_usd <= self.high_usd);
        let used = outside(self.low_tokens <= tokens && tokens <= self.high_tokens);
        format!(
            "estimated before it: ${:.4} expected (${:.4} to ${:.4}), chat billed ${billed_usd:.4}{billed}; {} chat tokens expected ({} to {}), used {tokens}{used}",
            self.expected_usd, self.low_usd, self.high_usd, self.expected_tokens, self.low_tokens, self.high_tokens
        )
    }
}

/// The smallest, mean and largest of some measured values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observed {
    /// How many values.
    pub n: u64,
    /// The smallest.
    pub min: f64,
    /// Their sum.
    pub sum: f64,
    /// The sum of their squares.
    pub squares: f64,
    /// The largest.
    pub max: f64,
}

impl Observed {
    /// Adds one value.
    pub fn add(&mut self, v: f64) {
        if self.n == 0 {
            (self.min, self.max) = (v, v);
        }
        self.n += 1;
        self.sum += v;
        self.squares += v * v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The sample standard deviation (0 with fewer than two values).
    pub fn sd(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.squares - self.sum * self.sum / n) / (n - 1.0)).max(0.0).sqrt()
    }

    /// The mean, or `None` with no values.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Smallest, mean and largest as a span, or `None` with no values.
    pub fn span(&self) -> Option<Span> {
        self.mean().map(|m| Span::new(self.min, m, self.max))
    }
}

/// The expected number of times a running sum of `n` draws (mean `mean`,
/// standard deviation `sd`) crosses a multiple of `threshold`, the sum
/// taken as normal: `sum over j >= 1 of P(sum >= j threshold)`. It is
/// how many reflections a persona with `n` reactions of that importance
/// makes.
pub fn crossings(n: u32, mean: f64, sd: f64, threshold: f64) -> f64 {
    let (n, threshold) = (f64::from(n), threshold.max(f64::MIN_POSITIVE));
    let (centre, spread) = (n * mean, n.sqrt() * sd);
    let mut total = 0.0;
    for j in 1.. {
        let at = f64::from(j) * threshold;
        let p = if spread > 0.0 {
            upper_normal((at - centre) / spread)
        } else if centre >= at {
            1.0
        } else {
            0.0
        };
        if p < 1e-9 && at > centre {
            break;
        }
        total += p;
    }
    total
}

/// `P(Z >= z)` for a standard normal `Z` (Abramowitz and Stegun 7.1.26,
/// absolute error below 1.5e-7).
fn upper_normal(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * erfc
    } else {
        1.0 - 0.5 * erfc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_priced_case_by_case_with_cached_prompts_at_their_rate() {
        // 2.5 USD per million input, 1.25 cached, 10 output.
        let price = Price::from_usd_per_mtok(2.5, 10.0).with_cached_usd_per_mtok(1.25);
        let plan = [
            Calls {
                what: "reactions",
                count: Span::exact(100.0),
                prompt: Span::new(400.0, 500.0, 600.0),
                reply: Span::new(20.0, 40.0, 80.0),
            },
            Calls {
                what: "reflections",
                count: Span::new(0.0, 10.0, 20.0),
                prompt: Span::exact(1000.0),
                reply: Span::exact(100.0),
            },
        ];
        let e = Estimate::priced(&plan, &price, Span { low: 0.5, expected: 0.5, high: 0.0 });
        assert_eq!(e.calls, 110);
        // Low: 100 × (400 × 0.5 × 2.5 + 400 × 0.5 × 1.25 + 20 × 10) / 1e6.
        assert!((e.low_usd - 100.0 * (500.0 + 250.0 + 200.0) / 1e6).abs() < 1e-12);
        // Expected: reactions 100 × (625 + 312.5 + 400), reflections 10 × (1250 + 625 + 1000).
        let expected = (100.0 * 1337.5 + 10.0 * 2875.0) / 1e6;
        assert!((e.expected_usd - expected).abs() < 1e-12);
        // High: nothing cached.
        let high = (100.0 * (600.0 * 2.5 + 800.0) + 20.0 * (2500.0 + 1000.0)) / 1e6;
        assert!((e.high_usd - high).abs() < 1e-12);
        assert_eq!((e.low_tokens, e.expected_tokens, e.high_tokens), (42_000, 65_000, 90_000));
    }

    #[test]
    fn crossings_of_a_normal_sum_match_its_tail_probabilities() {
        // Three draws of mean 6 and sd 2: the sum is N(18, 12); the
        // threshold 20 is crossed with P(Z >= 2 / sqrt(12)) = 0.28185
        // (scipy.stats.norm.sf(2 / 12 ** 0.5)), 40 with 5e-9.
        assert!((crossings(3, 6.0, 2.0, 20.0) - 0.281_851).abs() < 1e-5);
        // Without spread: a floor.
        assert!((crossings(3, 7.0, 0.0, 20.0) - 1.0).abs() < 1e-12);
        assert!((crossings(10, 10.0, 0.0, 20.0) - 5.0).abs() < 1e-12);
        assert!((upper_normal(-1.959_964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn spans_are_kept_in_order_and_observations_summarised() {
        assert_eq!(Span::new(5.0, 9.0, 8.0), Span { low: 5.0, expected: 9.0, high: 9.0 });
        let mut o = Observed::default();
        assert_eq!(o.span(), None);
        for v in [5.0, 2.0, 8.0] {
            o.add(v);
        }
        assert_eq!(o.span(), Some(Span { low: 2.0, expected: 5.0, high: 8.0 }));
    }
}
