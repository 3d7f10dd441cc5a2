//! `sim-cli validate`: a panel built from real respondents answers a
//! survey on the configured chat model, and its answers are scored
//! against the people's own (the `survey` crate does the scoring).

mod ask;
mod page;

use crate::preflight::{self, Estimate};
use crate::prelude::{load_config, runtime};
use anyhow::{bail, Context, Result};
use ask::{Asked, Replies};
use clap::Args;
use engine::chat::ChatPort;
use engine::config::{ChatProvider, Config, EmbeddingModel};
use engine::cost::{estimate_tokens, Spend, NANO_PER_USD};
use engine::digest::{Digest, DigestWriter};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use survey::score::{self, Scores, Settings, Source};
use survey::suite::{Texts, BUILTIN};
use survey::{Panel, Suite, Survey};

/// Options of `sim-cli validate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    sim-cli validate                               the built-in ANES 1996 suite on the configured model\n  \
    sim-cli validate --sample 200 --config live.toml --yes\n  \
    sim-cli validate --panel people.csv --panel-map map.toml --answers answers.csv --questions survey.toml\n\n\
    Each respondent becomes a persona stated in their own traits; the model answers every question\n\
    twice (at --seed and at --seed + 1, for reliability). Half the respondents (seeded) fit the\n\
    demographic baseline; every figure is scored on the other half, with a 95% bootstrap interval.\n\
    The formats, the figures and the ANES suite are described in docs/GUIDE.md, \"Checked against people\".\n\
    Writes summary.json, answers.csv (one line per respondent and question) and report.html to --out.")]
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
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output directory. Default: a new directory runs/validate-SUITE-sSEED. Never overwritten; an unfinished
    /// validation there is continued.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Bootstrap resamples behind each interval.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(100..=100_000))]
    pub resamples: u32,
    /// Tokio worker threads. Default: one per core. Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// A live validation estimated above this many USD asks for confirmation first (or needs --yes when piped).
    #[arg(long, value_name = "USD", default_value_t = 1.0)]
    pub confirm_above_usd: f64,
    /// Run a live validation above --confirm-above-usd without asking.
    #[arg(long)]
    pub yes: bool,
}

/// What the calls cost, over both runs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Calls {
    /// Questions asked (respondents x questions x 2 runs).
    asked: u64,
    /// Chat calls made, guardrail retries included.
    calls: u64,
    /// Questions without a valid answer after every attempt.
    failed: u64,
    /// Prompt tokens.
    input_tokens: u64,
    /// Reply tokens.
    output_tokens: u64,
    /// What they cost, USD.
    cost_usd: f64,
    /// Some tokens are estimated (the scripted model, or a server that
    /// reported no usage), not reported.
    estimated: bool,
}

/// The summary: `summary.json`, and stdout with `--json`.
#[derive(Debug, Serialize)]
struct Summary {
    /// Same seed, config and data: same digest.
    digest: String,
    suite: String,
    seed: u64,
    chat_model: String,
    /// `direct`, or `direct+ssr` when SSR rates the free text too.
    method: String,
    /// The embedder SSR used, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding_model: Option<String>,
    config_hash: String,
    /// Digest of the panel, map, answers and survey texts.
    inputs: String,
    /// Respondents in the data.
    panel: usize,
    calls: Calls,
    #[serde(flatten)]
    scores: Scores,
    out: String,
}

