//! Calibrating the model's forecasts on people: fitted on the fitted half
//! only, scored (by [`crate::score`]) on the held-out half.
//!
//! Per question:
//!
//! - a **temperature** T in [[`T_MIN`], [`T_MAX`]] minimising the fitted
//!   half's log-loss: each forecast becomes p_i^(1/T), renormalised (T > 1
//!   flattens an over-confident model, T < 1 sharpens a timid one). One
//!   sampled answer per respondent is a one-hot vector that no temperature
//!   changes: its temperature is not applicable and stays 1;
//! - a **weight** w in [0, 1] for blending the tempered forecast with a
//!   baseline's distribution, w·model + (1 − w)·baseline, minimising the
//!   same log-loss: once with the fitted half's marginal, once with the
//!   respondent's demographic cell, and once with the imputer's forecast
//!   ([`crate::impute`]). w is how much of the blend the model carries; 0
//!   says the model adds nothing to the baseline (against the imputer:
//!   nothing a logit on the same inputs does not already know).
//!
//! The log-loss of a forecast is convex in the blend weight, so a golden
//! section search finds its minimum; the temperature's is searched on a
//! log-spaced grid, then refined the same way around the grid's best.

use crate::question::{Kind, Survey};
use crate::score::{Answer, Source};
use crate::stats;
use serde::{Deserialize, Serialize};

/// The least temperature fitted.
pub const T_MIN: f64 = 0.05;
/// The greatest temperature fitted.
pub const T_MAX: f64 = 20.0;

/// One question's calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The question's id.
    pub question: String,
    /// Fitted respondents used (with both a human answer and the model's).
    pub respondents: usize,
    /// The fitted temperature; `None` when it does not apply (sampled
    /// answers, or no respondents).
    pub temperature: Option<f64>,
    /// The model's weight in its blend with the marginal distribution.
    pub weight_marginal: f64,
    /// The model's weight in its blend with the demographic cell's.
    pub weight_demographic: f64,
    /// The model's weight in its blend with the imputer's forecast (absent
    /// from files written before the imputer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_imputer: Option<f64>,
    /// The fitted half's marginal distribution (Jeffreys-smoothed): what
    /// the blend with the marginal mixes in, so that a run can apply it.
    #[serde(default)]
    pub marginal: Option<Vec<f64>>,
    /// Log-loss on the fitted half: raw, tempered (both `None` for sampled
    /// answers, which forecast nothing), and each blend.
    pub fitted_log_loss: FittedLosses,
}

/// Log-loss on the fitted half, in nats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FittedLosses {
    /// The model's forecasts as they came.
    pub raw: Option<f64>,
    /// Tempered.
    pub temperature: Option<f64>,
    /// Blended with the marginal.
    pub blend_marginal: Option<f64>,
    /// Blended with the demographic cell.
    pub blend_demographic: Option<f64>,
    /// Blended with the imputer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blend_imputer: Option<f64>,
}

/// `f` at temperature `t`: p_i^(1/t), renormalised; zeros stay zero.
pub fn temper(f: &[f64], t: f64) -> Vec<f64> {
    let logs: Vec<Option<f64>> = f.iter().map(|p| (*p > 0.0).then(|| p.ln() / t)).collect();
    let top = logs.iter().flatten().fold(f64::NEG_INFINITY, |a, b| a.max(*b));
    let raw: Vec<f64> = logs.iter().map(|l| l.map_or(0.0, |l| (l - top).exp())).collect();
    stats::pmf(&raw)
}

/// `w`·`a` + (1 − `w`)·`b`.
pub fn blend(a: &[f64], b: &[f64], w: f64) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| w * x + (1.0 - w) * y).collect()
}

