//! What a validation asks and of whom: the suite (a built-in one or the
//! user's four inputs), read and checked, and the respondents asked.

use crate::error::{refuse, Error, Result};
use engine::config::Config;
use std::path::{Path, PathBuf};
use survey::suite::{Texts, BUILTIN};
use survey::{Panel, Suite, Survey};

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
    /// Questions whose real answers each respondent is shown as the
    /// earlier part of the interview; they are not scored, and the imputer
    /// takes them as inputs.
    pub given: Vec<String>,
    /// The panel column holding each respondent's survey weight (mapped
    /// `{ ignore = true }`): every figure, baseline and fit is weighted.
    pub weights: Option<String>,
    /// Questions asked before a live or local model's validation (every
    /// question of the first respondents, at least this many), to measure
    /// its prompts and replies for the estimate; the validation reuses
    /// their answers. Default [`crate::preflight::DEFAULT_PILOT`].
    pub pilot: u32,
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
            given: Vec::new(),
            weights: None,
            pilot: crate::preflight::DEFAULT_PILOT,
        }
    }
}

/// The suite `source` names (a built-in one, or the user's four inputs),
/// its subgroups replaced by the file `subgroups` when given.
pub(super) fn load_suite(source: &SuiteSource, subgroups: Option<&Path>) -> Result<Suite> {
    let mut suite = read_suite(source)?;
    if let Some(path) = subgroups {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(Error::io(format!("cannot read --subgroups {name}")))?;
        suite.survey.subgroups = Survey::subgroups_from_toml(&text, &name)?;
    }
    Ok(suite)
}

