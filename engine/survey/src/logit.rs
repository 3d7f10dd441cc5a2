//! Logit models fitted by maximum likelihood: a multinomial logit for
//! unordered answers and an ordered (proportional-odds) logit for scales,
//! on a design matrix of numbers, by Newton's method with step halving on
//! the (weighted) log-likelihood, which is concave for both. A fit with no
//! finite maximum (separation), a singular information matrix (collinear
//! columns), an option nobody chose or too few rows is refused with why
//! ([`NoFit`]). [`crate::impute`] builds the design and fits one per
//! question; its tests hold the fits to statsmodels'.

use crate::question::Kind;
use serde::Serialize;

/// Newton iterations before a fit is declared not to converge.
pub const MAX_ITERATIONS: usize = 100;

/// Above this size a standardised coefficient (a log odds ratio) is taken
/// for a fit that runs off to infinity: no finite maximum exists.
const DIVERGED: f64 = 40.0;

/// A fitted model, in the standardised design's terms.
#[derive(Debug, Clone, PartialEq)]
enum Params {
    /// Per option after the first, its intercept then one coefficient per
    /// column.
    Multinomial(Vec<Vec<f64>>),
    /// One coefficient per column, and the k - 1 cutpoints.
    Ordered { beta: Vec<f64>, cuts: Vec<f64> },
}

/// A converged fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    params: Params,
    /// Newton iterations taken.
    pub iterations: usize,
    /// The weighted mean log-loss (nats) on the rows it was fitted on.
    pub log_loss: f64,
}

/// Why a fit gave no model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoFit {
    /// The fitted respondents weigh nothing.
    #[error("the fitted respondents' weights are all 0")]
    Weightless,
    /// An option nobody in the fitted half chose.
    #[error("option {0} has no fitted respondent, so no finite maximum exists")]
    EmptyOption(u8),
    /// More parameters than respondents.
    #[error("{parameters} parameters for {rows} fitted respondents")]
    TooFew {
        /// Parameters.
        parameters: usize,
        /// Fitted rows.
        rows: usize,
    },
    /// The information matrix is singular.
    #[error("the traits are collinear in the fitted half")]
    Collinear,
    /// A coefficient ran off to infinity.
    #[error("a coefficient runs off to infinity: some trait's level predicts the answer perfectly in the fitted half")]
    Diverged,
    /// Newton's method did not settle.
    #[error("no convergence after {MAX_ITERATIONS} iterations")]
    Iterations,
}

fn logistic(t: f64) -> f64 {
    if t >= 0.0 {
        1.0 / (1.0 + (-t).exp())
    } else {
        let e = t.exp();
        e / (1.0 + e)
    }
}

/// The logistic cdf at ±infinity-aware `t`, its density and the density's
/// derivative.
fn cdf_pdf(t: f64) -> (f64, f64, f64) {
    if t.is_infinite() {
        return (if t > 0.0 { 1.0 } else { 0.0 }, 0.0, 0.0);
    }
    let (big, small) = (logistic(t), logistic(-t));
    let f = big * small;
    (big, f, f * (small - big))
}

/// P(lo < latent <= hi) for the logistic, computed on the side where the
/// difference does not cancel.
fn interval_probability(hi: f64, lo: f64) -> f64 {
    if lo > 0.0 {
        cdf_pdf(-lo).0 - cdf_pdf(-hi).0
    } else {
        cdf_pdf(hi).0 - cdf_pdf(lo).0
    }
}

/// Solves `a x = b` for a symmetric positive-definite `a` (n x n, row
/// major) by Cholesky; `None` when `a` is not positive definite.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    let scale = (0..n).map(|i| a[i * n + i].abs()).fold(0.0, f64::max);
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d <= 1e-13 * scale.max(f64::MIN_POSITIVE) || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    for i in 0..n {
        let s = b[i] - (0..i).map(|k| a[i * n + k] * b[k]).sum::<f64>();
        b[i] = s / a[i * n + i];
    }
    for i in (0..n).rev() {
        let s = b[i] - (i + 1..n).map(|k| a[k * n + i] * b[k]).sum::<f64>();
        b[i] = s / a[i * n + i];
    }
    Some(b)
}

/// The rows a model is fitted on: standardised design rows, answers (from
/// 1) and weights.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    /// Design rows.
    pub x: &'a [Vec<f64>],
    /// Answers, from 1.
    pub y: &'a [u8],
    /// Weights (all 1 for none).
    pub w: &'a [f64],
    /// The question's options.
    pub k: usize,
}

