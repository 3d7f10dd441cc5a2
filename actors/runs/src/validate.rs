//! Checking a panel against people: a panel built from real respondents
//! answers a survey on the configured chat model, and its answers are
//! scored against the people's own (the `survey` crate does the scoring).

mod ask;
mod page;

pub use crate::calibration::{CalibratedQuestion, CalibrationFile};

use crate::dir::{ANSWERS, CALIBRATION, REPORT, SUMMARY, VALIDATION};
use crate::error::{refuse, Error, Result};
use crate::preflight::Estimate;
use crate::start::{runtime, Watch};
use ask::{Asked, Replies};
use engine::chat::ChatPort;
use engine::config::{AnswerMode, AnswerOrder, ChatProvider, Config, EmbeddingModel};
use engine::cost::{estimate_tokens, Spend, NANO_PER_USD};
use engine::digest::{Digest, DigestWriter};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use survey::score::{self, Scores, Settings, Source};
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

/// What a validation is: its inputs, read and checked by [`validate`]
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

/// What the calls cost, over both runs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Calls {
    /// Questions asked (respondents x questions x 2 runs).
    pub asked: u64,
    /// Chat calls made, guardrail retries included.
    pub calls: u64,
    /// Questions without a valid answer after every attempt.
    pub failed: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Reply tokens.
    pub output_tokens: u64,
    /// What they cost, USD.
    pub cost_usd: f64,
    /// Some tokens are estimated (the scripted model, or a server that
    /// reported no usage), not reported.
    pub estimated: bool,
}

/// The summary: `summary.json`, and stdout with `--json`.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Same seed, config and data: same digest.
    pub digest: String,
    /// The suite's name.
    pub suite: String,
    /// The seed.
    pub seed: u64,
    /// The chat model that answered.
    pub chat_model: String,
    /// `direct`, `direct+ssr` when SSR rates the free text too, or
    /// `probabilities`.
    pub method: String,
    /// `sample` or `probabilities` (`[answers] mode`, `--answer-mode`).
    pub answer_mode: String,
    /// What the mode changed (a step skipped, with why).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// In probabilities mode, per question: the share of the model's
    /// probability the options held at the answer, over the respondents
    /// of the first run (the rest went to text that is no option).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub option_mass: Vec<OptionMass>,
    /// The embedder SSR used, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    /// The configuration's content hash.
    pub config_hash: String,
    /// Digest of the panel, map, answers and survey texts.
    pub inputs: String,
    /// Respondents in the data.
    pub panel: usize,
    /// What the calls cost.
    pub calls: Calls,
    /// Every figure, per question, source and subgroup.
    #[serde(flatten)]
    pub scores: Scores,
    /// With `--calibrate`: per question, the temperature and blend weights
    /// fitted on the fitted half (as `calibration.json` holds them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationFile>,
    /// With `--rectify`: per question and option, the people-only and the
    /// PPI++ estimates of the share, against the held-out people's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rectified: Option<Vec<survey::rectify::QuestionShares>>,
    /// The output directory.
    pub out: String,
}

