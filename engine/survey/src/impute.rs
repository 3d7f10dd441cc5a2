//! The statistical imputer a model must beat: per question, a
//! multinomial logit (nominal questions) or an ordered logit (ordinal
//! ones) of the answer on the respondent's traits and on the answers the
//! validation gives (`--given`), fitted by unpenalised maximum likelihood
//! on the fitted half and scored on the held-out half like every source.
//!
//! The design matrix:
//!
//! - a trait without labels whose fitted values are all numbers enters as
//!   a number (an empty cell as the fitted mean);
//! - any other trait, and each given answer, enters one-hot, its first
//!   level dropped. Levels sort as numbers when they all are numbers.
//!   A level fewer than [`MIN_LEVEL`] fitted respondents hold gets no
//!   column of its own: it is counted with the first level, as an empty
//!   cell is. (Where a level is that rare, its own coefficient is mostly
//!   noise, and often no finite one exists: all of its few respondents
//!   gave one answer.)
//!
//! Numbers are standardised inside the fit and the coefficients reported
//! on the data's own scale. The fit is Newton's method with step halving
//! on the (weighted) log-likelihood, which is concave for both models.
//! A fit that does not converge (a level or a number that predicts the
//! answer perfectly, so that no finite maximum exists; collinear traits;
//! an option nobody in the fitted half chose) is reported with why, and
//! its forecasts are the fitted half's marginal distribution.
//!
//! The tests hold the fits to statsmodels' `MNLogit` and `OrderedModel`
//! on all 944 ANES 1996 respondents (`fixtures/surveys/anes96/imputer.json`,
//! made by `make_imputer_reference.py`).

use crate::panel::{PanelMap, Respondent};
use crate::question::{Kind, Survey};
use crate::score::{Answer, Source};
use crate::stats;
use engine::rng::{Purpose, Stream};
use serde::Serialize;

/// Fewest fitted respondents a level of a one-hot trait needs for a
/// column of its own.
pub const MIN_LEVEL: usize = 10;

/// Folds of the fitted half for the imputer's forecasts of its own
/// respondents (see [`imputer`]).
pub const FOLDS: usize = 5;

/// Newton iterations before a fit is declared not to converge.
pub const MAX_ITERATIONS: usize = 100;

/// Above this size a standardised coefficient (a log odds ratio) is taken
/// for a fit that runs off to infinity: no finite maximum exists.
const DIVERGED: f64 = 40.0;

/// One input of the design: a panel column (a trait) or a given answer,
/// with every respondent's raw value (`None` for an empty cell).
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// Its name in the coefficients (`age`, `educ`, `PID`).
    pub name: String,
    /// Whether it may enter as a number (a trait without labels); it does
    /// when every fitted value is one.
    pub numeric: bool,
    /// Every respondent's value.
    pub values: Vec<Option<String>>,
}

/// How one design column reads its input.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    /// Input `input` as a number, standardised.
    Number { input: usize, mean: f64, sd: f64 },
    /// 1 when input `input` has this level.
    Level { input: usize, level: String },
}

/// The design matrix's columns, fixed on the fitted half.
#[derive(Debug, Clone, PartialEq)]
pub struct Design {
    columns: Vec<Column>,
    /// Each column's name: `age`, or `educ=2` for a level.
    pub names: Vec<String>,
}

fn sort_levels(levels: &mut [String]) {
    let numbers: Option<Vec<f64>> = levels.iter().map(|l| l.trim().parse::<f64>().ok()).collect();
    match numbers {
        Some(_) => levels.sort_by(|a, b| {
            let (x, y) = (a.trim().parse::<f64>().unwrap_or(0.0), b.trim().parse::<f64>().unwrap_or(0.0));
            x.total_cmp(&y)
        }),
        None => levels.sort(),
    }
}

