//! Checking a panel against people: a panel built from real respondents
//! answers a survey on the configured chat model, and its answers are
//! scored against the people's own (the `survey` crate does the scoring).
//!
//! [`validate()`] is the sequence; its parts live in files named for them:
//! `inputs` reads the suite and picks the respondents, `ask` asks the
//! model (both runs, each behind its chat log), `figures` turns the replies
//! into sources beside the baselines and into the [`Summary`], and
//! `outputs` keeps the directory and writes the files (`page` draws the
//! page and the text). No part imports this module.

mod ask;
mod estimate;
mod figures;
mod inputs;
mod outputs;
mod page;

pub use crate::calibration::{CalibratedQuestion, CalibrationFile};
pub use figures::{Calls, OptionMass, Summary};
pub use inputs::{SuiteSource, Validate};

use crate::error::{Error, Result};
use crate::watch::Watch;
use engine::config::{AnswerMode, Config};
use outputs::{Started, Table};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use survey::score::{self, Settings, Source};
use survey::{Suite, Survey};

/// A validation that came to its end, its files written.
#[derive(Debug)]
pub struct Validation {
    /// Its directory (`summary.json`, `answers.csv`, `report.html`).
    pub dir: PathBuf,
    /// The summary.
    pub summary: Summary,
    /// Whether an unfinished validation there was continued.
    pub resumed: bool,
}

impl Validation {
    /// The readable summary, as `sim-cli validate` prints it.
    pub fn text(&self) -> String {
        page::text(&self.summary)
    }
}

/// Runs the validation `args` describes: both runs of the panel, the
/// scores, and `summary.json`, `answers.csv` and `report.html` in its
/// directory.
pub fn validate(args: Validate, watch: &Watch<'_>) -> Result<Validation> {
    validate_scored(args, watch).map(|(v, _)| v)
}

/// What a validation scored, kept to compare it with another model's on
/// the same respondents.
struct Scored {
    survey: Survey,
    human: Vec<Vec<Option<u8>>>,
    weights: Vec<f64>,
    /// The model's forecasts (or answers), as calibration takes them.
    model: Source,
    /// The baselines, the imputer's included.
    baselines: Vec<Source>,
}

/// [`validate()`], with what it scored.
fn validate_scored(mut args: Validate, watch: &Watch<'_>) -> Result<(Validation, Scored)> {
    // The embedder is needed, and so loaded, only for SSR.
    if args.config.raw.intent.ssr() {
        let name = "the config's embedder (SSR rates the free text with it)";
        providers::identify_embedder(&mut args.config).map_err(|e| Error::context(name, e))?;
    }
    scored(args, watch)
}