/// Runs the validation `args` describes: both runs of the panel, the
/// scores, and `summary.json`, `answers.csv` and `report.html` in its
/// directory.
pub fn validate(mut args: Validate, watch: &Watch<'_>) -> Result<Validation> {
    // The embedder is needed, and so loaded, only for SSR.
    if args.config.raw.intent.ssr() {
        let name = "the config's embedder (SSR rates the free text with it)";
        providers::identify_embedder(&mut args.config).map_err(|e| Error::context(name, e))?;
    }
    let cfg = &args.config;
    crate::refuse_batch_mode(cfg, "validate")?;
    let mut suite = load_suite(&args.suite)?;
    if let Some(path) = &args.subgroups {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(Error::io(format!("cannot read --subgroups {name}")))?;
        suite.survey.subgroups = Survey::subgroups_from_toml(&text, &name)?;
    }
    let total = suite.panel.respondents.len();
    let people = subsample(&suite.panel, args.sample, args.seed)?;
    let human: Vec<Vec<Option<u8>>> =
        suite.answers.by_question.iter().map(|column| people.iter().map(|&r| column[r]).collect()).collect();
    let respondents: Vec<_> = people.iter().map(|&r| suite.panel.respondents[r].clone()).collect();
    let (probabilities, notes) = mode_notes(cfg);
    let reasons = probabilities && cfg.raw.answers.reasons;
    let ssr = ssr_runs(cfg, probabilities && !reasons)?;
    let started = Started {
        suite: suite.name.clone(),
        inputs: suite.inputs.hex(),
        seed: args.seed,
        respondents: respondents.len(),
        config_hash: cfg.content_hash().hex(),
    };
    let (out, resumed) = prepare_out(args.out.as_deref(), &started)?;
    if resumed {
        watch.progress.note(&format!(
            "continuing the unfinished validation in {}: answers already paid for are served from its logs",
            out.display()
        ));
    }
    let asked = announce(watch, cfg, &suite, respondents.len(), total);
    let estimate = || {
        let prompt = suite.survey.questions[0].prompt(suite.survey.context.as_deref(), &respondents[0]);
        let per_call = cfg.chat_price.bill(estimate_tokens(&prompt), cfg.raw.chat.max_output_tokens).nano_usd;
        Estimate { calls: asked, usd: (asked * per_call) as f64 / NANO_PER_USD as f64 }
    };
    (watch.confirm)(cfg, &estimate)?;
    let [first, second] = ask_both(cfg, &args, watch, &suite.survey, &respondents, &out, resumed)?;
    let reasoned = match reasons {
        true => ask_reasons(cfg, &args, watch, &suite.survey, &respondents, &out)?,
        false => Vec::new(),
    };
    let rated = if reasons { &reasoned } else { &first };
    let mut sources = model_sources(cfg, &suite.survey, &first, ssr.then_some(rated), watch.threads)?;
    let split = score::held_out(respondents.len(), args.seed);
    let baselines = score::baselines(&suite.survey, &respondents, &human, &split, args.seed);
    let model = calibrated_source(&sources, probabilities);
    let calibration = args.calibrate.then(|| {
        let (fits, calibrated) =
            survey::calibrate::calibrate(&suite.survey, &model, &baselines[1], &baselines[2], &human, &split);
        sources.extend(calibrated);
        crate::calibration::fitted(cfg, &suite, &model.name, fits)
    });
    let rectified = args.rectify.then(|| survey::rectify::shares(&suite.survey, &model, &human, &split));
    sources.extend(baselines);
    let rerun = (!second.is_empty()).then(|| {
        Source::new(format!("a second run (seed {})", args.seed.wrapping_add(1)), ask::direct(&suite.survey, &second))
    });
    let settings = Settings { seed: args.seed, resamples: args.resamples as usize };
    let scores = score::score(&suite.survey, &respondents, &human, &sources, rerun.as_ref(), settings);
    let digest = digest(cfg, &suite, args.seed, &respondents, [&first, &second], &sources);
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
        option_mass: option_mass(&suite.survey, &first),
        embedding_model: ssr.then(|| cfg.raw.embedding.model.clone()),
        config_hash: cfg.content_hash().hex(),
        inputs: suite.inputs.hex(),
        panel: total,
        calls: calls(&[&first, &second, &reasoned]),
        scores,
        calibration,
        rectified,
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
    write_outputs(&out, &summary, &table)?;
    Ok(Validation { dir: out, summary, resumed })
}

/// The options' share of the model's probability on one question.
#[derive(Debug, Clone, Serialize)]
pub struct OptionMass {
    /// The question's id.
    pub question: String,
    /// The mean over the respondents answered.
    pub mean: f64,
    /// The least.
    pub min: f64,
    /// The most.
    pub max: f64,
}

fn option_mass(survey: &Survey, replies: &Replies) -> Vec<OptionMass> {
    survey
        .questions
        .iter()
        .zip(replies)
        .filter_map(|(q, column)| {
            let masses: Vec<f64> = column.iter().filter_map(|a| a.mass).collect();
            (!masses.is_empty()).then(|| OptionMass {
                question: q.id.clone(),
                mean: masses.iter().sum::<f64>() / masses.len() as f64,
                min: masses.iter().copied().fold(f64::INFINITY, f64::min),
                max: masses.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            })
        })
        .collect()
}

/// Says what will be asked; returns how many questions.
fn announce(watch: &Watch<'_>, cfg: &Config, suite: &Suite, respondents: usize, total: usize) -> u64 {
    let once = asked_once(cfg);
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
    asked
}

