//! Distances between answer distributions, and the few moments the
//! validation report needs.
//!
//! A distribution is a pmf over a question's options, in order. For
//! ordinal questions option `i` sits at scale point `i + 1`, one point
//! from its neighbours, so a distance "in scale points" is in the units
//! the respondents answered in. Each function takes pmfs, so a panel of
//! one-hot answers and a panel of SSR pmfs are compared alike; for
//! one-hot answers they equal the two-sample statistics (the tests hold
//! them to scipy's `ks_2samp` and `wasserstein_distance`).

/// The pmf of `counts` (all zeros when there are none).
pub fn pmf(counts: &[f64]) -> Vec<f64> {
    let n: f64 = counts.iter().sum();
    if n <= 0.0 {
        return vec![0.0; counts.len()];
    }
    counts.iter().map(|c| c / n).collect()
}

/// The Kolmogorov-Smirnov distance: the largest gap between the two
/// cumulative distributions.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let (mut ca, mut cb, mut worst) = (0.0, 0.0, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        ca += x;
        cb += y;
        worst = worst.max((ca - cb).abs());
    }
    worst.min(1.0)
}

/// Total variation distance: half the summed absolute difference, the
/// largest difference in probability the two give any set of options.
pub fn total_variation(a: &[f64], b: &[f64]) -> f64 {
    0.5 * a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>()
}

/// The first Wasserstein (earth mover's) distance in scale points: the
/// summed gap between the cumulative distributions, one point apart.
pub fn wasserstein(a: &[f64], b: &[f64]) -> f64 {
    let (mut ca, mut cb, mut total) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b).take(a.len().saturating_sub(1)) {
        ca += x;
        cb += y;
        total += (ca - cb).abs();
    }
    total
}

/// The least probability a forecast is credited with in [`log_loss`]: a
/// forecast that gives an answer that happened no mass at all would score
/// infinity; floored, it scores -ln 1e-6 = 13.8 nats.
pub const LOG_LOSS_FLOOR: f64 = 1e-6;

/// The log-loss of forecast `f` (a pmf) for the answer `h` (from 1), in
/// nats: `-ln f[h]`, with `f[h]` floored at [`LOG_LOSS_FLOOR`].
pub fn log_loss(f: &[f64], h: u8) -> f64 {
    -f[usize::from(h) - 1].max(LOG_LOSS_FLOOR).ln()
}

/// The (multi-class) Brier score of forecast `f` for the answer `h`: the
/// squared distance to the answer's one-hot vector, from 0 (all mass on
/// it) to 2 (all mass elsewhere).
pub fn brier(f: &[f64], h: u8) -> f64 {
    f.iter().enumerate().map(|(i, p)| (p - f64::from(u8::from(i + 1 == usize::from(h)))).powi(2)).sum()
}

/// `counts` as a forecast: additively smoothed by half a count per
/// option (the Jeffreys prior), so that an option nobody in the fitted
/// data chose keeps some mass. With no counts, uniform.
pub fn smoothed(counts: &[f64]) -> Vec<f64> {
    pmf(&counts.iter().map(|c| c + 0.5).collect::<Vec<_>>())
}

/// The mean scale point (1 to k) of a pmf.
pub fn mean(p: &[f64]) -> f64 {
    p.iter().enumerate().map(|(i, x)| (i + 1) as f64 * x).sum()
}

/// The standard deviation in scale points (of the distribution itself,
/// so of a sample with divisor n).
pub fn sd(p: &[f64]) -> f64 {
    let m = mean(p);
    p.iter().enumerate().map(|(i, x)| x * ((i + 1) as f64 - m).powi(2)).sum::<f64>().sqrt()
}

/// Pearson's correlation of paired values; `None` with fewer than three
/// pairs or when either side does not vary.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 3 {
        return None;
    }
    let (mx, my) = (x[..n].iter().sum::<f64>() / n as f64, y[..n].iter().sum::<f64>() / n as f64);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x[..n].iter().zip(&y[..n]) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx).powi(2);
        syy += (b - my).powi(2);
    }
    let r = sxy / (sxx * syy).sqrt();
    (sxx > 0.0 && syy > 0.0 && r.is_finite()).then_some(r.clamp(-1.0, 1.0))
}

/// The 2.5th and 97.5th percentiles of `values` (sorted in place), by
/// linear interpolation between order statistics (numpy's default); `None`
/// when there are none.
pub fn interval95(values: &mut [f64]) -> Option<[f64; 2]> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let h = q * (values.len() - 1) as f64;
        let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
        values[lo] + (h - lo as f64) * (values[hi] - values[lo])
    };
    Some([at(0.025), at(0.975)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Samples on a 1-7 scale and what scipy 1.17 computes for them:
    /// `ks_2samp(h, s).statistic`, `wasserstein_distance(h, s)` and
    /// `numpy.std`; scipy's values are written here, not recomputed.
    #[test]
    fn distances_match_scipy_on_samples() {
        let h = [1u8, 2, 2, 3, 4, 4, 4, 5, 6, 6, 7, 7];
        let s = [3u8, 3, 4, 4, 4, 4, 4, 5, 5, 2];
        let counts = |xs: &[u8]| {
            let mut c = vec![0.0; 7];
            xs.iter().for_each(|x| c[usize::from(*x) - 1] += 1.0);
            pmf(&c)
        };
        let (ph, ps) = (counts(&h), counts(&s));
        assert!(close(ks_distance(&ph, &ps), SCIPY_KS), "{}", ks_distance(&ph, &ps));
        assert!(close(wasserstein(&ph, &ps), SCIPY_WASSERSTEIN), "{}", wasserstein(&ph, &ps));
        assert!(close(sd(&ph), NUMPY_SD_H), "{}", sd(&ph));
        assert!(close(mean(&ps), 3.8));
        assert!(close(total_variation(&ph, &ps), 0.5 * ph.iter().zip(&ps).map(|(a, b)| (a - b).abs()).sum::<f64>()));
    }

    const SCIPY_KS: f64 = 0.3333333333333333;
    const SCIPY_WASSERSTEIN: f64 = 0.9833333333333333;
    const NUMPY_SD_H: f64 = 1.920286436967152;
    /// `scipy.stats.pearsonr([2.1, 3.5, 3.9, 4.4, 5.0], [3.0, 3.2, 4.1, 4.0, 4.8])`.
    const SCIPY_PEARSON: f64 = 0.906015037593985;

    #[test]
    fn identical_and_opposite_distributions() {
        let a = [0.2, 0.3, 0.5];
        assert!(
            close(ks_distance(&a, &a), 0.0) && close(wasserstein(&a, &a), 0.0) && close(total_variation(&a, &a), 0.0)
        );
        let (low, high) = ([1.0, 0.0, 0.0], [0.0, 0.0, 1.0]);
        assert!(close(ks_distance(&low, &high), 1.0));
        assert!(close(wasserstein(&low, &high), 2.0), "two scale points apart");
        assert!(close(total_variation(&low, &high), 1.0));
    }

    #[test]
    fn pearson_and_interval() {
        let r = pearson(&[2.1, 3.5, 3.9, 4.4, 5.0], &[3.0, 3.2, 4.1, 4.0, 4.8]).expect("varies");
        assert!((r - SCIPY_PEARSON).abs() < 1e-12, "{r}");
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), None, "a constant side has no correlation");
        assert_eq!(pearson(&[1.0, 2.0], &[1.0, 2.0]), None);
        let mut v: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(interval95(&mut v), Some([2.5, 97.5]));
        assert_eq!(interval95(&mut []), None);
    }
}
