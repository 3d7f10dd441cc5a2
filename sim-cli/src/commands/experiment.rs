//! `sim-cli experiment`: the shared field against message passing, on
//! research topics, with a researcher, an analyst and a writer. Writes
//! `results.json`, `report.md` and three SVG charts; optionally a blind
//! rating kit.

mod cassette;
mod charts;
mod markdown;
mod rate;
mod sensitivity;

use crate::prelude::runtime;
use ::experiment::summary::{calibrate_lambda, summarise, RunRecord, Summary};
use ::experiment::topic::BUILTIN_TOPICS;
use ::experiment::Topic;
use agents::experiment::{run_experiment, Budgets, ExperimentSpec, LatencyModel, Mission, SCRIPTED_MODEL};
use anyhow::{bail, Context, Result};
use charts::charts;
use clap::Args;
use engine::rng::{Purpose, Stream};
use engine::store::trace::read_trace_file;
use markdown::{criteria_table, report_md};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Options of `sim-cli experiment`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each topic and repetition is one paired comparison: message passing and the field (at each\n\
    lambda) run with the same seed, model, budgets and queries. The agents' text comes from the\n\
    embedded scripted agent model unless --config names a live one (chat.provider = \"openai\").\n\
    Scripted latency is modelled (per call and per token), so that the same seed gives an identical results.json;\n\
    a live model's is measured, and its calls are recorded in cassette.bin for --replay.\n\n\
    Each (topic, repetition) also runs a plain shared store (the field's index without decay, reinforcement\n\
    or resonance); message passing is text only. The analysis is pre-registered (printed first): the topic\n\
    is the unit, one-sided exact signed-rank tests, at least 5 topics to decide.\n\n\
    Built-in topics: `sim-cli experiment topics` lists them; `--check` proves every finding reachable.\n\n\
    `sim-cli experiment rate DIR --ratings FILE` folds a filled-in blind rating sheet back in.",
    args_conflicts_with_subcommands = true
)]
pub struct ExperimentArgs {
    /// `rate` reads an experiment's blind rating sheet back; `topics` lists and checks the topics.
    #[command(subcommand)]
    pub command: Option<ExperimentCommand>,
    /// How many built-in topics (1-12, in `experiment topics` order), or a comma list of built-in names and
    /// topic TOML files. Fewer than 5 topics decide nothing (collect_more).
    #[arg(long, default_value = "12")]
    pub topics: String,
    /// Repetitions per topic and condition.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// The field's decay constants per simulated hour; the main comparison uses 0.1 when listed, else the
    /// first. Add `auto` to run it at the sweep's pick instead (highest mean field retention): `--lambda auto`
    /// sweeps 0.05,0.1,0.2, `--lambda 0.02,0.05,auto` sweeps those.
    #[arg(long, value_delimiter = ',', default_value = "0.05,0.1,0.2", value_name = "L,...|auto")]
    pub lambda: Vec<LambdaArg>,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Output directory (must not exist or be empty). Default: the first free runs/experiment-s{seed}[-k].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the report pairs shuffled, with a separate key, for blind rating.
    #[arg(long, value_name = "DIR")]
    pub blind_export: Option<PathBuf>,
    /// Write up a persona run instead: one topic built from its reactions (outcomes.jsonl).
    #[arg(long, value_name = "DIR", conflicts_with = "topics")]
    pub from_run: Option<PathBuf>,
    /// Embedding dimension of the local hash embedder (default 256, or the config's). A neural or hosted
    /// embedder decides its own.
    #[arg(long, value_parser = clap::value_parser!(u32).range(8..=8192))]
    pub dim: Option<u32>,
    /// Tokio worker threads. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// A config: its `[chat]` section may name a live model (`provider = "openai"`) or a local one
    /// (`"gguf"`) the three agents run on; its `[embedding]` section names the embedder every vector
    /// comes from (e.g. `provider = "minilm"`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Run even when a neural or hosted embedder fails `sim-cli embed check`.
    #[arg(long)]
    pub skip_embed_check: bool,
    /// The judge of task accuracy: a config whose `[chat]` names a live model. Default: the agents'
    /// live model when --config names one, else the scripted rubric judge.
    #[arg(long, value_name = "FILE")]
    pub judge_config: Option<PathBuf>,
    /// Re-score the live experiment recorded in DIR (its cassette.bin) with no model call: the
    /// same missions, answers and measured latencies, through today's metrics and judge.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["topics", "reps", "lambda", "seed", "from_run", "config", "dim", "skip_embed_check", "sensitivity"])]
    pub replay: Option<PathBuf>,
    /// Also sweep the scripted model's assumptions (the analyst's words per point: 6, 12, 24, 48,
    /// whole; the writer's context: half, default, double) and report where the field stops winning.
    #[arg(long)]
    pub sensitivity: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The agents' model: the scripted one, or the live one a config names.
pub struct AgentModel {
    chat: Option<std::sync::Arc<dyn engine::chat::ChatPort>>,
    name: String,
    live: bool,
}

fn agent_model(cfg: &engine::config::Config, path: &Path, seed: u64) -> Result<AgentModel> {
    match cfg.raw.chat.provider {
        engine::config::ChatProvider::Scripted => Ok(AgentModel { chat: None, name: SCRIPTED_MODEL.into(), live: false }),
        engine::config::ChatProvider::Modelled => bail!(
            "--config {}: chat.provider = \"modelled\" serves persona replies; the experiment runs the scripted agent model or a live one (\"openai\")",
            path.display()
        ),
        engine::config::ChatProvider::Openai | engine::config::ChatProvider::Gguf => Ok(AgentModel {
            chat: Some(providers::build_chat(cfg, seed)?),
            name: cfg.raw.chat.model.clone(),
            live: true,
        }),
    }
}

/// The agents' model and the judge: `--judge-config`'s live model, else
/// the agents' live model, else the scripted ones.
fn models(a: &ExperimentArgs, cfg: &engine::config::Config) -> Result<(AgentModel, AgentModel)> {
    let model = match &a.config {
        Some(path) => agent_model(cfg, path, a.seed)?,
        None => AgentModel { chat: None, name: SCRIPTED_MODEL.into(), live: false },
    };
    let judge = match &a.judge_config {
        Some(path) => {
            let judge_cfg = crate::prelude::load_config(Some(path))?;
            runs::refuse_batch_mode(&judge_cfg, "experiment --judge-config")?;
            let j = agent_model(&judge_cfg, path, a.seed)?;
            if !j.live {
                bail!(
                    "--judge-config {}: names no live model ([chat] provider = \"openai\"); without it the scripted rubric judge scores",
                    path.display()
                );
            }
            j
        }
        None => AgentModel { chat: model.chat.clone(), name: model.name.clone(), live: model.live },
    };
    Ok((model, judge))
}

fn empty_or_new(dir: &Path, flag: &str) -> Result<()> {
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{flag} {}: already exists and is not empty; choose another or remove it", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{flag} {}: cannot create it", dir.display()))
}