/// Runs `sim-cli validate`.
pub fn validate(args: ValidateArgs) -> Result<()> {
    let cfg = load_config(args.config.as_ref())?;
    crate::prelude::refuse_batch_mode(&cfg, "validate")?;
    let mut suite = load_suite(&args)?;
    if let Some(path) = &args.subgroups {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --subgroups {name}"))?;
        suite.survey.subgroups = Survey::subgroups_from_toml(&text, &name)?;
    }
    let total = suite.panel.respondents.len();
    let people = subsample(&suite.panel, args.sample, args.seed)?;
    let human: Vec<Vec<Option<u8>>> =
        suite.answers.by_question.iter().map(|column| people.iter().map(|&r| column[r]).collect()).collect();
    let respondents: Vec<_> = people.iter().map(|&r| suite.panel.respondents[r].clone()).collect();
    let ssr = cfg.raw.intent.ssr();
    if ssr && cfg.raw.embedding.model() == EmbeddingModel::Disabled {
        bail!("the config asks for SSR ([intent] method = \"ssr\") but turns embeddings off: SSR needs an embedder");
    }
    let started = Started {
        suite: suite.name.clone(),
        inputs: suite.inputs.hex(),
        seed: args.seed,
        respondents: respondents.len(),
        config_hash: cfg.content_hash().hex(),
    };
    let (out, resumed) = prepare_out(args.out.as_deref(), &started)?;
    if resumed {
        eprintln!(
            "continuing the unfinished validation in {}: answers already paid for are served from its logs",
            out.display()
        );
    }
    let asked = (respondents.len() * suite.survey.questions.len() * 2) as u64;
    eprintln!(
        "validate {}: {} of {total} respondents x {} questions x 2 runs = {asked} chat calls at least, to {}",
        suite.name,
        respondents.len(),
        suite.survey.questions.len(),
        cfg.raw.chat.model
    );
    let estimate = || {
        let prompt = suite.survey.questions[0].prompt(suite.survey.context.as_deref(), &respondents[0]);
        let per_call = cfg.chat_price.bill(estimate_tokens(&prompt), cfg.raw.chat.max_output_tokens).nano_usd;
        Estimate { calls: asked, usd: (asked * per_call) as f64 / NANO_PER_USD as f64 }
    };
    preflight::confirm(&cfg, estimate, args.confirm_above_usd, args.yes)?;
    let [first, second] = ask_both(&cfg, &args, &suite.survey, &respondents, &out, resumed)?;
    let mut sources = vec![Source { name: "model (direct)".into(), answers: ask::direct(&suite.survey, &first) }];
    if ssr {
        sources
            .push(Source { name: "model (SSR)".into(), answers: ask::ssr(&cfg, &suite.survey, &first, args.threads)? });
    }
    let split = score::held_out(respondents.len(), args.seed);
    sources.extend(score::baselines(&suite.survey, &respondents, &human, &split, args.seed));
    let rerun = Source {
        name: format!("a second run (seed {})", args.seed.wrapping_add(1)),
        answers: ask::direct(&suite.survey, &second),
    };
    let settings = Settings { seed: args.seed, resamples: args.resamples as usize };
    let scores = score::score(&suite.survey, &respondents, &human, &sources, Some(&rerun), settings);
    let digest = digest(&cfg, &suite, args.seed, &respondents, [&first, &second], &sources);
    let summary = Summary {
        digest: digest.hex(),
        suite: suite.name.clone(),
        seed: args.seed,
        chat_model: cfg.raw.chat.model.clone(),
        method: if ssr { "direct+ssr".into() } else { "direct".into() },
        embedding_model: ssr.then(|| cfg.raw.embedding.model.clone()),
        config_hash: cfg.content_hash().hex(),
        inputs: suite.inputs.hex(),
        panel: total,
        calls: calls(&[&first, &second]),
        scores,
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
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", page::text(&summary));
    }
    Ok(())
}

/// Both runs of the panel (at `--seed` and `--seed + 1`), after the live
/// model's connection check; when that check fails on a new directory, the
/// directory is removed again, since nothing was bought.
fn ask_both(
    cfg: &Config,
    args: &ValidateArgs,
    survey: &Survey,
    respondents: &[survey::Respondent],
    out: &Path,
    resumed: bool,
) -> Result<[Replies; 2]> {
    let rt = runtime(args.threads)?;
    let asked = rt.block_on(async {
        runs::preflight::probe(cfg, providers::build_chat(cfg, args.seed)?.as_ref(), &actors::progress::Silent).await?;
        let first = ask::ask_all(cfg, chat_port(cfg, args.seed, out, 1)?, survey, respondents, "run 1 of 2").await;
        let rerun = chat_port(cfg, args.seed.wrapping_add(1), out, 2)?;
        let second = ask::ask_all(cfg, rerun, survey, respondents, "run 2 of 2").await;
        anyhow::Ok([first, second])
    });
    if asked.is_err() && !resumed && std::fs::read_dir(out).map(|d| d.count()).unwrap_or(0) <= 1 {
        let _ = std::fs::remove_file(out.join(STARTED));
        let _ = std::fs::remove_dir(out);
    }
    asked
}

