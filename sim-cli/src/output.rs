//! Run directories and what is printed.

use actors::coordinator::TickReport;
use anyhow::{bail, Context, Result};
use engine::config::Config;
use engine::report::RunSummary;
use engine::scenario::{Scenario, BUILTIN};
use engine::store::trace::{Header, Split, TraceWriter};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The first of `base`, `base-2`, `base-3`, ... that does not exist: the
/// default output directory of `run`, `experiment` and `field simulate`,
/// so that a second run never trips over the first.
pub fn fresh_dir(base: &str) -> PathBuf {
    let mut candidate = PathBuf::from(base);
    let mut k = 2;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{k}"));
        k += 1;
    }
    candidate
}

/// A run directory that this run owns.
pub struct OutputDir {
    path: PathBuf,
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).map(|mut d| d.next().is_none()).unwrap_or(false)
}

impl OutputDir {
    /// Creates the run directory: `out` if given (it must not exist or be
    /// empty), else the first free `runs/<scenario>-s<seed>-<N>x<T>[-k]`.
    pub fn create(out: Option<&Path>, scenario: &str, seed: u64, personas: u32, ticks: u32) -> Result<OutputDir> {
        let path = match out {
            Some(p) => {
                if p.join("trace.bin").exists() {
                    bail!(
                        "output directory {} already holds a run (trace.bin), and a run is never overwritten. If it was \
                         interrupted, continue it with `sim-cli run --resume {}`; otherwise choose another --out",
                        p.display(),
                        p.display()
                    );
                }
                if p.exists() && !(p.is_dir() && is_empty_dir(p)) {
                    bail!(
                        "output directory {} already exists and is not empty; a run is never overwritten. Choose another --out or remove it",
                        p.display()
                    );
                }
                p.to_path_buf()
            }
            None => fresh_dir(&format!("runs/{scenario}-s{seed}-{personas}x{ticks}")),
        };
        std::fs::create_dir_all(&path).with_context(|| format!("cannot create output directory {}", path.display()))?;
        let probe = path.join(".write-test");
        File::create(&probe).with_context(|| format!("output directory {} is not writable", path.display()))?;
        let _ = std::fs::remove_file(&probe);
        Ok(OutputDir { path })
    }

    /// A run directory that already exists (for resume).
    pub fn existing(path: &Path) -> OutputDir {
        OutputDir { path: path.to_path_buf() }
    }