/// The topics `--topics` names.
pub fn resolve_topics(arg: &str) -> Result<Vec<Topic>> {
    if let Ok(n) = arg.trim().parse::<usize>() {
        if !(1..=BUILTIN_TOPICS.len()).contains(&n) {
            bail!("--topics {n}: between 1 and {} built-in topics", BUILTIN_TOPICS.len());
        }
        return Ok(Topic::builtins()?.into_iter().take(n).collect());
    }
    let mut out = Vec::new();
    for item in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(t) = Topic::builtin(item) {
            out.push(t?);
        } else if item.ends_with(".toml") || Path::new(item).is_file() {
            let text =
                std::fs::read_to_string(item).with_context(|| format!("--topics: cannot read topic file {item}"))?;
            out.push(Topic::from_toml(&text, item)?);
        } else {
            let names: Vec<&str> = BUILTIN_TOPICS.iter().map(|(n, _)| *n).collect();
            bail!("--topics: unknown topic {item:?} (built-in: {}; or a path to a .toml topic file)", names.join(", "));
        }
    }
    if out.is_empty() {
        bail!("--topics: no topic given");
    }
    let mut names: Vec<&str> = out.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        bail!("--topics: a topic is named twice");
    }
    Ok(out)
}

/// The topic of `--from-run DIR`: built from the run's trace (no model
/// call) by [`Topic::from_outcomes`].
pub fn topic_from_run(dir: &Path) -> Result<Topic> {
    let path = if dir.is_file() { dir.to_path_buf() } else { runs::RunDir::at(dir).trace() };
    let trace = read_trace_file(&path, false).with_context(|| format!("--from-run {}", dir.display()))?;
    let outcomes = trace.ticks.iter().flat_map(|t| &t.outcomes);
    Ok(Topic::from_outcomes(&format!("Persona panel {}", dir.display()), outcomes)?)
}

