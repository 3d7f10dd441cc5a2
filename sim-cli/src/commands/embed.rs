//! `sim-cli embed`: look at what an embedding provider makes of texts.
//! `embed text` prints vectors and pairwise cosines; `embed check` is the
//! sanity check of plan `000_*` (risk 5): paraphrases score high, unrelated
//! pairs low.

use crate::prelude::{embed_texts, load_embedding_config, run_check, similarity};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use engine::embed::check::{cosine, CheckReport, Similarity};
use serde::Serialize;
use std::path::PathBuf;

/// Embedding inspection.
#[derive(Debug, Subcommand)]
pub enum EmbedCommand {
    /// Print each text's vector and the pairwise cosine similarities.
    Text(TextArgs),
    /// Check that paraphrases score high and unrelated pairs low; exits 1 when a neural or hosted embedder fails.
    Check(CheckArgs),
}

/// Options of `sim-cli embed text`.
#[derive(Debug, Args)]
#[command(after_help = "Embeds the texts through the configured provider (the local hash embedder without\n\
    --config), through the same inference client as a run: batching, retries, cost. Example:\n\n  \
    sim-cli embed text \"a red shoe\" \"a crimson sneaker\" --config fixtures/configs/minilm.toml\n\n\
    The human output shows each vector's first 8 components and its norm; --json gives\n\
    {\"model\", \"dim\", \"vectors\": [[...]], \"cosines\": [[...]]} with every component.")]
pub struct TextArgs {
    /// The texts (at least one).
    #[arg(required = true)]
    pub texts: Vec<String>,
    /// A config file whose `[embedding]` section names the provider.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Async worker threads (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `sim-cli embed check`.
#[derive(Debug, Args)]
#[command(after_help = "Embeds 6 paraphrase pairs (few shared words) and 5 unrelated pairs. A paraphrase\n\
    must score at least 0.45, an unrelated pair at most 0.25. A neural or hosted embedder that\n\
    misses exits 1 and names the failing pairs. The local hash embedder is lexical by design:\n\
    it is reported as lexical and exits 0. `sim-cli experiment` runs this check first.")]
pub struct CheckArgs {
    /// A config file whose `[embedding]` section names the provider.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs an `embed` subcommand.
pub fn embed(cmd: EmbedCommand) -> Result<()> {
    match cmd {
        EmbedCommand::Text(args) => text(&args),
        EmbedCommand::Check(args) => {
            let cfg = load_embedding_config(args.config.as_ref())?;
            let report = run_check(&cfg)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_check(&report);
            }
            if report.refuses() {
                bail!("embed check: {}", report.verdict);
            }
            Ok(())
        }
    }
}

fn print_check(r: &CheckReport) {
    let kind = match r.similarity {
        Similarity::Lexical => "lexical",
        Similarity::Semantic => "semantic",
    };
    println!("Embedding check: {} ({kind})", r.model);
    for p in &r.pairs {
        let mark = if p.pass { "ok  " } else { "MISS" };
        println!("  {mark} {:<10} {:>6.3}  {:?} / {:?}", p.kind, p.cosine, p.a, p.b);
    }
    println!("{}", r.verdict);
}

#[derive(Serialize)]
struct TextReport<'a> {
    model: &'a str,
    dim: usize,
    texts: &'a [String],
    vectors: Vec<&'a [f32]>,
    cosines: Vec<Vec<f64>>,
}

fn text(args: &TextArgs) -> Result<()> {
    let cfg = load_embedding_config(args.config.as_ref())?;
    let vectors = embed_texts(&cfg, &args.texts, args.threads)?;
    let cosines: Vec<Vec<f64>> = vectors.iter().map(|a| vectors.iter().map(|b| cosine(a, b)).collect()).collect();
    let e = &cfg.raw.embedding;
    if args.json {
        let vectors = vectors.iter().map(|v| &v[..]).collect();
        let report = TextReport { model: &e.model, dim: e.dim, texts: &args.texts, vectors, cosines };
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let kind = match similarity(&cfg) {
        Similarity::Lexical => "lexical",
        Similarity::Semantic => "semantic",
    };
    println!("Model: {} ({} dimensions, {kind} similarity)", e.model, e.dim);
    for (i, (t, v)) in args.texts.iter().zip(&vectors).enumerate() {
        let head: Vec<String> = v.iter().take(8).map(|x| format!("{x:+.4}")).collect();
        let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        println!("  [{i}] {t:?}\n      [{} ...] norm {norm:.4}", head.join(", "));
    }
    if vectors.len() > 1 {
        println!("Cosine similarities:");
        for (i, row) in cosines.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(|c| format!("{c:>7.4}")).collect();
            println!("  [{i}] {}", cells.join(" "));
        }
    }
    Ok(())
}