    /// Creates `trace.bin` with its header (and a shard's or a merge's
    /// split record, in the same write).
    pub fn create_trace(&self, header: &Header, split: Option<&Split>) -> Result<TraceWriter> {
        Ok(TraceWriter::create_split(&self.path.join("trace.bin"), header, split)?)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the resolved configuration as `config.toml`.
    pub fn write_config(&self, config: &Config) -> Result<()> {
        let p = self.path.join("config.toml");
        let text = format!("# Resolved configuration of this run; hash {}\n{}", config.hash(), config.to_toml());
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    }

    /// Writes `summary.json`, atomically: a run killed as it writes it
    /// leaves the old file or none, never a part.
    pub fn write_summary(&self, summary: &RunSummary) -> Result<()> {
        let p = self.path.join("summary.json");
        let text = serde_json::to_string_pretty(summary).context("cannot encode the summary")?;
        Ok(engine::store::frame::write_atomic(&p, (text + "\n").as_bytes())?)
    }

    /// Opens `outcomes.jsonl`, one JSON outcome per line, written per tick,
    /// when `write` is set; otherwise a writer that writes nothing.
    pub fn outcome_writer(&self, write: bool) -> Result<OutcomeWriter> {
        if !write {
            return Ok(OutcomeWriter(None));
        }
        let path = self.path.join(OUTCOMES_FILE);
        let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(OutcomeWriter(Some((path, BufWriter::new(file)))))
    }
}

/// The most persona-turns for which `--outcomes auto` writes `outcomes.jsonl`.
pub const AUTO_OUTCOMES_MAX_TURNS: u64 = 10_000;

/// The outcomes file of a run directory.
pub const OUTCOMES_FILE: &str = "outcomes.jsonl";

/// Streams outcomes to `outcomes.jsonl`, or nowhere.
pub struct OutcomeWriter(Option<(PathBuf, BufWriter<File>)>);

impl OutcomeWriter {
    /// Appends one tick's outcomes and flushes.
    pub fn write_tick(&mut self, report: &TickReport) -> engine::Result<()> {
        let Some((path, file)) = &mut self.0 else { return Ok(()) };
        let err = |e: std::io::Error| engine::Error::Io { file: path.display().to_string(), source: e };
        for o in &report.outcomes {
            serde_json::to_writer(&mut *file, o).map_err(|e| err(e.into()))?;
            file.write_all(b"\n").map_err(err)?;
        }
        file.flush().map_err(err)
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn bar(count: u64, max: u64, width: usize) -> String {
    let n = if max == 0 { 0 } else { ((count as f64 / max as f64) * width as f64).round() as usize };
    "#".repeat(n)
}

/// Prints the readable summary.
pub fn print_summary(s: &RunSummary) {
    println!("Run of {} personas x {} ticks, scenario {:?}, seed {}", s.personas, s.ticks, s.scenario, s.seed);
    if let Some(stop) = &s.stopped {
        match stop.reason {
            engine::report::StopReason::Budget => println!(
                "STOPPED after tick {} of {}: budget reached (spent {} of {} nano-USD)",
                stop.after_tick,
                s.ticks,
                thousands(stop.spent_nano_usd),
                thousands(stop.budget_nano_usd)
            ),
            engine::report::StopReason::PermanentErrors | engine::report::StopReason::Interrupted => {
                println!("STOPPED after tick {} of {}: {} ({})", stop.after_tick, s.ticks, stop.reason, stop.detail)
            }
        }
    }
    let j = &s.jobs;
    println!("\nJobs: {} total, {} ok, {} failed, {} refused", j.total, j.ok, j.failed, j.refused);
    print_intent(s);
    if !s.probes.is_empty() {
        println!("\nProbes (counts of each answer, from 1):");
        for (id, d) in &s.probes {
            let h: Vec<String> = d.histogram.iter().map(|c| format!("{c:>5}")).collect();
            println!("  {:<24} {:>6} {:>5.2}   {}  unparsed {}", id, d.n, d.mean, h.join(" "), d.unparsed);
        }
    }
    let e = &s.embedding;
    println!(
        "\nEmbedding ({:?}): {} port invocations ({} retrieval, {} memory), {} upstream requests,\n  {} texts requested, {} unique texts submitted, {} cache hits",
        e.strategy, e.port_invocations, e.retrieval_port_invocations, e.memory_port_invocations, e.upstream_requests,
        thousands(e.texts_requested), thousands(e.unique_texts_submitted), e.cache_hits
    );
    let c = &s.chat;
    println!(
        "Chat: {} requests, {} guardrail retries, {} failed, {} reflections ({} fallbacks)",
        thousands(c.requests),
        c.guardrail_retries,
        c.failures,
        c.reflections,
        c.reflection_fallbacks
    );
    if c.attempts > 0 {
        println!("  transport: {} attempts, {} retries", thousands(c.attempts), thousands(c.retries));
    }
    if c.estimated_usage > 0 {
        println!(
            "  {} requests billed from estimated tokens (scripted models, or no usage reported)",
            thousands(c.estimated_usage)
        );
    }
    for e in &c.endpoints {
        println!("  {}: {} requests, {} failed", e.url, thousands(e.requests), thousands(e.failures));
    }
    let m = &s.consolidation;
    println!(
        "Memory consolidation: {} promoted, {} expired, {} promotions blocked by the batch size, {} queued at the session end, {} cluster links",
        m.promoted, m.expired, m.blocked, m.queued, m.clustered
    );
    let t = &s.tokens;
    let cached = match t.chat_input_cached {
        0 => String::new(),
        n => {
            format!(" ({} of them from the provider's prompt cache, {:.1}%)", thousands(n), 100.0 * s.chat.cached_share)
        }
    };
    println!(
        "Tokens: {} chat in{cached}, {} chat out, {} embedding, {} total",
        thousands(t.chat_input),
        thousands(t.chat_output),
        thousands(t.embedding),
        thousands(t.total)
    );
    let k = &s.cost;
    println!(
        "Cost: ${:.6} provider total ({} nano-USD; chat {}, embedding {}); allocated to jobs {} nano-USD\n  {}; chat price {}, embedding price {}; per-job embedding shares are estimates{}",
        k.provider_total_usd, thousands(k.provider_total_nano_usd), thousands(k.chat_nano_usd),
        thousands(k.embedding_nano_usd), thousands(k.allocated_total_nano_usd), k.price_label,
        k.chat_price_label, k.embedding_price_label,
        if t.chat_input_cached > 0 { format!("\n  cached chat input is billed at {}", k.chat_cached_input_price) } else { String::new() }
    );
    let m = &s.timings_ms;
    println!(
        "Timings: total {:.0} ms; preparation {:.0} ms, chat {:.0} ms, memory finalisation {:.0} ms",
        m.total, m.preparation, m.chat, m.memory_finalisation
    );
    println!("\nDigest:      {}\nFull digest: {}\nWritten to:  {}", s.digest, s.full_digest, s.out_dir);
    if !s.out_dir.is_empty() {
        println!(
            "Next:        sim-cli report {0} (an HTML page of the run), sim-cli inspect {0}, sim-cli replay {0}",
            s.out_dir
        );
        if !Path::new(&s.out_dir).join(OUTCOMES_FILE).exists() {
            println!(
                "             {OUTCOMES_FILE} was not written (over {} persona-turns, or --outcomes never): \
                 sim-cli export outcomes {} --out {OUTCOMES_FILE} writes it from the trace",
                thousands(AUTO_OUTCOMES_MAX_TURNS),
                s.out_dir
            );
        }
    }
}

fn bar_row(h: &[u64; 5]) -> String {
    let max = h.iter().copied().max().unwrap_or(0);
    h.iter().map(|c| format!("{:<6}", bar(*c, max, 5))).collect::<Vec<_>>().join("").trim_end().to_string()
}

/// Prints the built-in scenarios.
pub fn list_scenarios() {
    for (name, _) in BUILTIN {
        if let Some(s) = Scenario::builtin(name) {
            println!("{name:<18} {} ({} stimuli, {} ticks)", s.description, s.stimuli.len(), s.ticks.len());
        }
    }
}

/// SSR beside direct rating, per stimulus, when the run measured it.
fn print_ssr(s: &RunSummary) {
    if s.intent.values().all(|d| d.ssr.is_none()) {
        return;
    }
    println!("\nPurchase intent by semantic similarity rating (SSR; mean pmf over respondents) beside direct:");
    println!(
        "  {:<24} {:>6} {:>6} {:>13}   {:>5} {:>5} {:>5} {:>5} {:>5}  {:>6}",
        "stimulus", "n", "SSR", "95% interval", "1", "2", "3", "4", "5", "KS sim"
    );
    for (id, d) in &s.intent {
        let Some(m) = &d.ssr else { continue };
        let direct = engine::intent::pmf_of_counts(&d.histogram);
        let pct = |p: &[f64; 5]| p.map(|x| format!("{:>4.0}%", 100.0 * x));
        let (sp, dp) = (pct(&m.pmf), pct(&direct));
        let ks = m.ks_similarity_to_direct.map_or("-".into(), |k| format!("{k:.3}"));
        let ci = format!("{:.2}-{:.2}", m.expected_ci95[0], m.expected_ci95[1]);
        println!("  {:<24} {:>6} {:>6.2} {:>13}   {}  {:>6}", id, m.n, m.expected, ci, sp.join(" "), ks);
        println!("  {:<24} {:>6} {:>6.2} {:>13}   {}  (direct)", "", d.n, d.mean, "", dp.join(" "));
    }
    println!(
        "  SSR cost on top of direct rating: {} nano-USD, {} embedding tokens (reaction texts and anchor statements)",
        thousands(s.cost.ssr_nano_usd),
        thousands(s.tokens.ssr_embedding)
    );
}

/// Purchase intent per stimulus (direct, and SSR beside it when measured),
/// then the run's notes.
fn print_intent(s: &RunSummary) {
    println!("\nPurchase intent (1-5) per stimulus:");
    println!("  {:<24} {:>6} {:>5}   {:>5} {:>5} {:>5} {:>5} {:>5}", "stimulus", "n", "mean", "1", "2", "3", "4", "5");
    for (id, d) in &s.intent {
        let h = d.histogram;
        println!(
            "  {:<24} {:>6} {:>5.2}   {:>5} {:>5} {:>5} {:>5} {:>5}  {}",
            id,
            d.n,
            d.mean,
            h[0],
            h[1],
            h[2],
            h[3],
            h[4],
            bar_row(&h)
        );
    }
    print_ssr(s);
    for note in &s.notes {
        println!("\nNote: {note}");
    }
}