/// The identity of an experiment: the first 16 hex digits of a digest of
/// its runs (which `experiment rate` never changes).
pub fn experiment_id(records: &[RunRecord]) -> Result<String> {
    let json = serde_json::to_string(records)?;
    Ok(engine::digest::DigestWriter::new("experiment id v1").str(&json).finish().hex()[..16].to_string())
}

/// `results.json`.
#[derive(Debug, Serialize)]
struct Results<'a> {
    experiment: Setup<'a>,
    summary: &'a Summary,
    runs: &'a [RunRecord],
    #[serde(skip_serializing_if = "Option::is_none")]
    sensitivity: Option<&'a sensitivity::Sensitivity>,
}

/// How the experiment was set up.
#[derive(Debug, Serialize)]
struct Setup<'a> {
    /// The experiment's identity: a digest of its runs, carried by its
    /// blind rating kit so that a sheet is never folded into another one.
    id: String,
    seed: u64,
    reps: u32,
    topics: Vec<TopicSummary<'a>>,
    lambdas: &'a [f64],
    main_lambda: f64,
    dim: u32,
    embedder: EmbedderSummary,
    budgets: &'a Budgets,
    latency_model: &'a LatencyModel,
    model: ModelSummary,
    /// The cassette a replay re-scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    replayed_from: Option<String>,
}

#[derive(Debug, Serialize)]
struct TopicSummary<'a> {
    name: &'a str,
    title: &'a str,
    findings: usize,
}

/// The model that wrote the agents' text.
#[derive(Debug, Serialize)]
struct ModelSummary {
    name: String,
    kind: &'static str,
    live: bool,
}

/// The embedder every vector came from, and what the sanity check said.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct EmbedderSummary {
    model: String,
    dim: usize,
    /// `lexical` (the local hash embedder) or `semantic`.
    similarity: engine::embed::check::Similarity,
    /// `sim-cli embed check`'s verdict; `null` with --skip-embed-check.
    check: Option<String>,
    check_passed: Option<bool>,
}

/// The embedder of `sim-cli experiment`: the config's (the local hash
/// embedder by default), its dimension set by `--dim` for the hash
/// embedder, with no cache across missions, checked first unless skipped.
fn experiment_embedder(
    a: &ExperimentArgs,
    cfg: &mut engine::config::Config,
) -> Result<(std::sync::Arc<dyn engine::embed::EmbeddingPort>, EmbedderSummary)> {
    use engine::config::{EmbeddingModel, Provider};
    let e = &mut cfg.raw.embedding;
    if e.model() == EmbeddingModel::Disabled {
        bail!("--config: embedding.model = \"none\": the experiment needs an embedder (the field and the inboxes rank by vector)");
    }
    if let Some(dim) = a.dim {
        match e.provider {
            Provider::Local | Provider::Modelled => e.dim = dim as usize,
            Provider::Minilm | Provider::Openai => {
                bail!("--dim {dim}: the {} embedder decides its dimension ({}); leave --dim out", e.model, e.dim)
            }
        }
    }
    // Each mission pays for its own embeddings: no cache across missions.
    e.cache = false;
    let similarity = crate::prelude::similarity(cfg);
    let (check, check_passed) = if a.skip_embed_check {
        (None, None)
    } else {
        let report = crate::prelude::run_check(cfg)?;
        if report.refuses() {
            bail!(
                "{}\n(the experiment trusts the embedder's similarities; pass --skip-embed-check to run anyway)",
                report.verdict
            );
        }
        (Some(report.verdict), Some(report.passed))
    };
    let e = &cfg.raw.embedding;
    let summary = EmbedderSummary { model: e.model.clone(), dim: e.dim, similarity, check, check_passed };
    Ok((std::sync::Arc::new(providers::build_embedder(cfg, 0)?), summary))
}