/// The model's sources: its answers, and SSR's ratings of `rated`'s
/// reasons when SSR runs.
fn model_sources(
    cfg: &Config,
    survey: &Survey,
    first: &Replies,
    rated: Option<&Replies>,
    threads: Option<u32>,
) -> Result<Vec<Source>> {
    let mut sources = vec![Source::new(model_name(cfg.raw.answers.mode), ask::direct(survey, first))];
    if let Some(rated) = rated {
        sources.push(Source::new("model (SSR)", ask::ssr(cfg, survey, rated, threads)?));
    }
    Ok(sources)
}

/// Whether SSR rates the model's reasons: asked for, and not `skipped`
/// (no reason generated); refused when embeddings are off.
fn ssr_runs(cfg: &Config, skipped: bool) -> Result<bool> {
    let ssr = cfg.raw.intent.ssr() && !skipped;
    if ssr && cfg.raw.embedding.model() == EmbeddingModel::Disabled {
        refuse!("the config asks for SSR ([intent] method = \"ssr\") but turns embeddings off: SSR needs an embedder");
    }
    Ok(ssr)
}

/// The model source calibrated and rectified: in a mode with forecasts
/// (`forecasts`) the model's own; else the last one that forecasts (SSR's
/// pmfs), else the direct answers.
fn calibrated_source(sources: &[Source], forecasts: bool) -> Source {
    let model = match forecasts {
        true => Some(0),
        false => sources.iter().rposition(|s| s.answers.iter().flatten().flatten().any(|a| a.forecast.is_some())),
    };
    sources[model.unwrap_or(0)].clone()
}

/// The model's source name in the table for answers in `mode`.
fn model_name(mode: AnswerMode) -> &'static str {
    match mode {
        AnswerMode::Sample => "model (direct)",
        AnswerMode::Probabilities => "model (probabilities)",
        AnswerMode::Verbalized => "model (verbalized)",
    }
}

/// Whether the panel is asked once: probabilities in the question's own
/// order, which a second run would only repeat.
fn asked_once(cfg: &Config) -> bool {
    cfg.raw.answers.mode == AnswerMode::Probabilities && cfg.raw.answers.order == AnswerOrder::AsAsked
}

/// The seed of run `n`'s option permutation (1 or 2), when the options are
/// permuted: another permutation per run, so that a second run measures
/// order sensitivity.
fn permutation(cfg: &Config, seed: u64, n: u64) -> Option<u64> {
    (cfg.raw.answers.order == AnswerOrder::Permuted).then(|| seed.wrapping_add(n - 1))
}

/// Whether the config asks for a forecast over the options
/// (`probabilities` or `verbalized`), and what that mode skips.
fn mode_notes(cfg: &Config) -> (bool, Vec<String>) {
    let mode = cfg.raw.answers.mode;
    let probabilities = mode != AnswerMode::Sample;
    let mut notes = Vec::new();
    if probabilities && cfg.raw.answers.reasons {
        notes.push(
            "reasons generated separately ([answers] reasons = true): each question asked once more in sample \
             mode, in run 1's option order, for the reason SSR rates; its sampled answer is not scored"
                .to_string(),
        );
    } else if probabilities && cfg.raw.intent.ssr() {
        notes.push(format!(
            "SSR was skipped: it rates the reason a sampled answer gives, and --answer-mode {} generates none \
             (set [answers] reasons = true to generate reasons separately)",
            mode.as_str()
        ));
    }
    if mode == AnswerMode::Verbalized {
        notes.push(
            "verbalized: each persona gave the shares of people like it who would choose each option; its \
             forecast is those shares, normalised, and the second run at seed + 1 asks again"
                .to_string(),
        );
    }
    if asked_once(cfg) {
        notes.push(
            "asked once: in probabilities mode a second run in the same option order gives the same \
             probabilities, so reliability is not applicable"
                .to_string(),
        );
    }
    if cfg.raw.answers.order == AnswerOrder::Permuted {
        notes.push(
            "options shown in a seeded order per persona and question, answers mapped back; the second run \
             uses another order, so reliability measures order sensitivity"
                .to_string(),
        );
    }
    (probabilities, notes)
}