impl Params {
    fn flat(&self) -> Vec<f64> {
        match self {
            Params::Multinomial(rows) => rows.concat(),
            Params::Ordered { beta, cuts } => [beta.as_slice(), cuts.as_slice()].concat(),
        }
    }

    fn with_flat(&self, v: &[f64]) -> Params {
        match self {
            Params::Multinomial(rows) => Params::Multinomial(v.chunks(rows[0].len()).map(<[f64]>::to_vec).collect()),
            Params::Ordered { beta, .. } => {
                Params::Ordered { beta: v[..beta.len()].to_vec(), cuts: v[beta.len()..].to_vec() }
            }
        }
    }

    /// The probability of each option for design row `x`.
    fn predict(&self, x: &[f64]) -> Vec<f64> {
        match self {
            Params::Multinomial(rows) => {
                let eta: Vec<f64> = std::iter::once(0.0)
                    .chain(rows.iter().map(|b| b[0] + b[1..].iter().zip(x).map(|(c, v)| c * v).sum::<f64>()))
                    .collect();
                let top = eta.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = eta.iter().map(|v| (v - top).exp()).collect();
                let total: f64 = e.iter().sum();
                e.iter().map(|v| v / total).collect()
            }
            Params::Ordered { beta, cuts } => {
                let eta: f64 = beta.iter().zip(x).map(|(c, v)| c * v).sum();
                (0..=cuts.len())
                    .map(|j| {
                        let hi = cuts.get(j).map_or(f64::INFINITY, |c| c - eta);
                        let lo = if j == 0 { f64::NEG_INFINITY } else { cuts[j - 1] - eta };
                        interval_probability(hi, lo)
                    })
                    .collect()
            }
        }
    }

    /// The weighted log-likelihood, its gradient and the negated Hessian
    /// (row major); `None` where a probability underflows to 0.
    fn derivatives(&self, d: &Data<'_>) -> Option<(f64, Vec<f64>, Vec<f64>)> {
        let n = self.flat().len();
        let (mut ll, mut g, mut a) = (0.0, vec![0.0; n], vec![0.0; n * n]);
        for ((x, &y), &w) in d.x.iter().zip(d.y).zip(d.w) {
            let y = usize::from(y) - 1;
            match self {
                Params::Multinomial(rows) => {
                    let p = self.predict(x);
                    if p[y] <= 0.0 {
                        return None;
                    }
                    ll += w * p[y].ln();
                    let m = rows[0].len();
                    let xi: Vec<f64> = std::iter::once(1.0).chain(x.iter().copied()).collect();
                    for j in 1..d.k {
                        let r = f64::from(u8::from(y == j)) - p[j];
                        for (u, v) in xi.iter().enumerate() {
                            g[(j - 1) * m + u] += w * r * v;
                        }
                        for l in 1..d.k {
                            let c = w * p[j] * (f64::from(u8::from(j == l)) - p[l]);
                            for (u, xu) in xi.iter().enumerate() {
                                let at = ((j - 1) * m + u) * n + (l - 1) * m;
                                for (v, xv) in xi.iter().enumerate() {
                                    a[at + v] += c * xu * xv;
                                }
                            }
                        }
                    }
                }
                Params::Ordered { beta, cuts } => {
                    let kb = beta.len();
                    let eta: f64 = beta.iter().zip(x).map(|(c, v)| c * v).sum();
                    let hi = cuts.get(y).map_or(f64::INFINITY, |c| c - eta);
                    let lo = if y == 0 { f64::NEG_INFINITY } else { cuts[y - 1] - eta };
                    let p = interval_probability(hi, lo);
                    if p <= 0.0 {
                        return None;
                    }
                    ll += w * p.ln();
                    let ((_, fa, da), (_, fb, db)) = (cdf_pdf(hi), cdf_pdf(lo));
                    // The gradient of ln p: by beta, by the upper and the lower cut.
                    let (ub, ua, ul) = (-(fa - fb) / p, fa / p, -fb / p);
                    let (ca, cl) = (y < cuts.len(), y > 0);
                    let (ia, il) = (kb + y, (kb + y).saturating_sub(1));
                    let bb = w * (ub * ub - (da - db) / p);
                    let ba = w * (ub * ua + da / p);
                    let bl = w * (ub * ul - db / p);
                    for (u, xu) in x.iter().enumerate() {
                        g[u] += w * ub * xu;
                        for (v, xv) in x.iter().enumerate() {
                            a[u * n + v] += bb * xu * xv;
                        }
                        if ca {
                            a[u * n + ia] += ba * xu;
                            a[ia * n + u] += ba * xu;
                        }
                        if cl {
                            a[u * n + il] += bl * xu;
                            a[il * n + u] += bl * xu;
                        }
                    }
                    if ca {
                        g[ia] += w * ua;
                        a[ia * n + ia] += w * (ua * ua - da / p);
                    }
                    if cl {
                        g[il] += w * ul;
                        a[il * n + il] += w * (ul * ul + db / p);
                    }
                    if ca && cl {
                        a[ia * n + il] += w * ua * ul;
                        a[il * n + ia] += w * ua * ul;
                    }
                }
            }
        }
        Some((ll, g, a))
    }