/// The `--json` output of `sim-cli experiment`.
#[derive(Debug, Serialize)]
struct Done<'a> {
    out: String,
    summary: &'a Summary,
}

/// One line of the blind export's `key.json`.
#[derive(Debug, Serialize)]
struct KeyEntry<'a> {
    pair: String,
    topic: &'a str,
    rep: u32,
    #[serde(rename = "A")]
    a: &'static str,
    #[serde(rename = "B")]
    b: &'static str,
}

/// One `--lambda` item: a decay constant, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LambdaArg {
    /// Sweep this lambda.
    Value(f64),
    /// Run the main comparison at the sweep's pick.
    Auto,
}

impl std::str::FromStr for LambdaArg {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(LambdaArg::Auto);
        }
        match s.trim().parse::<f64>() {
            Ok(l) if l.is_finite() && l >= 0.0 => Ok(LambdaArg::Value(l)),
            _ => Err(format!("{s:?} is neither `auto` nor a decay constant (a finite number >= 0)")),
        }
    }
}

/// The swept lambdas and whether the main comparison takes the sweep's pick.
fn lambdas(args: &[LambdaArg]) -> (Vec<f64>, bool) {
    let auto = args.contains(&LambdaArg::Auto);
    let mut values: Vec<f64> = args
        .iter()
        .filter_map(|a| match a {
            LambdaArg::Value(l) => Some(*l),
            LambdaArg::Auto => None,
        })
        .collect();
    if values.is_empty() {
        values = vec![0.05, 0.1, 0.2];
    }
    (values, auto)
}

/// What `sim-cli experiment` can do after an experiment.
#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCommand {
    /// Fold the blind kit's filled-in ratings sheet into an experiment's results (the human quality criterion).
    Rate(rate::RateArgs),
    /// List the built-in topics; with --check, prove every gold finding reachable in every arm.
    Topics(TopicsArgs),
}

/// Options of `sim-cli experiment topics`.
#[derive(Debug, Args)]
pub struct TopicsArgs {
    /// Check, finding by finding, that every arm can carry it to the report: its key phrases survive the
    /// analyst's cut (message passing) and its sentence fits the agents' output budgets. Exits non-zero when a
    /// finding is unreachable.
    #[arg(long)]
    pub check: bool,
    /// Topic TOML files to check instead of the built-in topics.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print JSON on stdout: `topics` (the count), `findings`, `unreachable` (empty when all are reachable) and
    /// `list`.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sim-cli experiment topics`.
fn topics(a: &TopicsArgs) -> Result<()> {
    use ::experiment::model::{unreachable, PathBudgets, ANALYST_WORDS};
    let topics = if a.files.is_empty() {
        Topic::builtins()?
    } else {
        let mut v = Vec::new();
        for f in &a.files {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read topic file {}", f.display()))?;
            v.push(Topic::from_toml(&text, &f.display().to_string())?);
        }
        v
    };
    let b = Budgets::default();
    let budgets = PathBudgets { researcher: b.researcher_output, analyst: b.analyst_output, writer: b.writer_output };
    let missing: Vec<_> = topics.iter().flat_map(|t| unreachable(t, Some(ANALYST_WORDS), budgets)).collect();
    let findings: usize = topics.iter().map(|t| t.findings.len()).sum();
    if a.json {
        let list: Vec<_> = topics
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "title": t.title, "passages": t.passages.len(), "findings": t.findings.len()}))
            .collect();
        let mut v = serde_json::json!({"topics": topics.len(), "findings": findings, "list": list});
        if a.check {
            v["unreachable"] = serde_json::to_value(&missing)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for t in &topics {
            println!("{:<24} {} passages, {} findings  {}", t.name, t.passages.len(), t.findings.len(), t.title);
        }
        if a.check {
            for u in &missing {
                println!("unreachable: {} {} in {}: {}", u.topic, u.finding, u.arm, u.cause);
            }
            println!(
                "{} topics, {findings} findings: {}",
                topics.len(),
                if missing.is_empty() {
                    "every finding is reachable in every arm".to_string()
                } else {
                    format!("{} unreachable", missing.len())
                }
            );
        }
    }
    if a.check && !missing.is_empty() {
        bail!("{} of {findings} findings are unreachable (listed above)", missing.len());
    }
    Ok(())
}