/// With `[answers] reasons = true` in a mode without reasons: every
/// question asked once more in sample mode (at `--seed`, in run 1's option
/// order, logged apart), for the reasons SSR rates.
fn ask_reasons(
    cfg: &Config,
    args: &Validate,
    watch: &Watch<'_>,
    survey: &Survey,
    respondents: &[survey::Respondent],
    out: &Path,
) -> Result<Replies> {
    let mut sampled = cfg.clone();
    sampled.raw.answers.mode = AnswerMode::Sample;
    let rt = runtime(watch.threads)?;
    let round =
        ask::Round { label: "reasons", progress: watch.progress.as_ref(), permute: permutation(cfg, args.seed, 1) };
    rt.block_on(async {
        let chat = open_chat_port(&sampled, args.seed, &crate::dir::validation_reasons_wal(out))?;
        Ok(ask::ask_all(&sampled, chat, survey, respondents, &round).await)
    })
}

/// Both runs of the panel (at `--seed` and `--seed + 1`), after the live
/// model's connection check; when that check fails on a new directory, the
/// directory is removed again, since nothing was bought.
fn ask_both(
    cfg: &Config,
    args: &Validate,
    watch: &Watch<'_>,
    survey: &Survey,
    respondents: &[survey::Respondent],
    out: &Path,
    resumed: bool,
) -> Result<[Replies; 2]> {
    let rt = runtime(watch.threads)?;
    let progress = watch.progress.as_ref();
    let asked = rt.block_on(async {
        let chat = providers::build_chat(cfg, args.seed).map_err(actors::Error::from)?;
        let (p1, p2) = (permutation(cfg, args.seed, 1), permutation(cfg, args.seed, 2));
        let round = |label, permute| ask::Round { label, progress, permute };
        // In probabilities mode the first question is weighed before
        // anything else, so that a provider that cannot give probabilities
        // says so before any file is kept; its answer is the first job's.
        let weighed_first = match cfg.raw.answers.mode {
            AnswerMode::Probabilities => {
                let (q, r) = (&survey.questions[0], &respondents[0]);
                let order = ask::option_order(q, r, p1);
                let request = ask::weigh_request(cfg, q, q.prompt_in(survey.context.as_deref(), r, &order));
                match chat.option_probabilities(&request).await {
                    Err(e @ engine::chat::ChatError::Engine(_)) => return Err(Error::Chat(e)),
                    result => Some(result),
                }
            }
            AnswerMode::Sample | AnswerMode::Verbalized => None,
        };
        crate::preflight::probe(cfg, chat.as_ref(), progress).await?;
        let first = chat_port(cfg, args.seed, out, 1)?;
        if let Some(weighed) = weighed_first {
            if asked_once(cfg) {
                let once = round("probabilities", p1);
                let first = ask::probabilities_all(cfg, first, survey, respondents, &once, Some(weighed)).await?;
                return Ok([first, Vec::new()]);
            }
            let first =
                ask::probabilities_all(cfg, first, survey, respondents, &round("run 1 of 2", p1), Some(weighed))
                    .await?;
            let rerun = chat_port(cfg, args.seed.wrapping_add(1), out, 2)?;
            let second =
                ask::probabilities_all(cfg, rerun, survey, respondents, &round("run 2 of 2", p2), None).await?;
            return Ok([first, second]);
        }
        let first = ask::ask_all(cfg, first, survey, respondents, &round("run 1 of 2", p1)).await;
        let rerun = chat_port(cfg, args.seed.wrapping_add(1), out, 2)?;
        let second = ask::ask_all(cfg, rerun, survey, respondents, &round("run 2 of 2", p2)).await;
        Ok([first, second])
    });
    if asked.is_err() && !resumed && std::fs::read_dir(out).map(|d| d.count()).unwrap_or(0) <= 1 {
        let _ = std::fs::remove_file(out.join(VALIDATION));
        let _ = std::fs::remove_dir(out);
    }
    asked
}

/// The suite `source` names: a built-in one, or the user's four inputs.
fn load_suite(source: &SuiteSource) -> Result<Suite> {
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
fn subsample(panel: &Panel, sample: Option<u32>, seed: u64) -> Result<Vec<usize>> {
    let n = panel.respondents.len();
    match sample {
        None => Ok((0..n).collect()),
        Some(k) => match panel.subsample(k as usize, seed) {
            Some(rows) => Ok(rows),
            None => refuse!("--sample {k}: the panel has only {n} respondents"),
        },
    }
}

/// What a validation's directory records when it starts (`validate.json`),
/// so that the same command on an unfinished directory continues it,
/// serving the answers its chat logs already hold, and any other command is
/// refused there.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Started {
    suite: String,
    inputs: String,
    seed: u64,
    respondents: usize,
    config_hash: String,
}

