//! One distribution of answers: the one histogram type of the run's summary
//! (purchase intent per stimulus, each probe), of the HTML report's figures
//! ([`crate::analysis`]) and of `inspect`.

use serde::{Deserialize, Serialize};

/// Answers over the points 1 to k: k = 5 for purchase intent and a 1-5
/// probe, else a probe's own options. Counts, the mean and its 95%
/// interval; in `probabilities` or `verbalized` mode, the panel's
/// distribution as well.
///
/// ```
/// use engine::summary::Distribution;
/// let mut d = Distribution::default();
/// [1, 2, 2, 5].into_iter().for_each(|a| d.add(a));
/// assert_eq!((d.n, d.mean, d.histogram.as_slice()), (4, 2.5, &[1, 2, 0, 0, 1][..]));
/// assert!(d.ci95[0] < 2.5 && 2.5 < d.ci95[1]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Answers counted.
    pub n: u64,
    /// Mean answer, points numbered from 1 (0 when empty).
    pub mean: f64,
    /// 95% interval of the mean (normal approximation, 1.96 standard
    /// errors; the mean itself with one answer).
    #[serde(default)]
    pub ci95: [f64; 2],
    /// Counts of each point, in order (1 to 5 for purchase intent).
    pub histogram: Vec<u64>,
    /// Replies that never parsed (a probe's; purchase intent counts only
    /// parsed reactions).
    #[serde(default)]
    pub unparsed: u64,
    /// Purchase intent by semantic similarity rating, when the run
    /// measured it (`[intent] method = "ssr"` or `"both"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssr: Option<SsrDistribution>,
    /// In `probabilities` or `verbalized` mode: the panel's distribution,
    /// the mean of its personas' (the histogram counts their rounded
    /// means, each persona's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixture: Option<Vec<f64>>,
    /// The sums behind `mixture`, and how many personas they hold.
    #[serde(skip)]
    mixture_sums: (Vec<f64>, u64),
}

impl Default for Distribution {
    /// Empty, over 1 to 5.
    fn default() -> Self {
        Distribution::with_points(5)
    }
}

impl Distribution {
    /// An empty distribution over `points` points.
    pub fn with_points(points: u8) -> Self {
        Distribution {
            n: 0,
            mean: 0.0,
            ci95: [0.0, 0.0],
            histogram: vec![0; usize::from(points)],
            unparsed: 0,
            ssr: None,
            mixture: None,
            mixture_sums: (Vec::new(), 0),
        }
    }

    /// Counts one answer (a point from 1; 0 counts as 1, and a point past
    /// the histogram grows it) and updates the mean and its interval.
    pub fn add(&mut self, answer: u8) {
        let i = usize::from(answer.max(1) - 1);
        if i >= self.histogram.len() {
            self.histogram.resize(i + 1, 0);
        }
        self.histogram[i] += 1;
        self.n += 1;
        let sum: f64 = self.histogram.iter().enumerate().map(|(i, c)| (i + 1) as f64 * *c as f64).sum();
        let sq: f64 = self.histogram.iter().enumerate().map(|(i, c)| ((i + 1) as f64).powi(2) * *c as f64).sum();
        (self.mean, self.ci95) = crate::intent::stats::mean_ci95(self.n, sum, sq);
    }

    /// Adds one persona's distribution over the points to the panel's
    /// mixture.
    pub fn add_pmf(&mut self, p: &[f64]) {
        let sums = &mut self.mixture_sums;
        if sums.0.len() < p.len() {
            sums.0.resize(p.len(), 0.0);
        }
        sums.0.iter_mut().zip(p).for_each(|(a, b)| *a += b);
        sums.1 += 1;
        let n = sums.1 as f64;
        self.mixture = Some(sums.0.iter().map(|x| x / n).collect());
    }

    /// The counts of 1 to 5 (zeros past the histogram's end; points past 5
    /// left out), as purchase intent's five-point figures take them.
    pub fn first_five(&self) -> [u64; 5] {
        std::array::from_fn(|i| self.histogram.get(i).copied().unwrap_or(0))
    }
}

/// SSR over the respondents of one stimulus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SsrDistribution {
    /// Respondents rated.
    pub n: u64,
    /// Mean pmf over them.
    pub pmf: [f64; 5],
    /// Mean expected rating.
    pub expected: f64,
    /// 95% interval of the mean expected rating (normal approximation,
    /// 1.96 standard errors; equal to the mean with one respondent).
    pub expected_ci95: [f64; 2],
    /// KS similarity between the direct distribution (the chat model's
    /// digits, which every run has) and the SSR pmf: 1 = the same.
    pub ks_similarity_to_direct: Option<f64>,
    /// Sum and sum of squares of the expected ratings, and the pmf sums,
    /// for adding respondents.
    #[serde(skip)]
    sums: (f64, f64, [f64; 5]),
}

impl SsrDistribution {
    /// Adds one respondent's rating.
    pub fn add(&mut self, r: &crate::intent::SsrRating) {
        self.n += 1;
        self.sums.0 += r.expected;
        self.sums.1 += r.expected * r.expected;
        self.sums.2.iter_mut().zip(r.pmf).for_each(|(a, b)| *a += b);
        let n = self.n as f64;
        self.pmf = self.sums.2.map(|x| x / n);
        (self.expected, self.expected_ci95) = crate::intent::stats::mean_ci95(self.n, self.sums.0, self.sums.1);
    }
}

#[cfg(test)]
mod tests {
    use super::Distribution;

    #[test]
    fn mean_and_interval_over_the_points() {
        let mut d = Distribution::default();
        for v in 1..=5 {
            d.add(v);
        }
        assert_eq!(d.histogram, [1, 1, 1, 1, 1]);
        assert!((d.mean - 3.0).abs() < 1e-12);
        let half = 1.96 * (2.5f64 / 5.0).sqrt();
        assert!((d.ci95[0] - (3.0 - half)).abs() < 1e-12 && (d.ci95[1] - (3.0 + half)).abs() < 1e-12);
    }

    #[test]
    fn a_probe_scale_grows_and_five_points_pad() {
        let mut d = Distribution::with_points(3);
        d.add(0);
        d.add(7);
        assert_eq!(d.histogram, [1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(d.first_five(), [1, 0, 0, 0, 0]);
        assert_eq!(Distribution::with_points(2).first_five(), [0; 5]);
        d.add_pmf(&[0.5, 0.5]);
        d.add_pmf(&[1.0, 0.0, 0.0]);
        assert_eq!(d.mixture, Some(vec![0.75, 0.25, 0.0]));
    }

    /// A summary written before the interval was recorded still reads.
    #[test]
    fn an_older_summary_reads() {
        let d: Distribution = serde_json::from_str(r#"{"n":1,"mean":2.0,"histogram":[0,1,0,0,0]}"#).expect("reads");
        assert_eq!((d.n, d.ci95, d.unparsed), (1, [0.0, 0.0], 0));
    }
}