/// Everything an experiment runs on: what to run, the ports, and where the
/// answers come from or go.
pub struct Plan {
    topics: Vec<Topic>,
    reps: u32,
    seed: u64,
    swept: Vec<f64>,
    auto: bool,
    model: AgentModel,
    judge: AgentModel,
    embedder: std::sync::Arc<dyn engine::embed::EmbeddingPort>,
    embedder_summary: EmbedderSummary,
    embed_model: String,
    dim: usize,
    /// Price labels: chat, embedding.
    prices: (String, String),
    latency: agents::experiment::LatencySource,
    /// A live experiment's cassette, being written.
    recorder: Option<std::sync::Arc<::experiment::cassette::Recorder>>,
    /// The cassette a replay serves from.
    replaying: Option<(PathBuf, std::sync::Arc<::experiment::cassette::Cassette>)>,
    out: PathBuf,
}

/// Runs `sim-cli experiment`.
pub fn experiment(a: ExperimentArgs) -> Result<()> {
    match &a.command {
        Some(ExperimentCommand::Rate(r)) => return rate::rate(r),
        Some(ExperimentCommand::Topics(t)) => return topics(t),
        None => {}
    }
    let plan = match &a.replay {
        Some(dir) => cassette::replay_plan(&a, dir)?,
        None => fresh_plan(&a)?,
    };
    if a.sensitivity && plan.model.live {
        bail!(
            "--sensitivity sweeps the scripted agent model's assumptions; with a live model ({}) there are none to sweep",
            plan.model.name
        );
    }
    if plan.recorder.is_none() {
        // (A recorded plan made its directory to hold the cassette.)
        empty_or_new(&plan.out, "--out")?;
    }
    execute(&a, plan)
}

/// The plan of a new experiment: topics, config, models and embedder from
/// the flags; a live one is recorded into the cassette.
fn fresh_plan(a: &ExperimentArgs) -> Result<Plan> {
    let (swept, auto) = lambdas(&a.lambda);
    let topics = match &a.from_run {
        Some(dir) => vec![topic_from_run(dir)?],
        None => resolve_topics(&a.topics)?,
    };
    let mut cfg = crate::prelude::load_config(a.config.as_ref())?;
    runs::refuse_batch_mode(&cfg, "experiment")?;
    let (model, judge) = models(a, &cfg)?;
    let (embedder, embedder_summary) = experiment_embedder(a, &mut cfg)?;
    let out = a.out.clone().unwrap_or_else(|| runs::dir::fresh(&format!("runs/experiment-s{}", a.seed)));
    let prices = (
        if model.live { cfg.chat_price_label.as_str() } else { "nominal" }.to_string(),
        cfg.embedding_price_label.as_str().to_string(),
    );
    let latency = match model.live {
        true => agents::experiment::LatencySource::Measured,
        false => agents::experiment::LatencySource::Modelled,
    };
    let plan = Plan {
        topics,
        reps: a.reps,
        seed: a.seed,
        swept,
        auto,
        model,
        judge,
        embedder,
        embedder_summary,
        embed_model: cfg.raw.embedding.model.clone(),
        dim: cfg.raw.embedding.dim,
        prices,
        latency,
        recorder: None,
        replaying: None,
        out,
    };
    if let Some(b) = &a.blind_export {
        empty_or_new(b, "--blind-export")?;
    }
    if plan.model.live || plan.judge.live {
        empty_or_new(&plan.out, "--out")?;
        return cassette::record(plan);
    }
    Ok(plan)
}

