//! Paired statistics: the Wilcoxon signed-rank test with its exact null
//! distribution (ties get average ranks; the distribution is counted over
//! every sign assignment of those ranks, so it stays exact with ties), and
//! the matched-pairs rank-biserial correlation as the effect size.

use serde::{Deserialize, Serialize};

/// The result of a Wilcoxon signed-rank test on paired differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wilcoxon {
    /// Pairs with a non-zero difference (zeros are dropped, Wilcoxon's way).
    pub n: usize,
    /// Pairs with a zero difference.
    pub zeros: usize,
    /// Sum of ranks of positive differences.
    pub w_plus: f64,
    /// Sum of ranks of negative differences.
    pub w_minus: f64,
    /// The statistic `T = min(W+, W-)`.
    pub statistic: f64,
    /// Exact two-sided p-value (1 when every difference is zero).
    pub p_value: f64,
    /// Matched-pairs rank-biserial correlation `(W+ - W-) / (W+ + W-)`,
    /// in [-1, 1]; positive when the first of each pair tends to be larger.
    pub effect_size: f64,
    /// Median of all differences, zeros included.
    pub median_difference: f64,
}

/// Differences smaller than this are ties at zero.
const ZERO: f64 = 1e-12;

/// The median (0 for no values).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Doubled average ranks (integers) of `sorted`, which is in order of
/// magnitude: tied magnitudes share the average of their ranks.
fn doubled_ranks(sorted: &[f64]) -> Vec<u64> {
    let n = sorted.len();
    let mut doubled = vec![0u64; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && (sorted[j + 1].abs() - sorted[i].abs()).abs() <= ZERO {
            j += 1;
        }
        for r in &mut doubled[i..=j] {
            *r = (i + 1 + j + 1) as u64;
        }
        i = j + 1;
    }
    doubled
}

/// `counts[s]`: how many of the sign assignments of `doubled` ranks give a
/// doubled `W+` of `s`, for every `s` up to their sum.
fn sign_counts(doubled: &[u64]) -> Vec<f64> {
    let total: u64 = doubled.iter().sum();
    let mut counts = vec![0.0f64; total as usize + 1];
    counts[0] = 1.0;
    for r in doubled {
        for s in (*r as usize..=total as usize).rev() {
            counts[s] += counts[s - *r as usize];
        }
    }
    counts
}

/// The test on differences `first - second` of each pair.
pub fn wilcoxon(diffs: &[f64]) -> Wilcoxon {
    let mut nz: Vec<f64> = diffs.iter().copied().filter(|d| d.abs() > ZERO).collect();
    nz.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let n = nz.len();
    let doubled = doubled_ranks(&nz);
    let total: u64 = doubled.iter().sum();
    let plus: u64 = nz.iter().zip(&doubled).filter(|(d, _)| **d > 0.0).map(|(_, r)| r).sum();
    let minus = total - plus;
    let counts = sign_counts(&doubled);
    let t = plus.min(minus);
    let all = 2f64.powi(n as i32);
    let p_value = if n == 0 { 1.0 } else { (2.0 * counts[..=t as usize].iter().sum::<f64>() / all).min(1.0) };
    let (w_plus, w_minus) = (plus as f64 / 2.0, minus as f64 / 2.0);
    Wilcoxon {
        n,
        zeros: diffs.len() - n,
        w_plus,
        w_minus,
        statistic: w_plus.min(w_minus),
        p_value,
        effect_size: if total == 0 { 0.0 } else { (w_plus - w_minus) / (w_plus + w_minus) },
        median_difference: median(diffs),
    }
}

/// A one-sided exact Wilcoxon signed-rank test of "the median difference
/// is above 0", with ties at zero handled by Pratt's method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneSided {
    /// Differences tested (zeros included).
    pub n: usize,
    /// Differences of exactly zero: ranked with the rest (Pratt), then
    /// given no sign.
    pub zeros: usize,
    /// Sum of the ranks of the positive differences.
    pub w_plus: f64,
    /// Exact one-sided p-value: the share of the sign assignments of the
    /// non-zero ranks whose `W+` is at least the observed one (1 when every
    /// difference is zero).
    pub p_value: f64,
    /// Median of the differences.
    pub median_difference: f64,
}

