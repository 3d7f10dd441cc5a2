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
