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
//! on the data's own scale; the fit is [`crate::logit`]'s. A fit that does
//! not converge (a level or a number that predicts the
//! answer perfectly, so that no finite maximum exists; collinear traits;
//! an option nobody in the fitted half chose) is reported with why, and
//! its forecasts are the fitted half's marginal distribution.
//!
//! The tests hold the fits to statsmodels' `MNLogit` and `OrderedModel`
//! on all 944 ANES 1996 respondents (`fixtures/surveys/anes96/imputer.json`,
//! made by `make_imputer_reference.py`).

use crate::logit::{fit, Coefficient, Data};
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
    pub(crate) fn scales(&self) -> Vec<(f64, f64)> {
        self.columns
            .iter()
            .map(|c| match c {
                Column::Number { mean, sd, .. } => (*mean, *sd),
                Column::Level { .. } => (0.0, 1.0),
            })
            .collect()
    }
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
        Stream::derive(seed, q as u32 + 1, 5, Purpose::Survey).shuffle(&mut order);
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
            coefficients: result.as_ref().map(|f| f.coefficients(&design.names, &design.scales())).unwrap_or_default(),
            columns: design.names,
        });
    }
    (Source::new("imputer", answers), fits)
}

#[cfg(test)]
mod tests {
    use super::*;
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
            let ours = fitted.coefficients(&design.names, &design.scales());
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