/// The validation's sequence, once its embedder is identified.
fn scored(args: Validate, watch: &Watch<'_>) -> Result<(Validation, Scored)> {
    let cfg = &args.config;
    crate::refuse_batch_mode(cfg, "validate")?;
    let mut suite = inputs::load_suite(&args.suite, args.subgroups.as_deref())?;
    let total = suite.panel.respondents.len();
    let inputs::People { respondents, human, weights, weighted, given: given_ids, earlier, imputer_inputs } =
        inputs::people(&mut suite, &args)?;
    let (probabilities, notes) = figures::mode_notes(cfg);
    let reasons = probabilities && cfg.raw.answers.reasons;
    let ssr = figures::ssr_runs(cfg, probabilities && !reasons)?;
    let started = Started {
        suite: suite.name.clone(),
        inputs: suite.inputs.hex(),
        seed: args.seed,
        respondents: respondents.len(),
        config_hash: cfg.content_hash().hex(),
        given: given_ids.clone(),
        weights: args.weights.clone(),
    };
    let (out, resumed) = outputs::prepare_out(args.out.as_deref(), &started)?;
    if resumed {
        watch.progress.note(&format!(
            "continuing the unfinished validation in {}: answers already paid for are served from its logs",
            out.display()
        ));
    }
    announce(watch, cfg, &suite, respondents.len(), total);
    let cache = Arc::default();
    let panel = ask::Panel { survey: &suite.survey, respondents: &respondents, earlier: &earlier, cache: &cache };
    let ([first, second], estimate) = ask::ask_both(cfg, args.seed, watch, panel, (&out, resumed), args.pilot)?;
    let reasoned = match reasons {
        true => ask::ask_reasons(cfg, args.seed, watch, panel, &out)?,
        false => Vec::new(),
    };
    let rated = if reasons { &reasoned } else { &first };
    let mut sources = figures::model_sources(cfg, &suite.survey, &first, ssr.then_some(rated), watch.threads)?;
    let split = score::held_out(respondents.len(), args.seed);
    let mut baselines = score::baselines(&suite.survey, &respondents, &human, &weights, &split, args.seed);
    let (imputer, imputer_fits) =
        survey::impute::imputer(&suite.survey, &imputer_inputs, &human, &split, &weights, args.seed);
    baselines.push(imputer);
    let model = figures::calibrated_source(&sources, probabilities);
    let calibration = args.calibrate.then(|| {
        let bases = (&baselines[1], &baselines[2], &baselines[3]);
        let (fits, calibrated) = survey::calibrate::calibrate(&suite.survey, &model, bases, &human, &weights, &split);
        sources.extend(calibrated);
        crate::calibration::fitted(cfg, &suite, &model.name, &given_ids, fits)
    });
    let rectified = args.rectify.then(|| survey::rectify::shares(&suite.survey, &model, &human, &split));
    sources.extend(baselines.iter().cloned());
    let rerun = (!second.is_empty()).then(|| {
        Source::new(format!("a second run (seed {})", args.seed.wrapping_add(1)), ask::direct(&suite.survey, &second))
    });
    let settings = Settings { seed: args.seed, resamples: args.resamples as usize };
    let scores = score::score(&suite.survey, &respondents, &human, &weights, &sources, rerun.as_ref(), settings);
    let design = (given_ids.as_slice(), weighted.then_some(weights.as_slice()));
    let digest = figures::digest(cfg, &suite, args.seed, &respondents, design, [&first, &second], &sources);
    let summary = Summary {
        digest: digest.hex(),
        suite: suite.name.clone(),
        seed: args.seed,
        chat_model: cfg.raw.chat.model.clone(),
        method: match (probabilities, ssr) {
            (true, _) => cfg.raw.answers.mode.as_str().into(),
            (false, true) => "direct+ssr".into(),
            (false, false) => "direct".into(),
        },
        answer_mode: cfg.raw.answers.mode.as_str().into(),
        notes,
        option_mass: figures::option_mass(&suite.survey, &first),
        embedding_model: ssr.then(|| cfg.raw.embedding.model.clone()),
        config_hash: cfg.content_hash().hex(),
        inputs: suite.inputs.hex(),
        panel: total,
        given: given_ids,
        weights: args.weights.clone(),
        imputer: imputer_fits,
        calls: figures::calls(&[&first, &second, &reasoned], respondents.len(), cfg, &cache),
        scores,
        calibration,
        rectified,
        estimate,
        out: out.display().to_string(),
    };
    let table = Table {
        survey: &suite.survey,
        respondents: &respondents,
        split: &split,
        human: &human,
        runs: [&first, &second],
        sources: &sources,
    };
    outputs::write_outputs(&out, &summary, &table)?;
    let scored = Scored { survey: suite.survey, human, weights, model, baselines };
    Ok((Validation { dir: out, summary, resumed }, scored))
}

/// Several models validated on the same respondents and compared
/// (`validate --config A --config B`).
#[derive(Debug, Clone)]
pub struct Compare {
    /// Each model: its name (the config file's) and its configuration.
    pub models: Vec<(String, Config)>,
    /// Everything else, as for one model: its `config` is not used, and
    /// `out` is the comparison's directory (each model's validation goes in
    /// a directory of its own there).
    pub args: Validate,
}