    fn valid(&self) -> bool {
        match self {
            Params::Multinomial(_) => true,
            Params::Ordered { cuts, .. } => cuts.windows(2).all(|c| c[0] < c[1]),
        }
    }
}

/// Fits the model a question of `kind` takes to `d` by Newton's method.
pub fn fit(kind: Kind, d: &Data<'_>) -> Result<Fit, NoFit> {
    let cols = d.x.first().map_or(0, Vec::len);
    let parameters = match kind {
        Kind::Nominal => (d.k - 1) * (cols + 1),
        Kind::Ordinal => cols + d.k - 1,
    };
    if parameters >= d.y.len() {
        return Err(NoFit::TooFew { parameters, rows: d.y.len() });
    }
    let total: f64 = d.w.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(NoFit::Weightless);
    }
    let mut shares = vec![0.0; d.k];
    d.y.iter().zip(d.w).for_each(|(y, w)| shares[usize::from(*y) - 1] += w / total);
    if let Some(empty) = shares.iter().position(|s| *s <= 0.0) {
        return Err(NoFit::EmptyOption(empty as u8 + 1));
    }
    let mut params = match kind {
        Kind::Nominal => Params::Multinomial(
            (1..d.k)
                .map(|j| std::iter::once((shares[j] / shares[0]).ln()).chain(std::iter::repeat_n(0.0, cols)).collect())
                .collect(),
        ),
        Kind::Ordinal => {
            let mut cum = 0.0;
            let cuts = shares[..d.k - 1]
                .iter()
                .map(|s| {
                    cum += s;
                    (cum / (1.0 - cum)).ln()
                })
                .collect();
            Params::Ordered { beta: vec![0.0; cols], cuts }
        }
    };
    let (mut ll, mut g, mut a) = params.derivatives(d).ok_or(NoFit::Diverged)?;
    for iteration in 1..=MAX_ITERATIONS {
        // Singular at the start: collinear columns. Later, as a fit runs
        // off to infinity, its probabilities go to 0 and 1 and the matrix
        // loses rank too.
        let step =
            solve(a.clone(), g.clone()).ok_or(if iteration == 1 { NoFit::Collinear } else { NoFit::Diverged })?;
        let theta = params.flat();
        let (mut scale, mut halvings) = (1.0, 0);
        let next = loop {
            let moved: Vec<f64> = theta.iter().zip(&step).map(|(t, s)| t + scale * s).collect();
            let candidate = params.with_flat(&moved);
            if candidate.valid() {
                if let Some(found) = candidate.derivatives(d) {
                    if found.0 >= ll - 1e-12 * ll.abs() {
                        break Some((candidate, found));
                    }
                }
            }
            scale /= 2.0;
            halvings += 1;
            if halvings > 33 {
                break None;
            }
        };
        let Some((candidate, found)) = next else {
            // No step improves the likelihood: the maximum, to precision.
            return Ok(Fit { log_loss: -ll / total, params, iterations: iteration });
        };
        params = candidate;
        (ll, g, a) = found;
        let size = params.flat().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if size > DIVERGED {
            return Err(NoFit::Diverged);
        }
        let moved = step.iter().fold(0.0f64, |m, v| m.max(v.abs())) * scale;
        if halvings == 0 && moved <= 1e-10 * size.max(1.0) {
            return Ok(Fit { log_loss: -ll / total, params, iterations: iteration });
        }
    }
    Err(NoFit::Iterations)
}

impl Fit {
    /// The probability of each option for a design row.
    pub fn predict(&self, x: &[f64]) -> Vec<f64> {
        self.params.predict(x)
    }