/// The suite the arguments name: a built-in one, or the user's four files.
fn load_suite(args: &ValidateArgs) -> Result<Suite> {
    let (Some(panel), Some(map), Some(answers), Some(questions)) =
        (&args.panel, &args.panel_map, &args.answers, &args.questions)
    else {
        let name = args.suite.as_deref().unwrap_or("anes96");
        return Suite::builtin(name)
            .with_context(|| format!("--suite {name}: no such suite (built in: {})", BUILTIN.join(", ")));
    };
    let read = |flag: &str, p: &Path| -> Result<(String, String)> {
        let name = p.display().to_string();
        let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {flag} {name}"))?;
        Ok((text, name))
    };
    let (panel, map, answers, questions) = (
        read("--panel", panel)?,
        read("--panel-map", map)?,
        read("--answers", answers)?,
        read("--questions", questions)?,
    );
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
        Some(k) => panel
            .subsample(k as usize, seed)
            .with_context(|| format!("--sample {k}: the panel has only {n} respondents")),
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

/// The marker file of a validation's directory.
const STARTED: &str = "validate.json";

/// The output directory: `out` (absent, empty, or an unfinished validation
/// of the same `started`), or a fresh `runs/validate-<suite>-s<seed>`.
/// Returns it with whether an unfinished validation is continued.
fn prepare_out(out: Option<&Path>, started: &Started) -> Result<(PathBuf, bool)> {
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => runs::dir::fresh(&format!("runs/validate-{}-s{}", started.suite, started.seed)),
    };
    let empty = std::fs::read_dir(&path).map(|mut d| d.next().is_none()).unwrap_or(true);
    let marker = path.join(STARTED);
    let resumed = !empty && marker.exists() && !path.join(runs::dir::SUMMARY).exists();
    if resumed {
        let text = std::fs::read_to_string(&marker).with_context(|| format!("cannot read {}", marker.display()))?;
        let theirs: Started =
            serde_json::from_str(&text).with_context(|| format!("{}: not a validation's marker", marker.display()))?;
        if theirs != *started {
            bail!(
                "output directory {} holds an unfinished validation of other inputs ({} seed {}, {} respondents, config {}); \
                 continue it with the command that started it, or choose another --out",
                path.display(),
                theirs.suite,
                theirs.seed,
                theirs.respondents,
                &theirs.config_hash[..12.min(theirs.config_hash.len())]
            );
        }
    } else if !empty {
        bail!("output directory {} already exists and is not empty; choose another --out or remove it", path.display());
    }
    std::fs::create_dir_all(&path).with_context(|| format!("cannot create output directory {}", path.display()))?;
    std::fs::write(&marker, serde_json::to_string_pretty(started)?)
        .with_context(|| format!("cannot write {}", marker.display()))?;
    Ok((path, resumed))
}

/// The chat port of run `n` (1 or 2): for a live provider, behind the
/// run's own write-ahead log in `out`, so that an interrupted validation
/// continued with the same command buys no answer twice. (One log per run:
/// both runs send the same requests, under different seeds.)
fn chat_port(cfg: &Config, seed: u64, out: &Path, n: u32) -> Result<Arc<dyn ChatPort>> {
    use engine::store::trace::{cassette::CassetteChat, wal};
    let chat = providers::build_chat(cfg, seed)?;
    Ok(match cfg.raw.chat.provider {
        ChatProvider::Scripted => chat,
        ChatProvider::Modelled | ChatProvider::Openai | ChatProvider::Gguf => {
            let path = out.join(format!("chat-run{n}.wal"));
            // Answers are served from the log; a call that failed is asked again.
            let paid = wal::read_wal(&path)?.0.into_iter().filter(|e| e.answer.is_ok()).collect();
            let logged: Arc<dyn ChatPort> = Arc::new(wal::WalChat::open(&path, chat)?);
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

fn calls(runs: &[&Replies; 2]) -> Calls {
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
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write(runs::dir::SUMMARY, serde_json::to_string_pretty(summary)?.as_bytes())?;
    let ssr = t.sources.iter().position(|s| s.name == "model (SSR)");
    let mut csv = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["respondent", "half", "question", "human", "model", "model_rerun"];
    if ssr.is_some() {
        header.extend(["model_ssr", "model_ssr_expected"]);
    }
    header.extend(["attempts", "attempts_rerun", "cost_nano_usd", "why"]);
    csv.write_record(&header)?;
    let opt = |x: Option<u8>| x.map_or_else(String::new, |p| p.to_string());
    for (q, question) in t.survey.questions.iter().enumerate() {
        for (r, person) in t.respondents.iter().enumerate() {
            let (a, b): (&Asked, &Asked) = (&t.runs[0][q][r], &t.runs[1][q][r]);
            let mut row = vec![
                person.id.clone(),
                if t.split[r] { "held_out" } else { "fitted" }.to_string(),
                question.id.clone(),
                opt(t.human[q][r]),
                opt(a.point),
                opt(b.point),
            ];
            if let Some(j) = ssr {
                let answer = t.sources[j].answers[q][r].as_ref();
                row.push(opt(answer.map(|x| x.point)));
                row.push(answer.map_or_else(String::new, |x| format!("{:.4}", survey::stats::mean(&x.pmf))));
            }
            row.push(a.attempts.to_string());
            row.push(b.attempts.to_string());
            row.push((a.spend.nano_usd + b.spend.nano_usd).to_string());
            row.push(a.why.clone());
            csv.write_record(&row)?;
        }
    }
    write("answers.csv", &csv.into_inner().context("cannot write answers.csv")?)?;
    write(runs::dir::REPORT, page::html(summary).as_bytes())?;
    std::io::stderr().flush().ok();
    Ok(())
}