/// The one-sided test on `diffs`: H1 is that their median is above 0.
///
/// Pratt's method: every difference, zeros included, is ranked by its
/// magnitude (tied magnitudes share the average rank); the zeros' ranks are
/// then set aside, so a zero lifts the ranks of the rest without taking a
/// side. The null distribution is counted exactly over the 2^m sign
/// assignments of the m non-zero ranks.
pub fn one_sided(diffs: &[f64]) -> OneSided {
    let mut all: Vec<f64> = diffs.iter().map(|d| if d.abs() <= ZERO { 0.0 } else { *d }).collect();
    all.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let n = all.len();
    // Ranked over every difference, zeros included (Pratt).
    let doubled = doubled_ranks(&all);
    let signed: Vec<(f64, u64)> = all.iter().copied().zip(doubled).filter(|(d, _)| *d != 0.0).collect();
    let plus: u64 = signed.iter().filter(|(d, _)| *d > 0.0).map(|(_, r)| r).sum();
    let counts = sign_counts(&signed.iter().map(|(_, r)| *r).collect::<Vec<u64>>());
    let m = signed.len();
    let p_value = if m == 0 { 1.0 } else { counts[plus as usize..].iter().sum::<f64>() / 2f64.powi(m as i32) };
    OneSided { n, zeros: n - m, w_plus: plus as f64 / 2.0, p_value: p_value.min(1.0), median_difference: median(diffs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Differences 1..=n (ranks 1..=n) with a set of ranks summing to `t`
    /// made negative, so that `T = t`.
    fn with_t(n: usize, t: usize) -> Vec<f64> {
        let mut left = t;
        let mut v: Vec<f64> = (1..=n).map(|r| r as f64).collect();
        for r in (1..=n).rev() {
            if r <= left {
                v[r - 1] = -(r as f64);
                left -= r;
            }
        }
        assert_eq!(left, 0);
        v
    }

    /// The published two-sided 5% critical values of T: p <= 0.05 at the
    /// critical value and p > 0.05 one above it.
    #[test]
    fn critical_values_match_the_tables() {
        for (n, crit) in [(6, 0), (7, 2), (8, 3), (9, 5), (10, 8), (11, 10), (12, 13), (15, 25), (20, 52)] {
            let at = wilcoxon(&with_t(n, crit));
            let above = wilcoxon(&with_t(n, crit + 1));
            assert!((at.statistic - crit as f64).abs() < 1e-12);
            assert!(
                at.p_value <= 0.05 && above.p_value > 0.05,
                "n {n}: p(T={crit}) = {}, p(T={}) = {}",
                at.p_value,
                crit + 1,
                above.p_value
            );
        }
    }

    #[test]
    fn exact_values_ties_zeros_and_effect_size() {
        // n = 10, T = 8: 25 of the 1,024 sign assignments give T <= 8 on one side.
        let w = wilcoxon(&with_t(10, 8));
        assert!((w.p_value - 50.0 / 1024.0).abs() < 1e-12, "{}", w.p_value);
        // Five positive differences: p = 2 / 32; all one way, r = 1.
        let w = wilcoxon(&[0.1, 0.2, 0.3, 0.4, 0.5]);
        assert_eq!((w.p_value, w.effect_size, w.statistic), (0.0625, 1.0, 0.0));
        // Zeros are dropped; tied magnitudes share ranks (1.5 each).
        let w = wilcoxon(&[0.0, 0.2, -0.2, 0.5]);
        assert_eq!((w.n, w.zeros, w.w_plus, w.w_minus), (3, 1, 4.5, 1.5));
        // With ties: sign assignments of ranks {1.5, 1.5, 3}: W+ <= 1.5 in 3 of 8.
        assert!((w.p_value - 0.75).abs() < 1e-12, "{}", w.p_value);
        assert!((wilcoxon(&[0.0, 0.0]).p_value - 1.0).abs() < 1e-12);
    }

    /// One-sided p-values against scipy 1.17.1's exact permutation test
    /// (`wilcoxon(d, zero_method="pratt", alternative="greater",
    /// method=PermutationMethod(n_resamples=inf))`), which flips the signs
    /// of the non-zero differences only, as Pratt's method asks.
    #[test]
    fn one_sided_pratt_matches_scipy() {
        let cases: [(&[f64], f64, f64); 5] = [
            (&[0.1, 0.2, 0.3, 0.4, 0.5], 15.0, 0.03125),
            (&[0.0, 0.2, -0.1, 0.5, 0.3, 0.4], 18.0, 0.0625),
            (&[0.0, 0.0, 0.3, 0.3, -0.3, 0.6, 0.1], 20.0, 0.15625),
            (&[1.0, 2.0, 3.0, -4.0, 5.0, 6.0, 7.0, -8.0, 9.0, 10.0], 43.0, 0.0654296875),
            (&[0.0, 0.1, 0.1, 0.1, 0.1], 14.0, 0.0625),
        ];
        for (d, w_plus, p) in cases {
            let t = one_sided(d);
            assert!((t.w_plus - w_plus).abs() < 1e-12, "{d:?}");
            assert!((t.p_value - p).abs() < 1e-12, "{d:?}: {} against {p}", t.p_value);
        }
        // Five topics all one way reach p < 0.05; a zero among them cannot.
        assert!(one_sided(&[0.1, 0.2, 0.3, 0.4, 0.5]).p_value < 0.05);
        assert!(one_sided(&[0.0, 0.1, 0.1, 0.1, 0.1]).p_value > 0.05);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(one_sided(&[0.0, 0.0]).p_value, 1.0));
        assert!(close(one_sided(&[-0.1, -0.2, -0.3]).p_value, 1.0), "every difference below zero");
    }
}
