//! What a validation reports: the model's sources beside the baselines,
//! the notes its answer mode calls for, what the calls cost, the digest,
//! and the summary that holds them.

use super::ask::{self, Replies};
use crate::calibration::CalibrationFile;
use crate::error::{refuse, Result};
use engine::config::{AnswerMode, AnswerOrder, Config, EmbeddingModel};
use engine::cost::{Spend, NANO_PER_USD};
use engine::digest::{Digest, DigestWriter};
use serde::Serialize;
use survey::score::{Scores, Source};
use survey::{Suite, Survey};

/// What the calls cost, over both runs.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// That per respondent asked (the fitted half's and the held-out
    /// half's), USD: what a model costs per validated respondent.
    pub cost_per_respondent_usd: f64,
    /// Some tokens are estimated (the scripted model, or a server that
    /// reported no usage), not reported.
    pub estimated: bool,
    /// What the response cache across runs did: answers served, calls
    /// sent, and the bill against what would have been billed (absent with
    /// no cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_cache: Option<engine::chat::CacheReport>,
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
    /// The questions whose real answers each respondent was shown as the
    /// earlier part of the interview (`--given`); they are not scored.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub given: Vec<String>,
    /// The panel column the figures are weighted by (`--weights`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// Per scored question, the imputer's fit: its model, columns,
    /// coefficients, or why it fell back to the marginal.
    pub imputer: Vec<survey::impute::ImputerFit>,
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
    /// The pre-flight estimate of a live or local model's validation, made
    /// before it started (absent for a scripted model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::preflight::Estimate>,
    /// The output directory.
    pub out: String,
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
    /// The respondents whose options held less than `[answers]
    /// min_option_mass` and were weighed again with their tokens raised by
    /// `logit_bias`: their options' mass before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raised: Option<RaisedMass>,
}

/// The options' mass on the respondents weighed again, tokens raised.
#[derive(Debug, Clone, Serialize)]
pub struct RaisedMass {
    /// How many were.
    pub respondents: usize,
    /// Their options' mean mass at the first weighing.
    pub mean_before: f64,
    /// Their options' mean mass with the tokens raised.
    pub mean_after: f64,
    /// The least mass with the tokens raised.
    pub min_after: f64,
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

pub(super) fn option_mass(survey: &Survey, replies: &Replies) -> Vec<OptionMass> {
    survey
        .questions
        .iter()
        .zip(replies)
        .filter_map(|(q, column)| {
            let masses: Vec<f64> = column.iter().filter_map(|a| a.mass).collect();
            let (before, after): (Vec<f64>, Vec<f64>) =
                column.iter().filter_map(|a| Some((a.mass?, a.raised?))).unzip();
            (!masses.is_empty()).then(|| OptionMass {
                question: q.id.clone(),
                mean: mean(&masses),
                min: masses.iter().copied().fold(f64::INFINITY, f64::min),
                max: masses.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                raised: (!after.is_empty()).then(|| RaisedMass {
                    respondents: after.len(),
                    mean_before: mean(&before),
                    mean_after: mean(&after),
                    min_after: after.iter().copied().fold(f64::INFINITY, f64::min),
                }),
            })
        })
        .collect()
}

/// The model's sources: its answers, and SSR's ratings of `rated`'s
/// reasons when SSR runs.
pub(super) fn model_sources(
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
pub(super) fn ssr_runs(cfg: &Config, skipped: bool) -> Result<bool> {
    let ssr = cfg.raw.intent.ssr() && !skipped;
    if ssr && cfg.raw.embedding.model() == EmbeddingModel::Disabled {
        refuse!("the config asks for SSR ([intent] method = \"ssr\") but turns embeddings off: SSR needs an embedder");
    }
    Ok(ssr)
}

/// The model source calibrated and rectified: in a mode with forecasts
/// (`forecasts`) the model's own; else the last one that forecasts (SSR's
/// pmfs), else the direct answers.
pub(super) fn calibrated_source(sources: &[Source], forecasts: bool) -> Source {
    let model = match forecasts {
        true => Some(0),
        false => sources.iter().rposition(|s| s.answers.iter().flatten().flatten().any(|a| a.forecast.is_some())),
    };
    sources[model.unwrap_or(0)].clone()
}

/// The model's source name in the table for answers in `mode`.
pub(super) fn model_name(mode: AnswerMode) -> &'static str {
    match mode {
        AnswerMode::Sample => "model (direct)",
        AnswerMode::Probabilities => "model (probabilities)",
        AnswerMode::Verbalized => "model (verbalized)",
    }
}

/// Whether the config asks for a forecast over the options
/// (`probabilities` or `verbalized`), and what that mode skips.
pub(super) fn mode_notes(cfg: &Config) -> (bool, Vec<String>) {
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
    if ask::asked_once(cfg) {
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

/// The digest: configuration content, data, seed, the respondents asked,
/// every reply of both runs and every source's answers.
pub(super) fn digest(
    cfg: &Config,
    suite: &Suite,
    seed: u64,
    people: &[survey::Respondent],
    (given, weights): (&[String], Option<&[f64]>),
    runs: [&Replies; 2],
    sources: &[Source],
) -> Digest {
    let mut w = DigestWriter::new("validate v1");
    w.digest(&cfg.content_hash()).digest(&suite.inputs).u64(seed).u64(people.len() as u64);
    for r in people {
        w.str(&r.id);
    }
    // Unweighted and given nothing, the digest is what it was before
    // either existed.
    for g in given {
        w.str("given").str(g);
    }
    for x in weights.into_iter().flatten() {
        w.f64(*x);
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

pub(super) fn calls(
    runs: &[&Replies],
    respondents: usize,
    cfg: &Config,
    cache: &providers::cache::CacheCounters,
) -> Calls {
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
    c.cost_per_respondent_usd = c.cost_usd / respondents.max(1) as f64;
    c.response_cache = providers::cache_directory(cfg).map(|dir| cache.report(&dir).with_bill(spend.nano_usd));
    c
}
