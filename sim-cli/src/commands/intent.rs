//! `sim-cli intent score`: SSR on texts, to tune anchor sets before a run;
//! `sim-cli compare-intent`: a run's intent distributions against a
//! reference survey.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use engine::intent::{builtin_anchor_sets, ks_similarity, pmf_of_counts, AnchorSet, POINTS};
use engine::summary::RunSummary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Purchase intent by semantic similarity rating.
#[derive(Debug, Subcommand)]
pub enum IntentCommand {
    /// Print the SSR pmf and expected rating of each text.
    Score(ScoreArgs),
}

/// Options of `sim-cli intent score`.
#[derive(Debug, Args)]
#[command(after_help = "Embeds the texts and the anchor statements through the configured provider (use a\n\
    neural one: the local hash embedder only matches words), compares each text with the five\n\
    statements of every anchor set, and turns the similarities into a pmf over 1-5 as the SSR paper\n\
    does (subtract the least similarity, add epsilon to it, normalise, apply the temperature), averaged\n\
    over the sets. Example:\n\n  \
    sim-cli intent score \"I'd buy it today\" \"not for me\" --config fixtures/configs/minilm.toml\n\n\
    The anchor sets, epsilon and temperature come from the config's [intent] section (the built-in\n\
    purchase-intent sets by default). JSON: {\"results\": [{\"text\", \"pmf\": [p1..p5], \"expected\"}]}.")]
