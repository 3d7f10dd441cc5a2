//! `sim-cli bench gguf`: the forward pass of a local GGUF model alone, as
//! llama.cpp's `llama-bench` measures it: a prompt of N tokens in one pass
//! (`pp`), then N tokens generated one pass each (`tg`), and the same
//! generation with several sequences sharing each pass. The tokens are
//! seeded pseudo-random ids, as `llama-bench` feeds; no tokenizer, grammar
//! or sampling runs, so the figures are the kernels' and comparable with
//! `llama-bench`'s on the same file and threads (`scripts/bench-llamacpp`
//! runs both side by side).

use crate::prelude::load_config;
use anyhow::{bail, Context, Result};
use clap::Args;
use engine::config::ChatProvider;
use engine::rng::Stream;
use providers::chat::gguf::transformer::{Sequence, Step, Transformer};
use serde::Serialize;
use std::time::Instant;

/// Options of `sim-cli bench gguf`.
#[derive(Debug, Args)]
#[command(after_help = "Measures the model's forward pass alone, as llama.cpp's llama-bench does: pp (a prompt of\n\
    --prompt tokens in one pass), tg (--generate tokens, one pass each) and tg with --batch sequences\n\
    sharing each pass (their aggregate tokens per second). Each figure is the median of --reps\n\
    repetitions. The tokens are seeded random ids: no tokenizer, grammar or sampling runs.\n\n\
    --depth N starts every test from sequences that already hold N tokens (run first, not timed),\n\
    as llama-bench's -d does: each token then attends to N more positions, as in a panel, whose\n\
    prompts are about 450 tokens. The tests are then named pp512 @ d450 and so on.\n\n\
    Examples:\n  sim-cli bench gguf --config fixtures/configs/smollm2.toml --threads 2\n  \
    sim-cli bench gguf --config fixtures/configs/smollm2.toml --depth 450 --batch 8")]