fn read_suite(source: &SuiteSource) -> Result<Suite> {
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

/// The survey split by `--given`: the questions scored (the survey
/// without the given ones) with the people's answers to them, and the given
/// questions' indices in the survey.
pub(super) fn given_split(suite: &Suite, given: &[String]) -> Result<(Survey, Vec<usize>)> {
    let ids: Vec<&str> = suite.survey.questions.iter().map(|q| q.id.as_str()).collect();
    let mut at = Vec::new();
    for g in given {
        match ids.iter().position(|id| id == g) {
            Some(i) if at.contains(&i) => refuse!("--given {g}: named twice"),
            Some(i) => at.push(i),
            None => refuse!("--given {g}: the survey has no such question (its questions: {})", ids.join(", ")),
        }
    }
    if at.len() == ids.len() {
        refuse!("--given names every question of the survey; leave at least one to score");
    }
    let mut scored = suite.survey.clone();
    scored.questions = (0..ids.len()).filter(|i| !at.contains(i)).map(|i| suite.survey.questions[i].clone()).collect();
    Ok((scored, at))
}

/// Every respondent's survey weight from the panel column `column`: each
/// must be a finite number at least 0, and the panel map must mark the
/// column `{ ignore = true }` (a weight is not a trait the model sees).
/// Errors name the file, the row and the column.
pub(super) fn weights(suite: &Suite, source: &SuiteSource, column: &str) -> Result<Vec<f64>> {
    let file = match source {
        SuiteSource::Builtin(name) => refuse!("--weights {column}: the built-in suite {name} has no weights column"),
        SuiteSource::Texts { panel, .. } => panel.1.clone(),
        SuiteSource::Files { panel, .. } => panel.display().to_string(),
    };
    match suite.map.columns.get(column) {
        None => refuse!("--weights {column}: {file} has no such column (map it `{column} = {{ ignore = true }}`)"),
        Some(spec) if !spec.ignore => refuse!(
            "--weights {column}: the panel map makes it a trait, shown to the model; mark it \
             `{column} = {{ ignore = true }}`"
        ),
        Some(_) => {}
    }
    suite
        .panel
        .respondents
        .iter()
        .map(|r| {
            let cell = r.values.get(column).map_or("", String::as_str);
            let bad = |cause: &str| {
                Err(survey::Error::Row {
                    file: file.clone(),
                    row: r.id.clone(),
                    column: column.into(),
                    cause: cause.into(),
                }
                .into())
            };
            match cell.trim().parse::<f64>() {
                _ if cell.trim().is_empty() => bad("the weight is missing"),
                Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
                Ok(w) if w.is_finite() => bad(&format!("the weight {w} is negative")),
                Ok(_) => bad(&format!("the weight {cell:?} is not finite")),
                Err(_) => bad(&format!("the weight {cell:?} is not a number")),
            }
        })
        .collect()
}

/// The respondents asked and what the validation knows of them.
pub(super) struct People {
    /// The respondents asked, in file order.
    pub(super) respondents: Vec<survey::Respondent>,
    /// The people's answers to the scored questions: `human[q][r]`.
    pub(super) human: Vec<Vec<Option<u8>>>,
    /// Each respondent's weight, scaled to mean 1 (all 1 unweighted).
    pub(super) weights: Vec<f64>,
    /// Whether `--weights` gave them.
    pub(super) weighted: bool,
    /// The given questions' ids.
    pub(super) given: Vec<String>,
    /// Per respondent, the interview so far (the given answers).
    pub(super) earlier: Vec<String>,
    /// The imputer's inputs: the traits, then the given answers.
    pub(super) imputer_inputs: Vec<survey::impute::Input>,
}

/// The respondents `args` asks of `suite`, their weights and their given
/// answers; `suite` keeps only the scored questions afterwards.
pub(super) fn people(suite: &mut Suite, args: &Validate) -> Result<People> {
    if args.weights.is_some() && args.rectify {
        refuse!(
            "--weights with --rectify: PPI++ with survey weights is not implemented (its variance needs the design); \
             rectify unweighted, or weight without --rectify"
        );
    }
    let raw_weights = match &args.weights {
        Some(column) => Some(weights(suite, &args.suite, column)?),
        None => None,
    };
    let (scored, given_at) = given_split(suite, &args.given)?;
    let people = subsample(&suite.panel, args.sample, args.seed)?;
    let column_of = |q: usize| -> Vec<Option<u8>> { people.iter().map(|&r| suite.answers.by_question[q][r]).collect() };
    let respondents: Vec<_> = people.iter().map(|&r| suite.panel.respondents[r].clone()).collect();
    let given_answers: Vec<Vec<Option<u8>>> = given_at.iter().map(|&q| column_of(q)).collect();
    let earlier = interviews(&suite.survey, &given_at, &given_answers, people.len());
    let given_inputs: Vec<(&str, &[Option<u8>])> = given_at
        .iter()
        .zip(&given_answers)
        .map(|(&q, a)| (suite.survey.questions[q].id.as_str(), a.as_slice()))
        .collect();
    let imputer_inputs = survey::impute::inputs(&suite.map, &respondents, &given_inputs);
    let weights = match &raw_weights {
        Some(w) => {
            let asked: Vec<f64> = people.iter().map(|&r| w[r]).collect();
            let column = args.weights.as_deref().unwrap_or_default();
            match survey::score::normalised(&asked) {
                Some(w) => w,
                None if asked.iter().all(|w| *w == 0.0) => {
                    refuse!("--weights {column}: every weight of the respondents asked is 0")
                }
                None => refuse!(
                    "--weights {column}: the weights of the respondents asked sum to {}, too large to scale",
                    asked.iter().sum::<f64>()
                ),
            }
        }
        None => vec![1.0; people.len()],
    };
    let given: Vec<String> = given_at.iter().map(|&q| suite.survey.questions[q].id.clone()).collect();
    let human = (0..suite.survey.questions.len()).filter(|q| !given_at.contains(q)).map(column_of).collect();
    suite.answers.by_question = (0..suite.survey.questions.len())
        .filter(|q| !given_at.contains(q))
        .map(|q| suite.answers.by_question[q].clone())
        .collect();
    suite.survey = scored;
    Ok(People { respondents, human, weights, weighted: raw_weights.is_some(), given, earlier, imputer_inputs })
}

/// Per respondent, the interview so far that precedes every scored
/// question: the given questions (`given_at`, indices into `survey`) with
/// the respondent's own answers (`answers[g][r]`), for each of the `n`
/// respondents; a question they did not answer is left out, and with none
/// given the interview is empty.
fn interviews(survey: &Survey, given_at: &[usize], answers: &[Vec<Option<u8>>], n: usize) -> Vec<String> {
    (0..n)
        .map(|r| {
            let turns: Vec<_> = given_at
                .iter()
                .zip(answers)
                .filter_map(|(&q, answers)| {
                    Some(survey::interview::Turn { question: &survey.questions[q], answer: answers[r]? })
                })
                .collect();
            survey::interview::transcript(&turns)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use survey::Suite;

    /// For every question of the ANES suite and every set of the others
    /// given: the question is not scored, and no respondent's prompt for a
    /// scored question holds that question's own answer, only the given
    /// ones, each with the respondent's real answer.
    #[test]
    fn no_question_sees_its_own_answer() {
        let suite = Suite::builtin("anes96").expect("built in");
        let ids: Vec<String> = suite.survey.questions.iter().map(|q| q.id.clone()).collect();
        let people = &suite.panel.respondents[..60];
        for mask in 1..(1u32 << ids.len()) - 1 {
            let given: Vec<String> =
                ids.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, id)| id.clone()).collect();
            let (scored, at) = given_split(&suite, &given).expect("a proper subset");
            assert!(scored.questions.iter().all(|q| !given.contains(&q.id)), "{given:?} are not scored");
            assert_eq!(scored.questions.len() + given.len(), ids.len());
            let answers: Vec<Vec<Option<u8>>> =
                at.iter().map(|&q| suite.answers.by_question[q][..60].to_vec()).collect();
            let earlier = interviews(&suite.survey, &at, &answers, people.len());
            for (r, person) in people.iter().enumerate() {
                for q in &scored.questions {
                    let order: Vec<usize> = (0..q.options.len()).collect();
                    let prompt = q.prompt_in(scored.context.as_deref(), person, &order, &earlier[r]);
                    assert_eq!(prompt.matches(q.text.as_str()).count(), 1, "{}'s text is asked, once", q.id);
                    for (g, &gq) in at.iter().enumerate() {
                        let given_q = &suite.survey.questions[gq];
                        if let Some(a) = answers[g][r] {
                            let line = format!(
                                "Question: {}\nYou answered: {}\n",
                                given_q.text,
                                given_q.options[usize::from(a) - 1]
                            );
                            assert!(prompt.contains(&line), "{} given to {} for {}", given_q.id, person.id, q.id);
                        }
                    }
                    assert_eq!(
                        prompt.matches("You answered:").count(),
                        answers.iter().filter(|a| a[r].is_some()).count()
                    );
                }
            }
        }
        assert!(given_split(&suite, &ids).is_err(), "every question given leaves none to score");
        let unknown = given_split(&suite, &["party".into()]).expect_err("refused").to_string();
        assert!(
            unknown.contains("--given party: the survey has no such question (its questions: selfLR, PID, vote)"),
            "{unknown}"
        );
    }
}