    /// The coefficients on the data's own scale, named: for a multinomial
    /// logit, per option after the first (`option 2`), its `(intercept)`
    /// and one per column; for an ordered logit one set, and the cutpoints
    /// (`cut 1|2`, ...), with P(answer <= j) = F(cut_j - x·beta). Column
    /// `j` is named `names[j]` and was standardised as (x - mean) / sd with
    /// `scales[j]` = (mean, sd).
    pub fn coefficients(&self, names: &[String], scales: &[(f64, f64)]) -> Vec<Coefficient> {
        let mut out = Vec::new();
        match &self.params {
            Params::Multinomial(rows) => {
                for (j, b) in rows.iter().enumerate() {
                    let option = format!("option {}", j + 2);
                    let shift: f64 = b[1..].iter().zip(scales).map(|(c, (m, s))| c * m / s).sum();
                    out.push(Coefficient { equation: option.clone(), name: "(intercept)".into(), value: b[0] - shift });
                    for ((c, (_, s)), name) in b[1..].iter().zip(scales).zip(names) {
                        out.push(Coefficient { equation: option.clone(), name: name.clone(), value: c / s });
                    }
                }
            }
            Params::Ordered { beta, cuts } => {
                let shift: f64 = beta.iter().zip(scales).map(|(c, (m, s))| c * m / s).sum();
                for ((c, (_, s)), name) in beta.iter().zip(scales).zip(names) {
                    out.push(Coefficient { equation: "latent".into(), name: name.clone(), value: c / s });
                }
                for (j, c) in cuts.iter().enumerate() {
                    out.push(Coefficient {
                        equation: "cutpoints".into(),
                        name: format!("cut {}|{}", j + 1, j + 2),
                        value: c + shift,
                    });
                }
            }
        }
        out
    }
}

/// One coefficient of a fit, on the data's scale.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coefficient {
    /// `option 2`... for a multinomial logit, `latent` or `cutpoints` for
    /// an ordered one.
    pub equation: String,
    /// The column (`age`, `educ=2`, `(intercept)`, `cut 1|2`).
    pub name: String,
    /// Its value.
    pub value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_and_refuses_a_singular_matrix() {
        let x = solve(vec![4.0, 2.0, 2.0, 3.0], vec![2.0, 1.0]).expect("positive definite");
        assert!((x[0] - 0.5).abs() < 1e-15 && x[1].abs() < 1e-15, "{x:?}");
        assert_eq!(solve(vec![1.0, 1.0, 1.0, 1.0], vec![1.0, 1.0]), None);
    }

    /// The analytic gradient and Hessian of both models against finite
    /// differences of the log-likelihood.
    #[test]
    fn derivatives_match_finite_differences() {
        let x: Vec<Vec<f64>> = (0..30).map(|i| vec![(f64::from(i) * 0.37).sin(), f64::from(i % 3 == 0)]).collect();
        let y: Vec<u8> = (0..30).map(|i| (i * 7 % 3) as u8 + 1).collect();
        let w: Vec<f64> = (0..30).map(|i| 0.5 + f64::from(i % 4) * 0.25).collect();
        let d = Data { x: &x, y: &y, w: &w, k: 3 };
        let models = [
            Params::Multinomial(vec![vec![0.1, -0.3, 0.2], vec![-0.2, 0.4, 0.1]]),
            Params::Ordered { beta: vec![0.3, -0.5], cuts: vec![-0.4, 0.6] },
        ];
        for p in models {
            let (_, g, a) = p.derivatives(&d).expect("finite");
            let theta = p.flat();
            let n = theta.len();
            let h = 1e-6;
            let at = |v: &[f64]| p.with_flat(v).derivatives(&d).expect("finite");
            for i in 0..n {
                let (mut up, mut down) = (theta.clone(), theta.clone());
                up[i] += h;
                down[i] -= h;
                let (lu, gu, _) = at(&up);
                let (ld, gd, _) = at(&down);
                assert!(((lu - ld) / (2.0 * h) - g[i]).abs() < 1e-6, "{p:?} gradient {i}");
                for j in 0..n {
                    let second = -(gu[j] - gd[j]) / (2.0 * h);
                    assert!((second - a[j * n + i]).abs() < 1e-5, "{p:?} hessian {i},{j}: {second} {}", a[j * n + i]);
                }
            }
        }
    }

    /// A level that predicts the answer perfectly has no finite maximum:
    /// the fit says so rather than report a huge coefficient.
    #[test]
    fn separation_is_reported_not_fitted() {
        let x: Vec<Vec<f64>> = (0..40).map(|i| vec![f64::from(i >= 20)]).collect();
        let y: Vec<u8> = (0..40).map(|i| if i >= 20 { 2 } else { 1 + (i % 2) as u8 }).collect();
        let w = vec![1.0; 40];
        let d = Data { x: &x, y: &y, w: &w, k: 2 };
        assert_eq!(fit(Kind::Nominal, &d), Err(NoFit::Diverged));
        let y: Vec<u8> = (0..40).map(|i| 1 + u8::from(i % 3 == 0)).collect();
        let fitted = fit(Kind::Nominal, &Data { y: &y, ..d }).expect("converges");
        assert!(fitted.iterations < 20);
    }
}
