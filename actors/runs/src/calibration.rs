//! `calibration.json`: what `validate --calibrate` fitted per question,
//! and the digest of what each fit applies to; written by a validation,
//! read by `run --calibration FILE`.

use crate::error::{refuse, Error, Result};
use engine::config::{Config, ProbeCalibration};
use engine::digest::DigestWriter;
use engine::scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::path::Path;
use survey::Suite;

/// `calibration.json`: what was fitted, and what it fits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrationFile {
    /// The format's version.
    pub format: u32,
    /// The suite it was fitted on.
    pub suite: String,
    /// The chat model whose answers were calibrated.
    pub chat_model: String,
    /// The model source calibrated (`model (direct)`, `model (SSR)`).
    pub source: String,
    /// How the model answered: `sample` (one answer per respondent) or
    /// `probabilities` (its probability of each option).
    pub answer_mode: String,
    /// The order the options were shown in: `as_asked` or `permuted`.
    pub order: String,
    /// The configuration's content hash (the model, its sampling, the
    /// intent settings).
    pub config_hash: String,
    /// The questions each respondent was shown their own answers to first
    /// (`validate --given`): a run asks its probes without them, so such
    /// a calibration is refused there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub given: Vec<String>,
    /// Per question.
    pub questions: Vec<CalibratedQuestion>,
}

/// One question's calibration, with the digest of what it fits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibratedQuestion {
    /// What was fitted.
    #[serde(flatten)]
    pub fit: survey::calibrate::Calibration,
    /// The question's text.
    pub text: String,
    /// Its options.
    pub options: Vec<String>,
    /// Digest of the model (the config's content hash), the survey's
    /// prompt context, the question's text and options, the answer mode
    /// and the order: a calibration applies where this matches.
    pub digest: String,
}

/// The file `validate --calibrate` writes: per question of `suite`, its fit
/// and the digest of what it fits (`cfg`'s model and answers, the survey's
/// context, the question and its options).
pub(crate) fn fitted(
    cfg: &Config,
    suite: &Suite,
    source: &str,
    given: &[String],
    fits: Vec<survey::calibrate::Calibration>,
) -> CalibrationFile {
    let (mode, order) = (cfg.raw.answers.mode.as_str(), cfg.raw.answers.order.as_str());
    let config_hash = cfg.content_hash().hex();
    let questions = suite
        .survey
        .questions
        .iter()
        .zip(fits)
        .map(|(q, fit)| {
            let mut w = DigestWriter::new("calibration v1");
            w.str(&config_hash).str(suite.survey.context.as_deref().unwrap_or("")).str(&q.id).str(&q.text);
            w.u32(q.options.len() as u32);
            q.options.iter().for_each(|o| {
                w.str(o);
            });
            w.str(mode).str(order);
            for g in given {
                w.str("given").str(g);
            }
            CalibratedQuestion { fit, text: q.text.clone(), options: q.options.clone(), digest: w.finish().hex() }
        })
        .collect();
    CalibrationFile {
        format: 1,
        suite: suite.name.clone(),
        chat_model: cfg.raw.chat.model.clone(),
        source: source.to_string(),
        answer_mode: mode.into(),
        order: order.into(),
        config_hash,
        given: given.to_vec(),
        questions,
    }
}

/// The calibrations of `path` (a `validate --calibrate` file) for the
/// probes of `scenario` that ask one of its questions (the same text and
/// options), checked against the run's configuration: the same model and
/// settings (`hash`, its content hash before a panel of data is added),
/// answer mode and order. Refused by name
/// when anything does not fit.
pub(crate) fn calibrations(
    path: &Path,
    config: &Config,
    hash: &str,
    scenario: &Scenario,
) -> Result<Vec<ProbeCalibration>> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(Error::io(format!("cannot read --calibration {name}")))?;
    let file: CalibrationFile = serde_json::from_str(&text).map_err(|e| {
        Error::Input(format!("--calibration {name}: not a calibration.json of `validate --calibrate`: {e}"))
    })?;
    if file.format != 1 {
        refuse!("--calibration {name}: format version {} is not supported (this engine reads version 1)", file.format);
    }
    let mode = config.raw.answers.mode.as_str();
    if file.answer_mode != mode {
        refuse!(
            "--calibration {name}: it calibrates answers in mode \"{}\", and this run answers in mode \"{mode}\" \
             (pass --answer-mode {})",
            file.answer_mode,
            file.answer_mode
        );
    }
    if config.raw.answers.mode == engine::config::AnswerMode::Sample {
        refuse!(
            "--calibration {name}: a run applies a calibration to distributions, and this one calibrates sampled \
             answers; validate and run with --answer-mode probabilities or verbalized"
        );
    }
    if !file.given.is_empty() {
        refuse!(
            "--calibration {name}: it was fitted on respondents shown their own answers to {} first (validate \
             --given), and a run's probes are asked without them; calibrate without --given",
            file.given.join(", ")
        );
    }
    if file.order != engine::config::AnswerOrder::AsAsked.as_str() {
        refuse!("--calibration {name}: it was fitted with the options {}, and a run shows them as asked", file.order);
    }
    if file.config_hash != hash {
        refuse!(
            "--calibration {name}: it was fitted under another configuration (content hash {}, this run's {hash}): \
             the chat model, its settings and [answers] must be the ones the validation used",
            file.config_hash
        );
    }
    let mut out = Vec::new();
    for probe in scenario.probes.iter().filter(|p| !p.options.is_empty()) {
        let Some(q) =
            file.questions.iter().find(|q| q.text.trim() == probe.question.trim() && q.options == probe.options)
        else {
            continue;
        };
        let Some(marginal) = q.fit.marginal.clone() else {
            refuse!(
                "--calibration {name}: question {} has no marginal distribution (written by an older engine); run \
                 validate --calibrate again",
                q.fit.question
            );
        };
        out.push(ProbeCalibration {
            probe: probe.id.clone(),
            question: q.fit.question.clone(),
            digest: q.digest.clone(),
            temperature: q.fit.temperature.unwrap_or(1.0),
            weight: q.fit.weight_marginal,
            marginal,
        });
    }
    if out.is_empty() {
        let asked: Vec<String> = file.questions.iter().map(|q| format!("{:?}", q.text)).collect();
        refuse!(
            "--calibration {name}: no probe of scenario {} asks one of its questions with the same text and options \
             (its questions: {})",
            scenario.name,
            asked.join(", ")
        );
    }
    Ok(out)
}
