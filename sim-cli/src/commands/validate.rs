//! `sim-cli validate`: the options, [`runs::validate()`], the figures
//! printed.

use crate::preflight::Estimate;
use crate::prelude::{answer_mode, answer_order, progress};
use anyhow::Result;
use clap::Args;
use engine::config::{AnswerMode, AnswerOrder, Config};
use runs::validate::SuiteSource;
use runs::{Interrupt, Validate, Watch};
use std::path::PathBuf;

/// Options of `sim-cli validate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli validate                               the built-in ANES 1996 suite on the configured model\n  \
    sim-cli validate --sample 200 --config live.toml --yes\n  \
    sim-cli validate --panel people.csv --panel-map map.toml --answers answers.csv --questions survey.toml\n  \
    sim-cli validate --sample 200 --given PID     each persona first shown its own party identification\n  \
    sim-cli validate --panel p.csv --panel-map m.toml --answers a.csv --questions s.toml --weights weight\n  \
    sim-cli validate --sample 100 --config a.toml --config b.toml --answer-mode probabilities --yes\n\n\
    Each respondent becomes a persona stated in their own traits; the model answers every question\n\
    twice (at --seed and at --seed + 1, for reliability). Half the respondents (seeded) fit the\n\
    baselines (the marginal, the demographic cell, and an imputer: a multinomial or ordered logit on the\n\
    traits and the --given answers); every figure is scored on the other half, with a 95% bootstrap interval,\n\
    and the summary says per question whether the model beats the imputer.\n\
    The formats, the figures and the ANES suite are described in docs/GUIDE.md, \"Checked against people\".\n\
    Writes summary.json, answers.csv (one line per respondent and question) and report.html to --out.\n\
    With several --config, each model answers the same respondents, in a directory of its own under --out,\n\
    and comparison.json gives every pair's paired difference (and each model's against each baseline) with\n\
    its interval, and a ranking per question and overall, tied where the interval covers 0.")]
pub struct ValidateArgs {
    /// A built-in suite: anes96 (944 respondents of the 1996 American National Election Study).
    /// The default when no --panel is given.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["panel", "panel_map", "answers", "questions"])]
    pub suite: Option<String>,
    /// Your own survey: the respondents' traits (CSV, one row each). Needs --panel-map, --answers and --questions.
    #[arg(long, value_name = "FILE", requires_all = ["panel_map", "answers", "questions"])]
    pub panel: Option<PathBuf>,
    /// Which column of --panel is the row id and which columns are which traits (TOML).
    #[arg(long, value_name = "FILE", requires = "panel")]
    pub panel_map: Option<PathBuf>,
    /// The people's answers (CSV: the row id, then one column per question id holding the option number).
    #[arg(long, value_name = "FILE", requires = "panel")]
    pub answers: Option<PathBuf>,
    /// The questions, their options and the subgroups (TOML).
    #[arg(long, value_name = "FILE", requires = "panel")]
    pub questions: Option<PathBuf>,
    /// Subgroups to split figures by, replacing the survey's own (TOML of subgroup tables, as in --questions).
    #[arg(long, value_name = "FILE")]
    pub subgroups: Option<PathBuf>,
    /// Seed of the model's sampling, the subsample, the split, the baselines and the bootstrap.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Use a seeded subsample of this many respondents (at least 10). Default: all.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(10..))]
    pub sample: Option<u32>,
    /// Configuration TOML: the chat model that answers, and for SSR (intent method "ssr") the embedder.
    /// Give it again to compare models: each answers the same respondents, and the comparison pairs them.
    #[arg(long, value_name = "FILE")]
    pub config: Vec<PathBuf>,
    /// Output directory. Default: a new directory runs/validate-SUITE-sSEED. Never overwritten; an unfinished
    /// validation there is continued.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How the model answers: "sample" (one sampled answer and its reason per respondent, asked twice for
    /// reliability), "probabilities" (the model's probability of each option at the answer, no reason, asked
    /// once; the scripted and GGUF models and servers that return logprobs give them) or "verbalized" (each
    /// persona gives the shares of people like it who would choose each option, as JSON under a schema;
    /// for servers without logprobs; asked twice). Overrides the config's `[answers] mode`.
    #[arg(long, value_name = "MODE", value_parser = answer_mode())]
    pub answer_mode: Option<AnswerMode>,
    /// Neither serve answers from the response cache nor keep them there, for this command. By default a
    /// live model's (OpenAI-compatible or GGUF) replies and weighings are kept under `sim-engine/responses`
    /// in the user's cache directory (`[cache] dir` elsewhere), keyed by the request, the seed, every setting
    /// that changes a reply and the provider's identity; a later run or validation asking the same gets them
    /// with no call, and the same digests. The summary gives the calls made, the answers served and the bill.
    #[arg(long)]
    pub no_cache: bool,
    /// Before a live or local model's validation, ask every question of the first respondents (at least N
    /// questions; billed, and reused by the validation: nothing is paid twice) to measure its prompt and
    /// reply lengths; the estimate printed before it, and kept in the summary as `estimate`, is a range
    /// built on them, with its assumptions. 0 prices every reply at max_output_tokens.
    #[arg(long, value_name = "N", default_value_t = runs::preflight::DEFAULT_PILOT)]
    pub pilot: u32,
    /// The order the options are shown in: "as_asked", or "permuted" (a seeded order per persona and question,
    /// the answer mapped back; the second run uses another order, so reliability measures order sensitivity).
    /// Overrides the config's `[answers] order`.
    #[arg(long, value_name = "ORDER", value_parser = answer_order())]
    pub option_order: Option<AnswerOrder>,
    /// Calibrate the model on people: per question, fit a temperature and the model's weight in a blend with
    /// the marginal and with the demographic baseline on the fitted half; score each calibrated model on the
    /// held-out half as a source of its own; write calibration.json.
    #[arg(long)]
    pub calibrate: bool,
    /// Estimate each option's share by prediction-powered inference (PPI++): the fitted half's people and the
    /// model's forecasts of the held-out half, with 95% intervals, beside the people-only estimate, both scored
    /// against the held-out people.
    #[arg(long)]
    pub rectify: bool,
    /// Questions whose real answers each respondent is shown first, as the earlier part of an interview in the
    /// survey's own wording (comma-separated ids, e.g. PID). They are not scored; the imputer baseline takes them
    /// as inputs beside the traits.
    #[arg(long, value_name = "Q1,Q2", value_delimiter = ',')]
    pub given: Vec<String>,
    /// Weight every figure, baseline and fit by this column of --panel (each respondent's survey weight, a number
    /// at least 0; map it `{ ignore = true }` so the model never sees it). Not with --rectify.
    #[arg(long, value_name = "COLUMN", requires = "panel")]
    pub weights: Option<String>,
    /// Bootstrap resamples behind each interval.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(100..=100_000))]
    pub resamples: u32,
    /// Tokio worker threads. Default: one per core. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A live validation whose estimate's high end is above this many USD asks for confirmation
    /// first (or needs --yes when piped).
    #[arg(long, value_name = "USD", default_value_t = 1.0)]
    pub confirm_above_usd: f64,
    /// Run a live validation above --confirm-above-usd without asking.
    #[arg(long)]
    pub yes: bool,
}