fn execute(a: &ExperimentArgs, plan: Plan) -> Result<()> {
    let out = plan.out.clone();
    let listed = if plan.swept.iter().any(|l| (l - 0.1).abs() < 1e-12) { 0.1 } else { plan.swept[0] };
    let spec = ExperimentSpec {
        topics: plan.topics.clone(),
        reps: plan.reps,
        lambdas: plan.swept.clone(),
        seed: plan.seed,
        budgets: Budgets::default(),
        latency: LatencyModel::default(),
        dim: plan.dim,
        embedder: plan.embedder.clone(),
        embed_model: plan.embed_model.clone(),
        chat: plan.model.chat.clone(),
        model: plan.model.name.clone(),
        analyst_words: Some(::experiment::model::ANALYST_WORDS),
        latency_source: plan.latency.clone(),
        judge: plan.judge.chat.clone(),
        judge_model: plan.judge.name.clone(),
        field_logs: Some(out.join("fields")),
    };
    let bar = crate::progress::bar(0, "missions");
    let rt = runtime(a.threads)?;
    let missions = rt.block_on(run_experiment(&spec, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }));
    bar.finish_and_clear();
    let missions = missions.context("the experiment failed")?;
    let records: Vec<RunRecord> = missions.iter().map(|m| m.record.clone()).collect();
    if let Some(rec) = &plan.recorder {
        cassette::record_latencies(rec, &records, plan.model.live)?;
    }
    let (mut summary, main_lambda) = summary_of(&missions, &records, (listed, &plan.swept, plan.auto));
    if let Some(c) = summary.cost.as_mut() {
        (c.chat_price, c.embedding_price) = plan.prices.clone();
    }
    let sensitivity = match a.sensitivity {
        true => Some(rt.block_on(sensitivity::sweep(&spec, main_lambda)).context("the sensitivity sweep failed")?),
        false => None,
    };
    let id = experiment_id(&records)?;
    let results = Results {
        experiment: Setup {
            id: id.clone(),
            seed: plan.seed,
            reps: plan.reps,
            topics: plan
                .topics
                .iter()
                .map(|t| TopicSummary { name: &t.name, title: &t.title, findings: t.findings.len() })
                .collect(),
            lambdas: &plan.swept,
            main_lambda,
            dim: spec.dim as u32,
            embedder: plan.embedder_summary.clone(),
            budgets: &spec.budgets,
            latency_model: &spec.latency,
            model: ModelSummary {
                name: plan.model.name.clone(),
                kind: if plan.model.live { "live" } else { "scripted" },
                live: plan.model.live,
            },
            replayed_from: plan.replaying.as_ref().map(|(p, _)| p.display().to_string()),
        },
        summary: &summary,
        runs: &records,
        sensitivity: sensitivity.as_ref(),
    };
    std::fs::write(out.join("results.json"), serde_json::to_vec_pretty(&results)?)
        .with_context(|| format!("cannot write {}", out.display()))?;
    charts(&out, &missions, &plan.topics, main_lambda)?;
    let mut report = report_md(&spec, &results.experiment.embedder, &plan.topics, &summary, &records, main_lambda);
    if let Some(s) = &sensitivity {
        sensitivity::chart(&out, s)?;
        report.push_str(&sensitivity::markdown(s));
    }
    std::fs::write(out.join("report.md"), report)?;
    if let Some(dir) = &a.blind_export {
        blind_export(dir, &records, &plan.topics, main_lambda, plan.seed, &id)?;
    }
    if let Some((path, c)) = &plan.replaying {
        eprintln!("replayed from {}: {} recorded answers served, no model called", path.display(), c.served());
    }
    print_done(a, &out, &summary)
}

