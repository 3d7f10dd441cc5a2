//! What is printed: summaries and the scenario list.

use engine::scenario::{Scenario, BUILTIN};
use engine::summary::RunSummary;
use runs::dir::{AUTO_OUTCOMES_MAX_TURNS, OUTCOMES};
use std::path::Path;

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
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

/// The consolidation line: what the automatic pass did (or, in a dry run,
/// would have done), or that none ran.
fn print_consolidation(m: &engine::summary::ConsolidationTotals) {
    if m.automatic || m.dry_run {
        let (what, would) = if m.dry_run { (" (dry run: nothing changed)", "would be ") } else { ("", "") };
        println!(
            "Memory consolidation{what}: {} {would}promoted, {} {would}expired, {} promotions blocked by the batch size, {} queued at the session end, {} cluster links",
            m.promoted, m.expired, m.blocked, m.queued, m.clustered
        );
    } else {
        println!("Memory consolidation: not run during the run (off by default); `sim-cli memory consolidate DIR` runs a pass");
    }
}

/// Prints the readable summary.
pub fn print_summary(s: &RunSummary) {
    println!("Run of {} personas x {} ticks, scenario {:?}, seed {}", s.personas, s.ticks, s.scenario, s.seed);
    if let Some(stop) = &s.stopped {
        match stop.reason {
            engine::summary::StopReason::Budget => println!(
                "STOPPED after tick {} of {}: budget reached (spent {} of {} nano-USD)",
                stop.after_tick,
                s.ticks,
                thousands(stop.spent_nano_usd),
                thousands(stop.budget_nano_usd)
            ),
            engine::summary::StopReason::PermanentErrors | engine::summary::StopReason::Interrupted => {
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
    print_consolidation(&s.consolidation);
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
    let cache = s.chat.response_cache.as_ref().map(engine::chat::CacheReport::line);
    let estimate = s.estimate.as_ref().map(|e| e.against(k.chat_nano_usd, t.chat_input + t.chat_output));
    for line in [cache, estimate].into_iter().flatten() {
        println!("  {line}");
    }
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
        if !Path::new(&s.out_dir).join(OUTCOMES).exists() {
            println!(
                "             {OUTCOMES} was not written (over {} persona-turns, or --outcomes never): \
                 sim-cli export outcomes {} --out {OUTCOMES} writes it from the trace",
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
        let direct = engine::intent::pmf_of_counts(&d.first_five());
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
        let h = d.first_five();
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