/// One model of a comparison.
#[derive(Debug, Serialize)]
pub struct ModelOutcome {
    /// Its name in the comparison (`1-MODEL`), and its directory's.
    pub label: String,
    /// The config file it came from.
    pub config: String,
    /// The chat model.
    pub chat_model: String,
    /// Why it failed, when it did (the others go on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its validation's summary, when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

/// A comparison: `comparison.json`, and stdout with `--json`.
#[derive(Debug, Serialize)]
pub struct ComparisonSummary {
    /// The seed every model was asked and scored with.
    pub seed: u64,
    /// Each model, in the order given.
    pub models: Vec<ModelOutcome>,
    /// The finished models' paired differences and ranking.
    pub comparison: survey::compare::Comparison,
    /// The directory.
    pub out: String,
}

impl ComparisonSummary {
    /// The readable comparison, as `sim-cli validate` prints it.
    pub fn text(&self) -> String {
        page::comparison_text(self)
    }
}

/// Validates each model of `c` on the same respondents, one directory each
/// under its `out`, then compares them (`comparison.json` there). A model
/// that fails is reported as failed and the others go on; when all fail,
/// the first's error is the comparison's.
pub fn compare(c: Compare, watch: &Watch<'_>) -> Result<ComparisonSummary> {
    let out = c.args.out.clone().unwrap_or_else(|| crate::dir::fresh(&format!("runs/compare-s{}", c.args.seed)));
    if std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::Refused(format!(
            "output directory {} already exists and is not empty; choose another --out (the response cache \
             serves what an earlier comparison bought)",
            out.display()
        )));
    }
    let made = !out.exists();
    std::fs::create_dir_all(&out).map_err(Error::io(format!("cannot create {}", out.display())))?;
    let (mut outcomes, mut done, mut first_error) = (Vec::new(), Vec::new(), None);
    let count = c.models.len();
    for (i, (name, config)) in c.models.into_iter().enumerate() {
        let slug: String = config
            .raw
            .chat
            .model
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' { ch } else { '-' })
            .collect();
        let label = format!("{}-{slug}", i + 1);
        watch.progress.note(&format!("model {} of {count}: {label} ({name})", i + 1));
        let chat_model = config.raw.chat.model.clone();
        let args = Validate { config, out: Some(out.join(&label)), ..c.args.clone() };
        let (error, summary) = match validate_scored(args, watch) {
            Ok((v, scored)) => {
                done.push((label.clone(), scored));
                (None, Some(v.summary))
            }
            // What is wrong with the job, not with this model (the inputs,
            // the directory, a live model not confirmed) stops it.
            Err(
                e
                @ (Error::Input(_) | Error::Refused(_) | Error::NotConfirmed(_) | Error::Survey(_) | Error::Io { .. }),
            ) => return Err(e),
            Err(e) => {
                // The error with its causes, each said once, as the command
                // line prints one.
                let mut text = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    let said = c.to_string();
                    if !text.contains(&said) {
                        text = format!("{text}: {said}");
                    }
                    cause = c.source();
                }
                watch.progress.note(&format!("{label} failed: {text}"));
                first_error.get_or_insert(e);
                (Some(text), None)
            }
        };
        outcomes.push(ModelOutcome { label, config: name, chat_model, error, summary });
    }
    let Some((_, base)) = done.first() else {
        if made {
            let _ = std::fs::remove_dir(&out);
        }
        return Err(first_error.unwrap_or_else(|| Error::Input("no model to compare".into())));
    };
    let models: Vec<Source> = done.iter().map(|(label, s)| Source { name: label.clone(), ..s.model.clone() }).collect();
    let settings = Settings { seed: c.args.seed, resamples: c.args.resamples as usize };
    let comparison =
        survey::compare::compare(&base.survey, &base.human, &base.weights, &models, &base.baselines, settings);
    let summary = ComparisonSummary { seed: c.args.seed, models: outcomes, comparison, out: out.display().to_string() };
    outputs::write_comparison(&out, &summary)?;
    Ok(summary)
}

/// Says what will be asked.
fn announce(watch: &Watch<'_>, cfg: &Config, suite: &Suite, respondents: usize, total: usize) {
    let once = ask::asked_once(cfg);
    let reasons = cfg.raw.answers.mode != AnswerMode::Sample && cfg.raw.answers.reasons;
    let rounds = if once { 1 } else { 2 } + usize::from(reasons);
    let asked = (respondents * suite.survey.questions.len() * rounds) as u64;
    watch.progress.note(&format!(
        "validate {}: {respondents} of {total} respondents x {} questions x {} = {asked} chat calls at least, to {} \
         ({} mode)",
        suite.name,
        suite.survey.questions.len(),
        match (once, reasons) {
            (true, false) => "1 run",
            (true, true) => "(1 run and its reasons)",
            (false, false) => "2 runs",
            (false, true) => "(2 runs and the reasons)",
        },
        cfg.raw.chat.model,
        cfg.raw.answers.mode.as_str()
    ));
}