/// The output directory: `out` (absent, empty, or an unfinished validation
/// of the same `started`), or a fresh `runs/validate-<suite>-s<seed>`.
/// Returns it with whether an unfinished validation is continued.
fn prepare_out(out: Option<&Path>, started: &Started) -> Result<(PathBuf, bool)> {
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => crate::dir::fresh(&format!("runs/validate-{}-s{}", started.suite, started.seed)),
    };
    let empty = std::fs::read_dir(&path).map(|mut d| d.next().is_none()).unwrap_or(true);
    let marker = path.join(VALIDATION);
    let resumed = !empty && marker.exists() && !path.join(SUMMARY).exists();
    if resumed {
        let text = std::fs::read_to_string(&marker).map_err(Error::io(format!("cannot read {}", marker.display())))?;
        let theirs: Started = match serde_json::from_str(&text) {
            Ok(t) => t,
            Err(e) => refuse!("{}: not a validation's marker: {e}", marker.display()),
        };
        if theirs != *started {
            return Err(Error::Refused(format!(
                "output directory {} holds an unfinished validation of other inputs ({} seed {}, {} respondents, config {}); \
                 continue it with the command that started it, or choose another --out",
                path.display(),
                theirs.suite,
                theirs.seed,
                theirs.respondents,
                &theirs.config_hash[..12.min(theirs.config_hash.len())]
            )));
        }
    } else if !empty {
        return Err(Error::Refused(format!(
            "output directory {} already exists and is not empty; choose another --out or remove it",
            path.display()
        )));
    }
    std::fs::create_dir_all(&path).map_err(Error::io(format!("cannot create output directory {}", path.display())))?;
    let text =
        serde_json::to_string_pretty(started).map_err(|e| Error::Input(format!("cannot encode the marker: {e}")))?;
    std::fs::write(&marker, text).map_err(Error::io(format!("cannot write {}", marker.display())))?;
    Ok((path, resumed))
}

/// The chat port of run `n` (1 or 2): for a live provider, behind the
/// run's own write-ahead log in `out`, so that an interrupted validation
/// continued with the same command buys no answer twice. (One log per run:
/// both runs send the same requests, under different seeds.)
fn chat_port(cfg: &Config, seed: u64, out: &Path, n: u32) -> Result<Arc<dyn ChatPort>> {
    open_chat_port(cfg, seed, &crate::dir::validation_chat_wal(out, n))
}

/// [`chat_port`] logging to `path`.
fn open_chat_port(cfg: &Config, seed: u64, path: &Path) -> Result<Arc<dyn ChatPort>> {
    use engine::store::trace::{cassette::CassetteChat, wal};
    let chat = providers::build_chat(cfg, seed).map_err(actors::Error::from)?;
    Ok(match cfg.raw.chat.provider {
        ChatProvider::Scripted => chat,
        ChatProvider::Modelled | ChatProvider::Openai | ChatProvider::Gguf => {
            // Answers are served from the log; a call that failed is asked again.
            let paid = wal::read_wal(path)?.0.into_iter().filter(|e| e.answer.is_ok()).collect();
            let logged: Arc<dyn ChatPort> = Arc::new(wal::WalChat::open(path, chat)?);
            Arc::new(CassetteChat::new(&[], Some(logged)).with_wal(paid))
        }
    })
}

/// The digest: configuration content, data, seed, the respondents asked,
/// every reply of both runs and every source's answers.
fn digest(
    cfg: &Config,
    suite: &Suite,
    seed: u64,
    people: &[survey::Respondent],
    runs: [&Replies; 2],
    sources: &[Source],
) -> Digest {
    let mut w = DigestWriter::new("validate v1");
    w.digest(&cfg.content_hash()).digest(&suite.inputs).u64(seed).u64(people.len() as u64);
    for r in people {
        w.str(&r.id);
    }
    for run in runs {
        for a in run.iter().flatten() {
            w.u8(a.point.unwrap_or(0)).str(&a.why).u32(a.attempts);
        }
    }
    for s in sources {
        w.str(&s.name);
        for a in s.answers.iter().flatten() {
            match a {
                Some(a) => {
                    w.u8(a.point);
                    a.pmf.iter().for_each(|p| {
                        w.f64(*p);
                    });
                }
                None => {
                    w.u8(0);
                }
            }
        }
    }
    w.finish()
}

