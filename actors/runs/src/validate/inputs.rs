//! What a validation asks and of whom: the suite (a built-in one or the
//! user's four inputs), read and checked, and the respondents asked.

use crate::error::{refuse, Error, Result};
use engine::config::Config;
use std::path::{Path, PathBuf};
use survey::suite::{Texts, BUILTIN};
use survey::{Panel, Suite};

/// Which survey a validation asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteSource {
    /// A built-in suite by name (`anes96`).
    Builtin(String),
    /// The four inputs as texts, each with the name its errors use (a
    /// binding's data frames, written to CSV text in memory).
    Texts {
        /// The respondents' traits (CSV text, its name).
        panel: (String, String),
        /// The panel map (TOML text, its name).
        panel_map: (String, String),
        /// The people's answers (CSV text, its name).
        answers: (String, String),
        /// The questions (TOML text, its name).
        questions: (String, String),
    },
    /// The user's four files.
    Files {
        /// The respondents' traits (CSV, one row each).
        panel: PathBuf,
        /// Which column is the row id and which are which traits (TOML).
        panel_map: PathBuf,
        /// The people's answers (CSV).
        answers: PathBuf,
        /// The questions, their options and the subgroups (TOML).
        questions: PathBuf,
    },
}

/// What a validation is: its inputs, read and checked by [`super::validate()`]
/// before anything is written.
#[derive(Debug, Clone)]
pub struct Validate {
    /// The resolved configuration: the chat model that answers, and for
    /// SSR the embedder ([`crate::load_config_for`] with
    /// [`crate::Models::Chat`] is enough: the embedder is identified here
    /// when SSR asks for it).
    pub config: Config,
    /// The survey.
    pub suite: SuiteSource,
    /// Subgroups replacing the survey's own (TOML of subgroup tables).
    pub subgroups: Option<PathBuf>,
    /// Seed of the model's sampling, the subsample, the split, the
    /// baselines and the bootstrap.
    pub seed: u64,
    /// A seeded subsample of this many respondents (at least 10); default all.
    pub sample: Option<u32>,
    /// Output directory; default a fresh `runs/validate-SUITE-sSEED`. An
    /// unfinished validation of the same inputs there is continued.
    pub out: Option<PathBuf>,
    /// Bootstrap resamples behind each interval.
    pub resamples: u32,
    /// Fit a temperature and blend weights per question on the fitted
    /// half, score the calibrated model on the held-out half beside the
    /// raw one, and write `calibration.json`.
    pub calibrate: bool,
    /// Estimate each option's share by PPI++ from the fitted half's people
    /// and the model's forecasts of the held-out half.
    pub rectify: bool,
}

impl Validate {
    /// The built-in ANES 1996 suite at seed 42, every respondent, 1,000
    /// resamples.
    pub fn new(config: Config) -> Validate {
        Validate {
            config,
            suite: SuiteSource::Builtin("anes96".into()),
            subgroups: None,
            seed: 42,
            sample: None,
            out: None,
            resamples: 1000,
            calibrate: false,
            rectify: false,
        }
    }
}

/// The suite `source` names: a built-in one, or the user's four inputs.
pub(super) fn load_suite(source: &SuiteSource) -> Result<Suite> {
    let read = |flag: &str, p: &Path| -> Result<(String, String)> {
        let name = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(Error::io(format!("cannot read {flag} {name}")))?;
        Ok((text, name))
    };
    let (panel, map, answers, questions) = match source {
        SuiteSource::Builtin(name) => match Suite::builtin(name) {
            Some(s) => return Ok(s),
            None => refuse!("--suite {name}: no such suite (built in: {})", BUILTIN.join(", ")),
        },
        SuiteSource::Texts { panel, panel_map, answers, questions } => {
            (panel.clone(), panel_map.clone(), answers.clone(), questions.clone())
        }
        SuiteSource::Files { panel, panel_map, answers, questions } => (
            read("--panel", panel)?,
            read("--panel-map", panel_map)?,
            read("--answers", answers)?,
            read("--questions", questions)?,
        ),
    };
    let name =
        Path::new(&questions.1).file_stem().map_or_else(|| "survey".to_string(), |s| s.to_string_lossy().into_owned());
    let texts = Texts {
        panel: (&panel.0, &panel.1),
        map: (&map.0, &map.1),
        answers: (&answers.0, &answers.1),
        survey: (&questions.0, &questions.1),
    };
    Ok(Suite::from_texts(&name, texts)?)
}

/// The rows of `panel` to ask: all, or a seeded subsample of `sample`
/// rows kept in file order.
pub(super) fn subsample(panel: &Panel, sample: Option<u32>, seed: u64) -> Result<Vec<usize>> {
    let n = panel.respondents.len();
    match sample {
        None => Ok((0..n).collect()),
        Some(k) => match panel.subsample(k as usize, seed) {
            Some(rows) => Ok(rows),
            None => refuse!("--sample {k}: the panel has only {n} respondents"),
        },
    }
}