pub struct GgufBenchArgs {
    /// A local-model config (`[chat] provider = "gguf"`, e.g. fixtures/configs/smollm2.toml).
    #[arg(long, value_name = "FILE")]
    pub config: std::path::PathBuf,
    /// Prompt tokens in the pp test.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub prompt: u32,
    /// Tokens generated in the tg tests.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub generate: u32,
    /// Tokens each sequence holds before a test starts (run first, not timed): the context its
    /// tokens attend to.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=65536))]
    pub depth: u32,
    /// Sequences sharing each pass in the batched tg tests (1 is the single stream, always measured).
    #[arg(long, value_delimiter = ',', default_value = "8")]
    pub batch: Vec<u32>,
    /// Repetitions of each test; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Threads of the kernels' pool. Default: one per core.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// One test's result.
#[derive(Debug, Serialize)]
struct Test {
    /// `pp512`, `tg128`, `tg128 x8`; with ` @ d450` at a depth of 450.
    name: String,
    /// Sequences in each pass.
    sequences: u32,
    /// Tokens per repetition, over all sequences.
    tokens: u64,
    /// Median milliseconds per repetition.
    ms: f64,
    /// Tokens per second at the median.
    tokens_per_second: f64,
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct Report {
    model: String,
    model_file: String,
    kernel: String,
    threads: usize,
    reps: u32,
    /// Tokens every sequence held before each test.
    depth: u32,
    tests: Vec<Test>,
}

fn tokens(seed: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut s = Stream::from_key(engine::digest::DigestWriter::new("bench gguf tokens").u64(seed).finish().0);
    (0..n).map(|_| s.below(vocab) as u32).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A sequence holding `depth` seeded tokens (none for 0), run untimed.
fn at_depth(model: &Transformer, depth: usize, vocab: usize) -> Result<Sequence> {
    let mut seq = model.sequence();
    if depth > 0 {
        model.forward_one(&mut seq, &tokens(11, depth, vocab)).context("the tokens before the test")?;
    }
    Ok(seq)
}

/// `generate` passes of one token for each of `sequences` sequences that
/// already hold `base`'s tokens and one more; returns the milliseconds.
fn generate(model: &Transformer, base: &Sequence, sequences: usize, generate: usize, vocab: usize) -> Result<f64> {
    let mut seqs: Vec<Sequence> = (0..sequences).map(|_| base.clone()).collect();
    let ids = tokens(7, sequences * (generate + 1), vocab);
    for (i, seq) in seqs.iter_mut().enumerate() {
        seq.reserve(generate + 1, model.hp.kv_width());
        model.forward_one(seq, &ids[i..=i]).context("the first token")?;
    }
    let started = Instant::now();
    for t in 1..=generate {
        let mut steps: Vec<Step<'_>> = seqs
            .iter_mut()
            .enumerate()
            .map(|(i, seq)| Step { seq, tokens: &ids[t * sequences + i..=t * sequences + i], logits: true })
            .collect();
        model.forward(&mut steps).context("a generation pass")?;
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

fn test(name: String, sequences: u32, tokens: u64, times: Vec<f64>) -> Test {
    let ms = median(times);
    Test { name, sequences, tokens, ms, tokens_per_second: tokens as f64 / (ms / 1000.0).max(1e-9) }
}

fn measure(args: &GgufBenchArgs, model: &Transformer, vocab: usize) -> Result<Vec<Test>> {
    let (p, g, depth) = (args.prompt as usize, args.generate as usize, args.depth as usize);
    let at = if depth > 0 { format!(" @ d{depth}") } else { String::new() };
    let prompt = tokens(3, p, vocab);
    let base = at_depth(model, depth, vocab)?;
    let mut out = Vec::new();
    let mut times = Vec::new();
    // One pass unmeasured first: the pages of the weights are touched.
    model.forward_one(&mut model.sequence(), &prompt[..p.min(16)]).context("a warm-up pass")?;
    for _ in 0..args.reps {
        let mut seq = base.clone();
        seq.reserve(p, model.hp.kv_width());
        let started = Instant::now();
        model.forward_one(&mut seq, &prompt).context("the prompt pass")?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    out.push(test(format!("pp{p}{at}"), 1, p as u64, times));
    let mut batches = vec![1u32];
    batches.extend(args.batch.iter().copied().filter(|b| *b > 1));
    for b in batches {
        let times =
            (0..args.reps).map(|_| generate(model, &base, b as usize, g, vocab)).collect::<Result<Vec<f64>>>()?;
        let name = if b == 1 { format!("tg{g}{at}") } else { format!("tg{g} x{b}{at}") };
        out.push(test(name, b, (g * b as usize) as u64, times));
    }
    Ok(out)
}

/// Runs `sim-cli bench gguf`.
pub fn bench_gguf(args: &GgufBenchArgs) -> Result<()> {
    let config = load_config(Some(&args.config))?;
    if config.raw.chat.provider != ChatProvider::Gguf {
        bail!("--config {}: bench gguf measures a local model (chat.provider = \"gguf\")", args.config.display());
    }
    if let Some(b) = args.batch.iter().find(|b| **b == 0 || **b > 256) {
        bail!("--batch {b}: sequences per pass are 1 to 256");
    }
    let settings = &config.raw.chat.gguf;
    let model = providers::chat::gguf::load_configured(settings)?;
    let context = model.transformer().hp.context;
    let longest = args.depth as usize + (args.prompt as usize).max(args.generate as usize + 1);
    if longest > context {
        bail!(
            "--depth {} with --prompt {} and --generate {}: a sequence would hold {longest} tokens, past {}'s context of {context}",
            args.depth,
            args.prompt,
            args.generate,
            args.config.display()
        );
    }
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(n) = args.threads {
        pool = pool.num_threads(n as usize);
    }
    let pool = pool.build().context("cannot start the kernels' thread pool")?;
    let vocab = model.vocab().size;
    eprintln!(
        "bench gguf: {} ({} kernels, {} threads): pp{}, tg{} at 1{} sequences, {} reps{}",
        model.name(),
        model.level().name(),
        pool.current_num_threads(),
        args.prompt,
        args.generate,
        args.batch.iter().map(|b| format!(", {b}")).collect::<String>(),
        args.reps,
        if args.depth > 0 { format!(", after {} tokens", args.depth) } else { String::new() }
    );
    let tests = pool.install(|| measure(args, model.transformer(), vocab))?;
    let report = Report {
        model: model.name().to_string(),
        model_file: settings.model_file.clone(),
        kernel: model.level().name().to_string(),
        threads: pool.current_num_threads(),
        reps: args.reps,
        depth: args.depth,
        tests,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} on the CPU ({} kernels, {} threads), median of {} reps\n",
        report.model, report.kernel, report.threads, report.reps
    );
    println!("  {:<20} {:>10} {:>10} {:>12}", "test", "tokens", "ms", "tokens/s");
    for t in &report.tests {
        println!("  {:<20} {:>10} {:>10.1} {:>12.1}", t.name, t.tokens, t.ms, t.tokens_per_second);
    }
    Ok(())
}