fn calls(runs: &[&Replies]) -> Calls {
    let mut spend = Spend::default();
    let mut c = Calls::default();
    for a in runs.iter().flat_map(|r| r.iter().flatten()) {
        c.estimated |= a.estimated;
        c.asked += 1;
        c.calls += u64::from(a.attempts);
        c.failed += u64::from(a.point.is_none());
        spend.add(&a.spend);
    }
    c.input_tokens = spend.input_tokens;
    c.output_tokens = spend.output_tokens;
    c.cost_usd = spend.nano_usd as f64 / NANO_PER_USD as f64;
    c
}

/// What the per-respondent file is made of.
struct Table<'a> {
    survey: &'a Survey,
    respondents: &'a [survey::Respondent],
    split: &'a [bool],
    human: &'a [Vec<Option<u8>>],
    runs: [&'a Replies; 2],
    sources: &'a [Source],
}

/// Writes summary.json, answers.csv and report.html into `out`.
fn write_outputs(out: &Path, summary: &Summary, t: &Table<'_>) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let path = out.join(name);
        std::fs::write(&path, bytes).map_err(Error::io(format!("cannot write {}", path.display())))
    };
    let encoded =
        serde_json::to_string_pretty(summary).map_err(|e| Error::Input(format!("cannot encode the summary: {e}")))?;
    write(SUMMARY, encoded.as_bytes())?;
    if let Some(c) = &summary.calibration {
        let encoded =
            serde_json::to_string_pretty(c).map_err(|e| Error::Input(format!("cannot encode the calibration: {e}")))?;
        write(CALIBRATION, encoded.as_bytes())?;
    }
    let ssr = t.sources.iter().position(|s| s.name == "model (SSR)");
    let mut csv = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["respondent", "half", "question", "human", "model", "model_rerun"];
    if ssr.is_some() {
        header.extend(["model_ssr", "model_ssr_expected"]);
    }
    let probabilities = t.runs[0].iter().flatten().any(|a| a.probabilities.is_some());
    if probabilities {
        header.push("model_probabilities");
    }
    header.extend(["attempts", "attempts_rerun", "cost_nano_usd", "why"]);
    let to_csv = |e| crate::export::csv_error(e, "cannot write answers.csv");
    csv.write_record(&header).map_err(to_csv)?;
    let opt = |x: Option<u8>| x.map_or_else(String::new, |p| p.to_string());
    for (q, question) in t.survey.questions.iter().enumerate() {
        for (r, person) in t.respondents.iter().enumerate() {
            // In probabilities mode there is no second run.
            let (a, b): (&Asked, Option<&Asked>) = (&t.runs[0][q][r], t.runs[1].get(q).map(|c| &c[r]));
            let mut row = vec![
                person.id.clone(),
                if t.split[r] { "held_out" } else { "fitted" }.to_string(),
                question.id.clone(),
                opt(t.human[q][r]),
                opt(a.point),
                opt(b.and_then(|b| b.point)),
            ];
            if let Some(j) = ssr {
                let answer = t.sources[j].answers[q][r].as_ref();
                row.push(opt(answer.map(|x| x.point)));
                row.push(answer.map_or_else(String::new, |x| format!("{:.4}", survey::stats::mean(&x.pmf))));
            }
            if probabilities {
                let shares: Vec<String> =
                    a.probabilities.iter().flatten().map(|p| format!("{p:.6}")).collect::<Vec<_>>();
                row.push(shares.join(";"));
            }
            row.push(a.attempts.to_string());
            row.push(b.map_or_else(String::new, |b| b.attempts.to_string()));
            row.push((a.spend.nano_usd + b.map_or(0, |b| b.spend.nano_usd)).to_string());
            row.push(a.why.clone());
            csv.write_record(&row).map_err(to_csv)?;
        }
    }
    let bytes = csv.into_inner().map_err(|e| Error::Input(format!("cannot write {ANSWERS}: {e}")))?;
    write(ANSWERS, &bytes)?;
    write(REPORT, page::html(summary).as_bytes())?;
    Ok(())
}
