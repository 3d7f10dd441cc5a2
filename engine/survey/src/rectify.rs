//! Rectified estimates of the people's answer shares: prediction-powered
//! inference with power tuning (PPI++; Angelopoulos, Duchi and Zrnic,
//! 2023) for a mean.
//!
//! A small labelled set has both the people's answers `y` (here 1 when a
//! respondent chose an option, else 0) and the model's predictions `f` of
//! them (the probability it gave that option); a larger unlabelled set has
//! the model's predictions only. The estimate of the people's mean is
//!
//! θ = λ·mean(f_unlabelled) + mean(y − λ·f_labelled),
//!
//! which is unbiased for any λ; λ = 0 is the people-only mean, λ = 1 plain
//! PPI. The tuned λ minimises the estimate's variance:
//! λ = Cov(y, f_labelled) / ((1 + n/N)·Var(f)), clipped to [0, 1], with the
//! covariance over the n labelled rows (divisor n) and the variance over
//! all n + N predictions (divisor n + N − 1). These are the definitions of
//! PyPI's `ppi-python` (`ppi_mean_pointestimate`, `ppi_mean_ci`), whose
//! values the tests reproduce. The interval is the normal one from the
//! two parts' variances (each with divisor n or N).

use crate::question::Survey;
use crate::score::Source;
use serde::Serialize;

/// The 97.5th percentile of the standard normal: a 95% two-sided interval.
const Z95: f64 = 1.959_963_984_540_054;

/// An estimate of a mean with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The estimate.
    pub value: f64,
    /// Its 95% normal interval.
    pub interval: [f64; 2],
    /// Its standard error.
    pub std_error: f64,
}

/// A PPI++ estimate: the estimate, the tuning parameter and the effective
/// sample size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rectified {
    /// The estimate and its interval.
    #[serde(flatten)]
    pub estimate: Estimate,
    /// The tuned λ in [0, 1]: how much the model's predictions are used.
    pub lambda: f64,
    /// How many labelled respondents alone would give an estimate this
    /// precise: the people-only variance per respondent over this
    /// estimate's variance. `None` when the labelled answers do not vary.
    pub effective_n: Option<f64>,
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The variance with divisor `len - ddof`.
fn variance(x: &[f64], ddof: usize) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - ddof) as f64
}

fn estimate(value: f64, variance: f64) -> Estimate {
    let se = variance.max(0.0).sqrt();
    Estimate { value, interval: [value - Z95 * se, value + Z95 * se], std_error: se }
}

/// The people-only estimate of the mean of `y`, with its normal interval.
/// `None` without labelled rows.
pub fn classical(y: &[f64]) -> Option<Estimate> {
    (!y.is_empty()).then(|| estimate(mean(y), variance(y, 0) / y.len() as f64))
}

/// The PPI++ estimate of the mean of `y` from the labelled pairs
/// (`y`, `f_labelled`) and the unlabelled predictions `f_unlabelled`.
/// `None` without labelled or unlabelled rows. When the predictions do
/// not vary at all, λ is 0 (they carry no information).
pub fn ppi_mean(y: &[f64], f_labelled: &[f64], f_unlabelled: &[f64]) -> Option<Rectified> {
    let (n, big_n) = (y.len(), f_unlabelled.len());
    if n == 0 || big_n == 0 || f_labelled.len() != n {
        return None;
    }
    let (my, mf) = (mean(y), mean(f_labelled));
    let cov = y.iter().zip(f_labelled).map(|(a, b)| (a - my) * (b - mf)).sum::<f64>() / n as f64;
    let all: Vec<f64> = f_labelled.iter().chain(f_unlabelled).copied().collect();
    let var_f = if all.len() > 1 { variance(&all, 1) } else { 0.0 };
    let ratio = n as f64 / big_n as f64;
    let lambda = if var_f > 0.0 { (cov / ((1.0 + ratio) * var_f)).clamp(0.0, 1.0) } else { 0.0 };
    let imputed: Vec<f64> = f_unlabelled.iter().map(|f| lambda * f).collect();
    let rectifier: Vec<f64> = y.iter().zip(f_labelled).map(|(a, f)| a - lambda * f).collect();
    let value = mean(&imputed) + mean(&rectifier);
    let var = variance(&imputed, 0) / big_n as f64 + variance(&rectifier, 0) / n as f64;
    let people = variance(y, 0);
    let effective_n = (people > 0.0 && var > 0.0).then(|| people / var);
    Some(Rectified { estimate: estimate(value, var), lambda, effective_n })
}

/// One option's share, estimated three ways.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OptionShare {
    /// The option, from 1.
    pub option: u8,
    /// Its label.
    pub label: String,
    /// The fitted half's people alone.
    pub people_only: Estimate,
    /// PPI++: the fitted half's people and model, the held-out half's model.
    pub rectified: Rectified,
    /// The share among the held-out half's people, whose answers neither
    /// estimate saw: what both are scored against.
    pub held_out_share: f64,
}

/// One question's rectified shares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionShares {
    /// The question's id.
    pub question: String,
    /// The model source whose forecasts are the predictions.
    pub source: String,
    /// Labelled respondents (fitted, with a human answer and the model's).
    pub labelled: usize,
    /// Unlabelled respondents (held out, with the model's answer).
    pub unlabelled: usize,
    /// Per option.
    pub options: Vec<OptionShare>,
    /// Mean absolute error of the people-only shares against the held-out
    /// people's.
    pub error_people_only: f64,
    /// The same for the rectified shares.
    pub error_rectified: f64,
    /// Whether rectifying shrank the error.
    pub shrinks_error: bool,
}