/// The minimum of `f` on [`lo`, `hi`] for a unimodal `f`, by golden
/// section, the ends included.
fn golden(lo: f64, hi: f64, f: impl Fn(f64) -> f64) -> f64 {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let (mut c, mut d) = (b - r * (b - a), a + r * (b - a));
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..80 {
        if fc <= fd {
            (b, d, fd) = (d, c, fc);
            c = b - r * (b - a);
            fc = f(c);
        } else {
            (a, c, fc) = (c, d, fd);
            d = a + r * (b - a);
            fd = f(d);
        }
    }
    let inner = (a + b) / 2.0;
    // An end wins a tie: a weight of exactly 0 or 1 says more than 1e-14.
    [lo, hi].into_iter().fold(inner, |best, x| if f(x) <= f(best) { x } else { best })
}

/// Weighted mean log-loss of the forecasts `g` makes of the rows
/// (forecast, answer, weight).
fn loss(rows: &[(Vec<f64>, u8, f64)], g: impl Fn(&[f64], usize) -> Vec<f64>) -> f64 {
    let total: f64 = rows.iter().map(|r| r.2).sum();
    rows.iter().enumerate().map(|(i, (f, h, w))| w * stats::log_loss(&g(f, i), *h)).sum::<f64>() / total
}

fn forecast_of(a: &Answer) -> &[f64] {
    a.forecast.as_deref().unwrap_or(&a.pmf)
}

/// A calibrated source's answer: the forecast, with the point the panel
/// rule takes from it.
fn answer(forecast: Vec<f64>, kind: Kind) -> Answer {
    Answer::from_pmf(forecast, kind)
}