impl Design {
    /// The columns `inputs` give on the `fitted` rows.
    pub fn new(inputs: &[Input], fitted: &[usize]) -> Design {
        let mut columns = Vec::new();
        let mut names = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let present: Vec<&str> = fitted.iter().filter_map(|&r| input.values[r].as_deref()).collect();
            let numbers: Option<Vec<f64>> =
                present.iter().map(|v| v.trim().parse::<f64>().ok().filter(|x| x.is_finite())).collect();
            match (input.numeric, numbers) {
                (true, Some(xs)) if !xs.is_empty() => {
                    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
                    if sd > 0.0 {
                        columns.push(Column::Number { input: i, mean, sd });
                        names.push(input.name.clone());
                    }
                }
                _ => {
                    let mut levels: Vec<String> = present.iter().map(|v| v.to_string()).collect();
                    levels.sort();
                    levels.dedup();
                    sort_levels(&mut levels);
                    let held: Vec<String> = levels
                        .into_iter()
                        .filter(|l| present.iter().filter(|v| **v == l).count() >= MIN_LEVEL)
                        .collect();
                    for level in held.into_iter().skip(1) {
                        names.push(format!("{}={level}", input.name));
                        columns.push(Column::Level { input: i, level });
                    }
                }
            }
        }
        Design { columns, names }
    }

    /// Row `r`'s values, standardised (without the intercept).
    pub fn row(&self, inputs: &[Input], r: usize) -> Vec<f64> {
        self.columns
            .iter()
            .map(|c| match c {
                Column::Number { input, mean, sd } => inputs[*input].values[r]
                    .as_deref()
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .map_or(0.0, |x| if x.is_finite() { (x - mean) / sd } else { 0.0 }),
                Column::Level { input, level } => {
                    f64::from(u8::from(inputs[*input].values[r].as_deref() == Some(level)))
                }
            })
            .collect()
    }

    /// Each column's mean and sd (0 and 1 for a level), to put
    /// coefficients back on the data's scale.
    fn scales(&self) -> Vec<(f64, f64)> {
        self.columns
            .iter()
            .map(|c| match c {
                Column::Number { mean, sd, .. } => (*mean, *sd),
                Column::Level { .. } => (0.0, 1.0),
            })
            .collect()
    }
}

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
    /// (`cut 1|2`, ...), with P(answer <= j) = F(cut_j - x·beta).
    pub fn coefficients(&self, design: &Design) -> Vec<Coefficient> {
        let scales = design.scales();
        let mut out = Vec::new();
        match &self.params {
            Params::Multinomial(rows) => {
                for (j, b) in rows.iter().enumerate() {
                    let option = format!("option {}", j + 2);
                    let shift: f64 = b[1..].iter().zip(&scales).map(|(c, (m, s))| c * m / s).sum();
                    out.push(Coefficient { equation: option.clone(), name: "(intercept)".into(), value: b[0] - shift });
                    for ((c, (_, s)), name) in b[1..].iter().zip(&scales).zip(&design.names) {
                        out.push(Coefficient { equation: option.clone(), name: name.clone(), value: c / s });
                    }
                }
            }
            Params::Ordered { beta, cuts } => {
                let shift: f64 = beta.iter().zip(&scales).map(|(c, (m, s))| c * m / s).sum();
                for ((c, (_, s)), name) in beta.iter().zip(&scales).zip(&design.names) {
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

/// The imputer's inputs: every trait of `map` (in the map's column
/// order), then each `given` question's answers (its id, every
/// respondent's answer).
pub fn inputs(map: &PanelMap, respondents: &[Respondent], given: &[(&str, &[Option<u8>])]) -> Vec<Input> {
    let mut out: Vec<Input> = map
        .columns
        .iter()
        .filter(|(_, spec)| !spec.ignore)
        .map(|(column, spec)| Input {
            name: column.clone(),
            numeric: spec.labels.is_empty(),
            values: respondents.iter().map(|r| r.values.get(column).filter(|v| !v.is_empty()).cloned()).collect(),
        })
        .collect();
    for (id, answers) in given {
        out.push(Input {
            name: (*id).to_string(),
            numeric: false,
            values: answers.iter().map(|a| a.map(|a| a.to_string())).collect(),
        });
    }
    out
}

/// What the imputer did on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImputerFit {
    /// The question's id.
    pub question: String,
    /// `multinomial logit` (nominal) or `ordered logit` (ordinal).
    pub model: &'static str,
    /// Fitted respondents (with an answer).
    pub respondents: usize,
    /// The design's columns.
    pub columns: Vec<String>,
    /// Whether the fit converged; when not, the imputer's forecasts are
    /// the fitted half's marginal distribution.
    pub converged: bool,
    /// Newton iterations, when it converged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    /// Why it fell back to the marginal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The weighted mean log-loss on the fitted half, when it converged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted_log_loss: Option<f64>,
    /// The coefficients, on the data's scale.
    pub coefficients: Vec<Coefficient>,
}

/// Fits the imputer per question of `survey` on the respondents not
/// `held_out` (weighted by `weights`), and gives its source: for every
/// respondent, the fitted model's forecast and a seeded draw from it, as
/// the other baselines give theirs.
///
/// A fitted respondent's own forecast is out of fold: the fitted half is
/// cut into [`FOLDS`] seeded folds, and each fold is forecast by the same
/// model fitted on the other folds (or their marginal, where that fit, or
/// the whole half's, does not converge). Only `--calibrate` reads them (its
/// blend with the imputer is fitted on the fitted half), and an in-sample
/// forecast would flatter the imputer there. The held-out half, which
/// every figure scores, is forecast by the fit on the whole fitted half.
pub fn imputer(
    survey: &Survey,
    inputs: &[Input],
    human: &[Vec<Option<u8>>],
    held_out: &[bool],
    weights: &[f64],
    seed: u64,
) -> (Source, Vec<ImputerFit>) {
    let n = held_out.len();
    let mut fits = Vec::new();
    let mut answers = Vec::new();
    for (q, question) in survey.questions.iter().enumerate() {
        let k = question.options.len();
        let fitted: Vec<usize> = (0..n).filter(|&r| !held_out[r] && human[q][r].is_some()).collect();
        let design = Design::new(inputs, &fitted);
        let rows: Vec<Vec<f64>> = (0..n).map(|r| design.row(inputs, r)).collect();
        let x: Vec<Vec<f64>> = fitted.iter().map(|&r| rows[r].clone()).collect();
        let y: Vec<u8> = fitted.iter().filter_map(|&r| human[q][r]).collect();
        let w: Vec<f64> = fitted.iter().map(|&r| weights[r]).collect();
        let result = fit(question.kind, &Data { x: &x, y: &y, w: &w, k });
        let mut counts = vec![0.0; k];
        y.iter().zip(&w).for_each(|(a, w)| counts[usize::from(*a) - 1] += w);
        let marginal = stats::smoothed(&counts);
        let mut forecasts: Vec<Vec<f64>> =
            rows.iter().map(|row| result.as_ref().map_or_else(|_| marginal.clone(), |f| f.predict(row))).collect();
        let mut order: Vec<usize> = (0..fitted.len()).collect();
        let mut shuffle = Stream::derive(seed, q as u32 + 1, 5, Purpose::Survey);
        for i in (1..order.len()).rev() {
            order.swap(i, shuffle.below(i + 1));
        }
        let mut fold_of = vec![0; fitted.len()];
        order.iter().enumerate().for_each(|(at, &j)| fold_of[j] = at % FOLDS);
        for f in 0..FOLDS {
            let (out, train): (Vec<usize>, Vec<usize>) = (0..fitted.len()).partition(|&j| fold_of[j] == f);
            let train: Vec<usize> = train.iter().map(|&j| fitted[j]).collect();
            let design = Design::new(inputs, &train);
            let x: Vec<Vec<f64>> = train.iter().map(|&r| design.row(inputs, r)).collect();
            let y: Vec<u8> = train.iter().filter_map(|&r| human[q][r]).collect();
            let w: Vec<f64> = train.iter().map(|&r| weights[r]).collect();
            let within = result.as_ref().ok().and_then(|_| fit(question.kind, &Data { x: &x, y: &y, w: &w, k }).ok());
            let mut counts = vec![0.0; k];
            y.iter().zip(&w).for_each(|(a, w)| counts[usize::from(*a) - 1] += w);
            for r in out.iter().map(|&j| fitted[j]) {
                forecasts[r] =
                    within.as_ref().map_or_else(|| stats::smoothed(&counts), |m| m.predict(&design.row(inputs, r)));
            }
        }
        let mut s = Stream::derive(seed, q as u32 + 1, 4, Purpose::Survey);
        let column = forecasts
            .into_iter()
            .map(|forecast| Some(Answer::drawn(s.weighted(&forecast) as u8 + 1, forecast)))
            .collect();
        answers.push(column);
        fits.push(ImputerFit {
            question: question.id.clone(),
            model: match question.kind {
                Kind::Nominal => "multinomial logit",
                Kind::Ordinal => "ordered logit",
            },
            respondents: fitted.len(),
            converged: result.is_ok(),
            iterations: result.as_ref().ok().map(|f| f.iterations),
            note: result.as_ref().err().map(|e| format!("{e}: the imputer forecasts the fitted half's marginal")),
            fitted_log_loss: result.as_ref().ok().map(|f| f.log_loss),
            coefficients: result.as_ref().map(|f| f.coefficients(&design)).unwrap_or_default(),
            columns: design.names,
        });
    }
    (Source::new("imputer", answers), fits)
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

    /// The fits against statsmodels' on all 944 ANES 1996 respondents
    /// (`fixtures/surveys/anes96/imputer.json`, made by
    /// `make_imputer_reference.py` beside it).
    #[test]
    fn fits_agree_with_statsmodels_on_anes96() {
        let reference: serde_json::Value =
            serde_json::from_str(include_str!("../../../fixtures/surveys/anes96/imputer.json")).expect("json");
        let suite = crate::Suite::builtin("anes96").expect("built in");
        let people = &suite.panel.respondents;
        let answers_of = |id: &str| {
            let q = suite.survey.questions.iter().position(|q| q.id == id).expect("a question");
            suite.answers.by_question[q].clone()
        };
        let all: Vec<usize> = (0..people.len()).collect();
        let fits = reference["fits"].as_array().expect("fits");
        assert_eq!(fits.len(), 6);
        for case in fits {
            let question = case["question"].as_str().expect("question");
            let columns: Vec<&str> =
                case["columns"].as_array().expect("columns").iter().map(|c| c.as_str().expect("name")).collect();
            let traits = inputs(&suite.map, people, &[]);
            let chosen: Vec<Input> = columns
                .iter()
                .map(|c| match traits.iter().find(|t| t.name == *c) {
                    Some(t) => t.clone(),
                    None => inputs(&suite.map, people, &[(c, &answers_of(c))]).pop().expect("the given answers"),
                })
                .collect();
            let (y, k): (Vec<u8>, usize) = match question {
                "party3" => (
                    answers_of("PID")
                        .iter()
                        .map(|p| [1, 1, 1, 2, 3, 3, 3][usize::from(p.expect("all answered")) - 1])
                        .collect(),
                    3,
                ),
                id => {
                    let y: Vec<u8> = answers_of(id).iter().map(|a| a.expect("all answered")).collect();
                    let k = usize::from(*y.iter().max().expect("rows"));
                    (y, k)
                }
            };
            let kind = if case["kind"] == "nominal" { Kind::Nominal } else { Kind::Ordinal };
            // statsmodels differentiates OrderedModel's log-likelihood
            // numerically: its gradient at the maximum it reports is up to
            // 7.5e-7 (the fixture's max_abs_score), and its coefficients
            // differ from the exact maximum's by up to about 1.3e-7 here.
            // MNLogit's derivatives are analytic.
            let slack = if kind == Kind::Ordinal { 3e-7 } else { 1e-12 };
            let design = Design::new(&chosen, &all);
            let x: Vec<Vec<f64>> = all.iter().map(|&r| design.row(&chosen, r)).collect();
            let w = vec![1.0; y.len()];
            let fitted = fit(kind, &Data { x: &x, y: &y, w: &w, k }).expect("converges on all 944");
            let what = format!("{question} on {columns:?}");
            let want = case["log_loss"].as_f64().expect("log-loss");
            assert!((fitted.log_loss - want).abs() < 1e-8, "{what}: log-loss {} against {want}", fitted.log_loss);
            let ours = fitted.coefficients(&design);
            let theirs = case["coefficients"].as_array().expect("coefficients");
            assert_eq!(ours.len(), theirs.len(), "{what}: {:?}", ours.iter().map(|c| &c.name).collect::<Vec<_>>());
            for t in theirs {
                let (equation, name) = (t["equation"].as_str().expect("eq"), t["name"].as_str().expect("name"));
                let value = t["value"].as_f64().expect("value");
                let c = ours.iter().find(|c| c.equation == equation && c.name == name);
                let c = c.unwrap_or_else(|| panic!("{what}: no {equation} {name}"));
                assert!(
                    (c.value - value).abs() <= 1e-6 * value.abs() + slack,
                    "{what}: {equation} {name} is {} against statsmodels' {value}",
                    c.value
                );
            }
        }
    }
}