/// The summary at the main lambda (the listed one, or the sweep's pick
/// with `auto`), with the lifetime calibration of its field missions.
fn summary_of(
    missions: &[Mission],
    records: &[RunRecord],
    (listed, swept, auto): (f64, &[f64], bool),
) -> (Summary, f64) {
    let mut summary = summarise(records, listed, swept);
    let main_lambda = match (&summary.lambda_pick, auto) {
        (Some(pick), true) => pick.chosen,
        _ => listed,
    };
    if (main_lambda - listed).abs() > 1e-12 {
        summary = summarise(records, main_lambda, swept);
    }
    let accessed: Vec<(f64, f64)> = missions
        .iter()
        .filter(|m| m.record.lambda.is_some_and(|l| (l - main_lambda).abs() < 1e-12))
        .flat_map(|m| m.accessed_lifetimes.iter().copied())
        .collect();
    if let Some(pick) = summary.lambda_pick.as_mut() {
        pick.calibrated = calibrate_lambda(&accessed, ::field::FieldConfig::default().archive_below);
    }
    (summary, main_lambda)
}

fn print_done(a: &ExperimentArgs, out: &Path, summary: &Summary) -> Result<()> {
    if a.json {
        let done = Done { out: out.display().to_string(), summary };
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(());
    }
    print!("{}", criteria_table(summary));
    println!("\nWrote {}: report.md, results.json, decay.svg, retention.svg, stability.svg,", out.display());
    println!("and fields/<topic>-rep<r>-lambda<l>/field.events (replay one with `sim-cli field replay`).");
    if let Some(dir) = &a.blind_export {
        println!(
            "Blind rating kit in {} (key.json holds the conditions); once rated: `sim-cli experiment rate {} --ratings {}`.",
            dir.display(),
            out.display(),
            dir.join("ratings.csv").display()
        );
    }
    Ok(())
}

/// Writes each pair's two reports as A and B in a seeded random order,
/// the key (which is which) apart, and a ratings sheet to fill in.
fn blind_export(
    dir: &Path,
    records: &[RunRecord],
    topics: &[Topic],
    main_lambda: f64,
    seed: u64,
    id: &str,
) -> Result<()> {
    let pairs = ::experiment::summary::pairs(records, main_lambda);
    let mut s = Stream::derive(seed, 0, 0, Purpose::Agent);
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    s.shuffle(&mut order);
    let mut key = Vec::new();
    let mut sheet = format!("{},{},{},experiment\n", rate::PAIR, rate::SCORE_A, rate::SCORE_B);
    for (n, i) in order.iter().enumerate() {
        let (field, control) = pairs[*i];
        let swap = s.below(2) == 1;
        let (a, b) = if swap { (control, field) } else { (field, control) };
        let question = topics.iter().find(|t| t.name == field.topic).map_or("", |t| t.question.as_str());
        let pair = format!("pair-{:03}", n + 1);
        for (label, r) in [("A", a), ("B", b)] {
            let body = format!("# {pair}, report {label}\n\nQuestion: {question}\n\n{}\n", r.report);
            let path = dir.join(format!("{pair}-{label}.md"));
            std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
        }
        sheet.push_str(&format!("{pair},,,{id}\n"));
        key.push(KeyEntry { pair, topic: &field.topic, rep: field.rep, a: a.condition.name(), b: b.condition.name() });
    }
    let key = serde_json::json!({ "experiment": id, "pairs": key });
    std::fs::write(dir.join("key.json"), serde_json::to_vec_pretty(&key)?)?;
    std::fs::write(dir.join("ratings.csv"), sheet)?;
    Ok(())
}