/// Runs `sim-cli validate`.
pub fn validate(args: ValidateArgs) -> Result<()> {
    let suite = match (args.panel, args.panel_map, args.answers, args.questions) {
        (Some(panel), Some(panel_map), Some(answers), Some(questions)) => {
            SuiteSource::Files { panel, panel_map, answers, questions }
        }
        _ => SuiteSource::Builtin(args.suite.unwrap_or_else(|| "anes96".into())),
    };
    let configure = |path: Option<&std::path::Path>| -> Result<Config> {
        let mut config = runs::load_config_for(path, runs::Models::Chat)?;
        if let Some(order) = args.option_order {
            config.raw.answers.order = order;
        }
        if let Some(mode) = args.answer_mode {
            config.raw.answers.mode = mode;
        }
        if args.no_cache {
            config.raw.cache.enabled = false;
        }
        Ok(config)
    };
    let mut models = Vec::new();
    for path in &args.config {
        models.push((path.display().to_string(), configure(Some(path))?));
    }
    let v = Validate {
        config: match models.first() {
            Some((_, c)) => c.clone(),
            None => configure(None)?,
        },
        suite,
        subgroups: args.subgroups,
        seed: args.seed,
        sample: args.sample,
        out: args.out,
        resamples: args.resamples,
        calibrate: args.calibrate,
        rectify: args.rectify,
        given: args.given,
        weights: args.weights,
        pilot: args.pilot,
    };
    let (above, yes) = (args.confirm_above_usd, args.yes);
    let confirm = |cfg: &Config, estimate: &dyn Fn() -> runs::Result<Estimate>| {
        crate::preflight::confirm(cfg, estimate, above, yes)
    };
    let (terminal, progress) = progress(0);
    let watch = Watch { threads: args.threads, progress, interrupt: Interrupt::Never, confirm: &confirm };
    if models.len() > 1 {
        let done = runs::compare(runs::Compare { models, args: v }, &watch);
        if let Some(t) = &terminal {
            t.finish();
        }
        let done = done?;
        match args.json {
            true => println!("{}", serde_json::to_string_pretty(&done)?),
            false => print!("{}", done.text()),
        }
        return Ok(());
    }
    let done = runs::validate(v, &watch);
    if let Some(t) = &terminal {
        t.finish();
    }
    let done = done?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&done.summary)?);
    } else {
        print!("{}", done.text());
    }
    Ok(())
}