/// The PPI++ estimate of each option's share of every question, the
/// model's forecasts (its one-hot answer, when it samples) the
/// predictions: labelled on the respondents not `held_out`, unlabelled on
/// the held-out ones. `None` for a question without labelled or
/// unlabelled respondents, or without held-out people to score against.
pub fn shares(survey: &Survey, model: &Source, human: &[Vec<Option<u8>>], held_out: &[bool]) -> Vec<QuestionShares> {
    let mut out = Vec::new();
    for (q, question) in survey.questions.iter().enumerate() {
        let forecast = |r: usize| model.answers[q][r].as_ref().map(|a| a.forecast.as_deref().unwrap_or(&a.pmf));
        let labelled: Vec<(u8, &[f64])> =
            (0..held_out.len()).filter(|&r| !held_out[r]).filter_map(|r| Some((human[q][r]?, forecast(r)?))).collect();
        let unlabelled: Vec<&[f64]> = (0..held_out.len()).filter(|&r| held_out[r]).filter_map(forecast).collect();
        let truth: Vec<u8> = (0..held_out.len()).filter(|&r| held_out[r]).filter_map(|r| human[q][r]).collect();
        if labelled.is_empty() || unlabelled.is_empty() || truth.is_empty() {
            continue;
        }
        let mut options = Vec::new();
        for (o, label) in question.options.iter().enumerate() {
            let hit = |h: u8| f64::from(u8::from(usize::from(h) == o + 1));
            let y: Vec<f64> = labelled.iter().map(|(h, _)| hit(*h)).collect();
            let f: Vec<f64> = labelled.iter().map(|(_, f)| f[o]).collect();
            let u: Vec<f64> = unlabelled.iter().map(|f| f[o]).collect();
            let (Some(people_only), Some(rectified)) = (classical(&y), ppi_mean(&y, &f, &u)) else { continue };
            let held_out_share = truth.iter().map(|h| hit(*h)).sum::<f64>() / truth.len() as f64;
            options.push(OptionShare {
                option: o as u8 + 1,
                label: label.clone(),
                people_only,
                rectified,
                held_out_share,
            });
        }
        let error = |e: fn(&OptionShare) -> f64| {
            options.iter().map(|s| (e(s) - s.held_out_share).abs()).sum::<f64>() / options.len() as f64
        };
        let (people, rect) = (error(|s| s.people_only.value), error(|s| s.rectified.estimate.value));
        out.push(QuestionShares {
            question: question.id.clone(),
            source: model.name.clone(),
            labelled: labelled.len(),
            unlabelled: unlabelled.len(),
            options,
            error_people_only: people,
            error_rectified: rect,
            shrinks_error: rect < people,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of PyPI's ppi-python 0.2.3 on the same numbers, computed
    /// outside this project:
    ///
    /// ```python
    /// import numpy as np
    /// from ppi_py import ppi_mean_pointestimate, ppi_mean_ci
    /// y = np.array([1,0,0,1,1,0,1,0,0,0,1,1], float)
    /// f = np.array([.8,.1,.3,.6,.7,.2,.4,.5,.1,.2,.9,.3])
    /// u = np.array([.7,.2,.4,.1,.9,.6,.3,.3,.8,.5,.2,.1,.6,.7,.4,.5,.2,.3,.9,.8])
    /// ppi_mean_pointestimate(y, f, u)       # the estimate
    /// ppi_mean_ci(y, f, u, alpha=0.05)       # its interval
    /// ```
    const PPI_ESTIMATE: f64 = 0.54300569388149;
    const PPI_LOW: f64 = 0.31311540084456624;
    const PPI_HIGH: f64 = 0.7728959869184138;

    #[test]
    fn ppi_plus_plus_agrees_with_ppi_python() {
        let y = [1., 0., 0., 1., 1., 0., 1., 0., 0., 0., 1., 1.];
        let f = [0.8, 0.1, 0.3, 0.6, 0.7, 0.2, 0.4, 0.5, 0.1, 0.2, 0.9, 0.3];
        let u = [0.7, 0.2, 0.4, 0.1, 0.9, 0.6, 0.3, 0.3, 0.8, 0.5, 0.2, 0.1, 0.6, 0.7, 0.4, 0.5, 0.2, 0.3, 0.9, 0.8];
        let r = ppi_mean(&y, &f, &u).expect("defined");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(r.estimate.value, PPI_ESTIMATE), "{} against {PPI_ESTIMATE}", r.estimate.value);
        assert!(close(r.estimate.interval[0], PPI_LOW) && close(r.estimate.interval[1], PPI_HIGH), "{:?}", r.estimate);
        assert!(r.lambda > 0.0 && r.lambda < 1.0 && r.effective_n.expect("y varies") > y.len() as f64);
        let people = classical(&y).expect("labelled rows");
        assert!(close(people.value, 0.5) && people.std_error > r.estimate.std_error);
    }

    /// Predictions that carry nothing leave the people-only estimate.
    #[test]
    fn constant_predictions_leave_the_people_only_estimate() {
        let y = [1., 0., 1., 1.];
        let r = ppi_mean(&y, &[0.25; 4], &[0.25; 9]).expect("defined");
        assert_eq!(r.lambda.to_bits(), 0f64.to_bits());
        assert_eq!(r.estimate, classical(&y).expect("defined"));
        assert!(ppi_mean(&[], &[], &[0.5]).is_none() && ppi_mean(&y, &[0.5; 4], &[]).is_none());
    }
}