/// Fits the calibration of `model` per question on the respondents not
/// `held_out` (each weighted by `weights`, all 1 for none), and gives the
/// calibrated sources for every respondent:
/// the model at its temperature, and its blends with the `marginal`, the
/// `demographic` and the `imputer` baselines' distributions (their
/// forecasts).
pub fn calibrate(
    survey: &Survey,
    model: &Source,
    (marginal, demographic, imputer): (&Source, &Source, &Source),
    human: &[Vec<Option<u8>>],
    weights: &[f64],
    held_out: &[bool],
) -> (Vec<Calibration>, [Source; 4]) {
    let mut fits = Vec::new();
    let names = ["temperature", "blend with marginal", "blend with demographic", "blend with imputer"];
    let mut out: [Source; 4] =
        names.map(|n| Source { name: format!("{} calibrated: {n}", model.name), ..Source::default() });
    for (q, question) in survey.questions.iter().enumerate() {
        let baseline = |s: &Source, r: usize| s.answers[q][r].as_ref().and_then(|a| a.forecast.clone());
        // The fitted rows: a human answer, the model's and the baselines'.
        let mut rows = Vec::new();
        let mut bases = Vec::new();
        for (r, h) in human[q].iter().enumerate() {
            if let (Some(h), false, Some(a), Some(m), Some(d), Some(i)) = (
                h,
                held_out[r],
                &model.answers[q][r],
                baseline(marginal, r),
                baseline(demographic, r),
                baseline(imputer, r),
            ) {
                rows.push((forecast_of(a).to_vec(), *h, weights[r]));
                bases.push([m, d, i]);
            }
        }
        let sampled = model.answers[q].iter().flatten().all(|a| a.forecast.is_none());
        // No fitted respondent, or none that weighs anything: nothing to fit.
        let fit = match rows.iter().map(|r| r.2).sum::<f64>() <= 0.0 {
            true => None,
            false => {
                let t = match sampled {
                    true => 1.0,
                    false => {
                        let at = |lt: f64| loss(&rows, |f, _| temper(f, lt.exp()));
                        let grid: Vec<f64> =
                            (0..=60).map(|i| T_MIN.ln() + (T_MAX.ln() - T_MIN.ln()) * i as f64 / 60.0).collect();
                        let losses: Vec<f64> = grid.iter().map(|&g| at(g)).collect();
                        let (least, most) =
                            losses.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &l| (a.min(l), b.max(l)));
                        if most - least < 1e-12 {
                            // Forecasts no temperature changes (uniform ones):
                            // the temperature is 1, not wherever a search drifts.
                            1.0
                        } else {
                            let best = (0..grid.len()).fold(0, |b, i| if losses[i] < losses[b] { i } else { b });
                            let (lo, hi) = (grid[best.saturating_sub(1)], grid[(best + 1).min(grid.len() - 1)]);
                            golden(lo, hi, at).exp()
                        }
                    }
                };
                let tempered: Vec<Vec<f64>> = rows.iter().map(|(f, _, _)| temper(f, t)).collect();
                let blended = |b: usize| golden(0.0, 1.0, |w| loss(&rows, |_, i| blend(&tempered[i], &bases[i][b], w)));
                let w = [blended(0), blended(1), blended(2)];
                let at = |b: usize| Some(loss(&rows, |_, i| blend(&tempered[i], &bases[i][b], w[b])));
                let losses = FittedLosses {
                    raw: (!sampled).then(|| loss(&rows, |f, _| f.to_vec())),
                    temperature: (!sampled).then(|| loss(&rows, |_, i| tempered[i].clone())),
                    blend_marginal: at(0),
                    blend_demographic: at(1),
                    blend_imputer: at(2),
                };
                Some((t, w, losses))
            }
        };
        let (t, [wm, wd, wi]) = fit.as_ref().map_or((1.0, [0.0; 3]), |(t, w, _)| (*t, *w));
        let mut columns: [Vec<Option<Answer>>; 4] = Default::default();
        for (r, a) in model.answers[q].iter().enumerate() {
            let tempered = a.as_ref().map(|a| temper(forecast_of(a), t));
            let with = |s: &Source, w: f64| Some(answer(blend(tempered.as_ref()?, &baseline(s, r)?, w), question.kind));
            // A sampled answer stays one: no temperature makes it a forecast.
            let alone = match sampled {
                true => a.clone(),
                false => tempered.clone().map(|f| answer(f, question.kind)),
            };
            columns[0].push(alone);
            columns[1].push(with(marginal, wm));
            columns[2].push(with(demographic, wd));
            columns[3].push(with(imputer, wi));
        }
        for ((source, column), w) in out.iter_mut().zip(columns).zip([1.0, wm, wd, wi]) {
            source.answers.push(column);
            source.model_weight.get_or_insert_with(Vec::new).push(w);
        }
        fits.push(Calibration {
            question: question.id.clone(),
            respondents: rows.len(),
            temperature: fit.as_ref().filter(|_| !sampled).map(|f| f.0),
            weight_marginal: wm,
            weight_demographic: wd,
            weight_imputer: Some(wi),
            marginal: bases.first().map(|b| b[0].clone()),
            fitted_log_loss: fit.map_or(
                FittedLosses {
                    raw: None,
                    temperature: None,
                    blend_marginal: None,
                    blend_demographic: None,
                    blend_imputer: None,
                },
                |f| f.2,
            ),
        });
    }
    (fits, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_flattens_and_sharpens() {
        let f = [0.7, 0.2, 0.1, 0.0];
        let flat = temper(&f, 1e6);
        assert!(flat[..3].iter().all(|p| (p - 1.0 / 3.0).abs() < 1e-5) && flat[3] == 0.0, "{flat:?}");
        assert!(temper(&f, 0.05)[0] > 0.999);
        let same = temper(&f, 1.0);
        assert!(same.iter().zip(f).all(|(a, b)| (a - b).abs() < 1e-15));
        assert_eq!(blend(&[1.0, 0.0], &[0.5, 0.5], 0.25), vec![0.625, 0.375]);
    }

    #[test]
    fn golden_section_finds_a_convex_minimum_and_the_ends() {
        assert!((golden(0.0, 1.0, |x| (x - 0.3).powi(2)) - 0.3).abs() < 1e-9);
        let ends = (golden(0.0, 1.0, |x| x).to_bits(), golden(0.0, 1.0, |x| -x).to_bits());
        assert_eq!(ends, (0f64.to_bits(), 1f64.to_bits()), "an end, exactly");
    }
}
