//! Comparing rating distributions.

use super::POINTS;

/// KS similarity of two pmfs over 1..5: one minus the largest gap between
/// their cumulative distributions (the paper's distribution metric). 1 for
/// identical distributions, 0 for disjoint ones at opposite ends.
pub fn ks_similarity(a: &[f64; POINTS], b: &[f64; POINTS]) -> f64 {
    let (mut ca, mut cb, mut worst) = (0.0, 0.0, 0.0f64);
    for r in 0..POINTS {
        ca += a[r];
        cb += b[r];
        worst = worst.max((ca - cb).abs());
    }
    1.0 - worst.min(1.0)
}

/// The pmf of counts per point (uniform zero when there are none).
pub fn pmf_of_counts(counts: &[u64; POINTS]) -> [f64; POINTS] {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return [0.0; POINTS];
    }
    counts.map(|c| c as f64 / n as f64)
}

/// The mean of `n` values with sum `sum` and sum of squares `sum_sq`, and
/// its 95% interval (normal approximation, 1.96 standard errors of the
/// sample variance; the mean itself for one value).
pub fn mean_ci95(n: u64, sum: f64, sum_sq: f64) -> (f64, [f64; 2]) {
    if n == 0 {
        return (0.0, [0.0, 0.0]);
    }
    let k = n as f64;
    let mean = sum / k;
    let var = if n > 1 { ((sum_sq - k * mean * mean) / (k - 1.0)).max(0.0) } else { 0.0 };
    let half = 1.96 * (var / k).sqrt();
    (mean, [mean - half, mean + half])
}