pub struct ScoreArgs {
    /// The texts (at least one).
    #[arg(required = true)]
    pub texts: Vec<String>,
    /// A config file: its `[embedding]` names the embedder, its `[intent]` the anchor sets.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Only these anchor sets, by name (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub anchors: Vec<String>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `sim-cli compare-intent`.
#[derive(Debug, Args)]
#[command(after_help = "The reference is a CSV of 1-5 counts per stimulus, e.g. a real survey's:\n\n  \
    stimulus,1,2,3,4,5\n  trailflex-shoe,12,30,41,25,9\n\n\
    For each of its stimuli, reports the run's direct distribution (and its SSR pmf, when the run\n\
    measured it) against the reference: KS similarity (1 - the largest gap between the cumulative\n\
    distributions; 1 = the same) and the mean difference (run minus reference).")]
pub struct CompareArgs {
    /// The run directory (it holds summary.json).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// The reference distributions (CSV: stimulus,1,2,3,4,5 with counts).
    #[arg(long, value_name = "FILE")]
    pub reference: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Scored {
    text: String,
    pmf: [f64; POINTS],
    expected: f64,
}

#[derive(Serialize)]
struct ScoreReport {
    model: String,
    anchor_sets: Vec<String>,
    epsilon: f64,
    temperature: f64,
    results: Vec<Scored>,
}

/// Runs an `intent` subcommand.
pub fn intent(cmd: IntentCommand) -> Result<()> {
    match cmd {
        IntentCommand::Score(args) => score(&args),
    }
}

/// The anchor sets `names` picks from `all` (all of them when empty).
fn pick_sets(all: Vec<AnchorSet>, names: &[String]) -> Result<Vec<AnchorSet>> {
    if names.is_empty() {
        return Ok(all);
    }
    let known: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
    names
        .iter()
        .map(|n| {
            all.iter()
                .find(|s| &s.name == n)
                .cloned()
                .with_context(|| format!("--anchors {n}: no such anchor set (known: {})", known.join(", ")))
        })
        .collect()
}

fn score(args: &ScoreArgs) -> Result<()> {
    let cfg = crate::prelude::load_embedding_config(args.config.as_ref())?;
    let intent = &cfg.raw.intent;
    let all = if intent.anchor_sets.is_empty() { builtin_anchor_sets() } else { intent.anchor_sets.clone() };
    let sets = pick_sets(all, &args.anchors)?;
    let statements: Vec<String> = sets.iter().flat_map(|s| s.statements.clone()).collect();
    let mut texts = statements.clone();
    texts.extend(args.texts.iter().cloned());
    let vectors = crate::prelude::embed_texts(&cfg, &texts, None)?;
    let (anchors, responses) = vectors.split_at(statements.len());
    let views: Vec<Vec<&[f32]>> = anchors.chunks(POINTS).map(|set| set.iter().map(|v| &v[..]).collect()).collect();
    let results = args
        .texts
        .iter()
        .zip(responses)
        .map(|(text, v)| {
            let (pmf, expected) = engine::intent::rate(v, &views, intent.epsilon, intent.temperature);
            Scored { text: text.clone(), pmf, expected }
        })
        .collect();
    let report = ScoreReport {
        model: cfg.raw.embedding.model.clone(),
        anchor_sets: sets.iter().map(|s| s.name.clone()).collect(),
        epsilon: intent.epsilon,
        temperature: intent.temperature,
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "SSR with {} over {} anchor set(s) ({}), epsilon {}, temperature {}:",
        report.model,
        report.anchor_sets.len(),
        report.anchor_sets.join(", "),
        report.epsilon,
        report.temperature
    );
    println!("  {:>8}   {:>5} {:>5} {:>5} {:>5} {:>5}  text", "expected", "1", "2", "3", "4", "5");
    for r in &report.results {
        let pmf: Vec<String> = r.pmf.iter().map(|p| format!("{:>4.0}%", 100.0 * p)).collect();
        println!("  {:>8.2}   {}  {:?}", r.expected, pmf.join(" "), r.text);
    }
    Ok(())
}

/// Reads a reference CSV: a `stimulus,1,2,3,4,5` header, then one row of
/// counts per stimulus. Every error names the file, the line and the cause.
pub fn read_reference(path: &Path) -> Result<BTreeMap<String, [u64; POINTS]>> {
    let name = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("--reference {name}: cannot read it"))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((_, header)) = lines.next() else {
        bail!("--reference {name}: empty; expected a header stimulus,1,2,3,4,5")
    };
    let cells: Vec<&str> = header.split(',').map(str::trim).collect();
    if cells != ["stimulus", "1", "2", "3", "4", "5"] {
        bail!("--reference {name}: line 1: the header must be stimulus,1,2,3,4,5, got {header:?}");
    }
    let mut out = BTreeMap::new();
    for (n, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let at = || format!("--reference {name}: line {}", n + 1);
        if cells.len() != 1 + POINTS {
            bail!("{}: expected a stimulus and 5 counts, got {} fields", at(), cells.len());
        }
        let mut counts = [0u64; POINTS];
        for (i, c) in cells[1..].iter().enumerate() {
            counts[i] = c
                .parse()
                .with_context(|| format!("{}: count of point {} is not a whole number: {c:?}", at(), i + 1))?;
        }
        if counts.iter().sum::<u64>() == 0 {
            bail!("{}: stimulus {:?} has no answers", at(), cells[0]);
        }
        if out.insert(cells[0].to_string(), counts).is_some() {
            bail!("{}: stimulus {:?} appears twice", at(), cells[0]);
        }
    }
    if out.is_empty() {
        bail!("--reference {name}: no stimulus rows under the header");
    }
    Ok(out)
}

#[derive(Serialize)]
struct Compared {
    stimulus: String,
    reference_n: u64,
    reference_mean: f64,
    direct_n: u64,
    direct_mean: f64,
    direct_ks_similarity: f64,
    direct_mean_difference: f64,
    ssr_expected: Option<f64>,
    ssr_ks_similarity: Option<f64>,
    ssr_mean_difference: Option<f64>,
}

#[derive(Serialize)]
struct CompareReport {
    run: String,
    reference: String,
    stimuli: Vec<Compared>,
    /// Reference stimuli the run never showed.
    missing: Vec<String>,
}

/// Runs `sim-cli compare-intent`.
pub fn compare(args: &CompareArgs) -> Result<()> {
    let reference = read_reference(&args.reference)?;
    let summary_path = if args.run.is_dir() { runs::RunDir::at(&args.run).summary() } else { args.run.clone() };
    let text = std::fs::read_to_string(&summary_path)
        .with_context(|| format!("{}: cannot read the run's summary", summary_path.display()))?;
    let summary: RunSummary =
        serde_json::from_str(&text).with_context(|| format!("{}: not a run summary", summary_path.display()))?;
    let mut stimuli = Vec::new();
    let mut missing = Vec::new();
    for (id, counts) in &reference {
        let Some(d) = summary.intent.get(id).filter(|d| d.n > 0) else {
            missing.push(id.clone());
            continue;
        };
        let want = pmf_of_counts(counts);
        let mean = |p: &[f64; POINTS]| engine::intent::expected(p);
        let reference_mean = mean(&want);
        let direct = pmf_of_counts(&d.first_five());
        stimuli.push(Compared {
            stimulus: id.clone(),
            reference_n: counts.iter().sum(),
            reference_mean,
            direct_n: d.n,
            direct_mean: d.mean,
            direct_ks_similarity: ks_similarity(&direct, &want),
            direct_mean_difference: d.mean - reference_mean,
            ssr_expected: d.ssr.as_ref().map(|s| s.expected),
            ssr_ks_similarity: d.ssr.as_ref().map(|s| ks_similarity(&s.pmf, &want)),
            ssr_mean_difference: d.ssr.as_ref().map(|s| s.expected - reference_mean),
        });
    }
    if stimuli.is_empty() {
        bail!(
            "--reference {}: none of its stimuli ({}) is in the run (which showed {})",
            args.reference.display(),
            missing.join(", "),
            summary.intent.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let report = CompareReport {
        run: summary_path.display().to_string(),
        reference: args.reference.display().to_string(),
        stimuli,
        missing,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("Purchase intent against {} (KS similarity: 1 = the same distribution):", report.reference);
    println!(
        "  {:<24} {:>6} {:>6}   {:>6} {:>6} {:>7}   {:>6} {:>7}",
        "stimulus", "ref n", "mean", "direct", "KS", "diff", "SSR", "KS"
    );
    for c in &report.stimuli {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
        println!(
            "  {:<24} {:>6} {:>6.2}   {:>6.2} {:>6.3} {:>+7.2}   {:>6} {:>7}",
            c.stimulus,
            c.reference_n,
            c.reference_mean,
            c.direct_mean,
            c.direct_ks_similarity,
            c.direct_mean_difference,
            c.ssr_expected.map_or("-".into(), |x| format!("{x:.2}")),
            opt(c.ssr_ks_similarity)
        );
    }
    if !report.missing.is_empty() {
        println!("  not in the run: {}", report.missing.join(", "));
    }
    Ok(())
}
