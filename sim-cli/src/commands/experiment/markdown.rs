//! `report.md` and the summary printed at the end: the recommendation,
//! the criteria, costs, task accuracy, the method and the lambda sweep.

use super::EmbedderSummary;
use ::experiment::summary::{Condition, RunRecord, Summary};
use ::experiment::Topic;
use agents::experiment::ExperimentSpec;

/// USD from nano-USD, for reading.
fn usd(nano: f64) -> String {
    format!("${:.6}", nano / 1e9)
}

/// The cost table of `report.md`.
fn cost_md(s: &Summary) -> String {
    let Some(c) = &s.cost else { return String::new() };
    let mut t = format!(
        "\n## Cost\n\nPrices: chat {}, embedding {} (`nominal`: a placeholder hosted price, what the missions would cost \
         there; `configured`: the config's price table; `local`: nothing billed).\n\n\
         | condition | missions | chat | embedding | total | per mission | field patterns | vector bytes |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        c.chat_price, c.embedding_price
    );
    for (name, k) in &c.per_condition {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        t.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
            k.runs,
            usd(k.chat_nano_usd as f64),
            usd(k.embedding_nano_usd as f64),
            usd(k.total_nano_usd as f64),
            usd(k.mean_nano_usd),
            opt(k.mean_field_patterns),
            opt(k.mean_field_vector_bytes)
        ));
    }
    t.push_str(&format!(
        "\nCost ratio, field / message passing, per mission: {:.3}. Every mission of the experiment (the lambda sweep included): {}.\n",
        c.ratio,
        usd(c.all_missions_nano_usd as f64)
    ));
    t
}

/// One line on task accuracy, for the summary.
fn accuracy_line(s: &Summary) -> String {
    let Some(t) = &s.task_accuracy else { return String::new() };
    format!(
        "Task accuracy (judge `{}`{}): field {:.2}, message passing {:.2} of 5 (exact Wilcoxon p = {:.4}, {} pairs).\n",
        t.judge,
        if t.scripted { ", the scripted rubric scorer, not a language model" } else { "" },
        t.means.get("field").copied().unwrap_or(f64::NAN),
        t.means.get("message_passing").copied().unwrap_or(f64::NAN),
        t.wilcoxon.p_value,
        t.judged_pairs
    )
}

/// The task-accuracy section of `report.md`: per condition and per run.
fn accuracy_md(s: &Summary, records: &[RunRecord], main_lambda: f64) -> String {
    if s.task_accuracy.is_none() {
        return String::new();
    }
    let mut t = format!(
        "\n## Task accuracy (LLM-as-judge, rubric 1-5)\n\n{}\n| topic | rep | condition | score | justification |\n|---|---:|---|---:|---|\n",
        accuracy_line(s)
    );
    let main = |r: &&RunRecord| r.lambda.is_none_or(|l| (l - main_lambda).abs() < 1e-12);
    for r in records.iter().filter(main) {
        let (score, why) = r
            .task_accuracy
            .as_ref()
            .map_or(("-".to_string(), "the judge gave no score"), |j| (j.score.to_string(), j.justification.as_str()));
        t.push_str(&format!(
            "| {} | {} | {} | {score} | {} |\n",
            r.topic,
            r.rep,
            r.condition.name(),
            why.replace('|', "/")
        ));
    }
    t
}

/// The recommendation as the first lines of a report.
pub fn recommendation_md(s: &Summary) -> String {
    match &s.recommendation {
        Some(r) => format!(
            "**Recommendation: {}** (verdict: {}). The rule that fired: {}.\n",
            r.action.replace('_', " "),
            r.verdict.name(),
            r.rule
        ),
        None => String::new(),
    }
}

/// The pre-registered analysis, as a list (printed before the results).
pub fn analysis_md(s: &Summary) -> String {
    let mut t = String::from(
        "Pre-registered analysis (fixed before any run):
",
    );
    for line in &s.analysis {
        t.push_str(&format!("- {line}\n"));
    }
    t.push('\n');
    t
}

pub fn criteria_table(s: &Summary) -> String {
    let mut t = analysis_md(s);
    t.push_str(
        "| criterion | threshold | value | difference tested per topic | one-sided p | source | counted | result | why |\n|---|---:|---:|---|---:|---|---|---|---|\n",
    );
    for c in &s.criteria {
        t.push_str(&format!(
            "| {} | {} | {:.3} | {} | {} | {} | {} | {} | {} |\n",
            c.name,
            c.threshold,
            c.value,
            c.difference.as_deref().unwrap_or("- (a bound)"),
            c.one_sided.as_ref().map_or("-".to_string(), |o| format!("{:.4}", o.p_value)),
            c.source,
            if c.counted { "yes" } else { "no" },
            c.verdict.name(),
            c.reason()
        ));
    }
    t.push_str(&format!(
        "\nOverall: {} (lambda {}, {} topics, {} field/message-passing missions paired; the minimum design is {} topics).\n",
        s.verdict.name(),
        s.lambda,
        s.topics,
        s.pairs,
        ::experiment::summary::MIN_TOPICS,
    ));
    t.push_str(&comparisons_md(s));
    t.push_str(&monitor_md(&s.field_monitor, None));

    t.push_str(&recommendation_md(s));
    let (f, m) = (s.means.get("field"), s.means.get("message_passing"));
    if let (Some(f), Some(m)) = (f, m) {
        if let (Some(fs), Some(ms)) = (f.retention_semantic, m.retention_semantic) {
            t.push_str(&format!(
                "Retention by key phrase: field {:.3}, message passing {:.3}; by key phrase or meaning (a report sentence \
                 within cosine {} of the finding's): field {fs:.3}, message passing {ms:.3}. The retention criterion uses \
                 the second (source `semantic`): live prose paraphrases.\n",
                f.retention,
                m.retention,
                ::experiment::metrics::SEMANTIC_THRESHOLD
            ));
        }
    }
    t.push_str(&accuracy_line(s));
    if let Some(c) = &s.cost {
        t.push_str(&format!(
            "Cost per mission: field {}, message passing {} (ratio {:.3}; chat price {}, embedding price {}).\n",
            usd(c.per_condition.get("field").map_or(0.0, |k| k.mean_nano_usd)),
            usd(c.per_condition.get("message_passing").map_or(0.0, |k| k.mean_nano_usd)),
            c.ratio,
            c.chat_price,
            c.embedding_price
        ));
    }
    if let (Some(pick), true) = (&s.lambda_pick, s.lambda_sweep.len() > 1) {
        t.push_str(&format!("The lambda sweep picks {} ({}).\n", pick.chosen, pick.rule));
        if let Some(l) = pick.calibrated.as_ref().and_then(|c| c.lambda) {
            t.push_str(&format!("Calibrated from pattern lifetimes: lambda {l:.3} (see report.md).\n"));
        }
    }
    t
}

/// The three arms compared on retention, and the token ratios.
fn comparisons_md(s: &Summary) -> String {
    let mut t = String::new();
    for (name, c) in &s.comparisons {
        t.push_str(&format!(
            "{}: retention ratio {:.3}; d = {}, median {:.3}, one-sided p = {:.4} ({} topics, {} ties).\n",
            name.replace('_', " "),
            c.retention_ratio,
            c.difference,
            c.one_sided.median_difference,
            c.one_sided.p_value,
            c.one_sided.n,
            c.one_sided.zeros
        ));
    }
    for (arm, r) in &s.token_ratios {
        t.push_str(&format!(
            "Tokens, {arm} / message passing (text only, no embeddings): chat only {:.3}, total {:.3}.\n",
            r.chat_only, r.total
        ));
    }
    t
}

/// Around the recommendation at the top of `report.md`, so that
/// `experiment rate` can restate it.
pub const RECOMMENDATION_START: &str = "<!-- recommendation -->\n";
/// See [`RECOMMENDATION_START`].
pub const RECOMMENDATION_END: &str = "<!-- /recommendation -->\n";

pub fn report_md(
    spec: &ExperimentSpec,
    embedder: &EmbedderSummary,
    topics: &[Topic],
    s: &Summary,
    records: &[RunRecord],
    main_lambda: f64,
) -> String {
    let b = &spec.budgets;
    let mut r = String::new();
    r.push_str("# Shared field versus message passing\n\n");
    r.push_str(RECOMMENDATION_START);
    r.push_str(&recommendation_md(s));
    r.push_str(RECOMMENDATION_END);
    r.push('\n');
    if spec.chat.is_some() {
        r.push_str(&format!(
            "**Which model wrote the agents' text:** the live model `{}`, through the configured OpenAI-compatible endpoint \
             (live: true), the same model for every role. Latency is measured: wall clock from each mission's start to its final output, \
             missions one at a time; the modelled figure is kept beside it in results.json.\n\n",
            spec.model
        ));
    } else {
        r.push_str(&format!(
            "**Which model wrote the agents' text:** the embedded scripted agent model `{}` (deterministic, seeded per repetition). \
             No live language model was called. Its behaviour: the researcher extracts sentences from each source, the analyst condenses what it can \
             see into points of at most {} words, the writer writes the report from what it can see; each picks points by salience (figures, length, \
             seeded noise) within its output budget.\n\n",
            spec.model,
            ::experiment::model::ANALYST_WORDS
        ));
    }
    r.push_str("## Method\n\n");
    r.push_str(&format!(
        "- {} topics x {} repetitions; each (topic, repetition) runs message passing, the plain store and the field (lambda {}) with the same seed. The topic is the unit: its repetitions are averaged before the tests ({} topics).\n",
        topics.len(), spec.reps, main_lambda, s.topics
    ));
    r.push_str("- Agents act in phases, one simulated hour per iteration: the researcher reads one source per iteration, the analyst synthesises from the second iteration on, the writer writes at the end.\n");
    r.push_str("- Field: every agent injects into and queries one shared field (exact top-k by decayed, boosted, resonance-amplified score). Store: the same index and retrieval with no decay, no reinforcement and no resonance. Message passing: text only, with no vectors; the researcher's findings go to the analyst's inbox, the analyst's points to the writer's; an inbox is read newest first and merged by key.\n");
    r.push_str(&format!(
        "- Identical in every arm: model, question, k = {}, budgets (researcher output {}, analyst context {} / output {}, writer context {} / output {} tokens), latency model. The field and the store embed with {} (dim {}); message passing embeds nothing.\n",
        b.k, b.researcher_output, b.analyst_context, b.analyst_output, b.writer_context, b.writer_output, embedder.model, spec.dim
    ));
    r.push_str(&match (&embedder.check, embedder.similarity) {
        (Some(verdict), engine::embed::check::Similarity::Lexical) => format!(
            "- Embedder check (`sim-cli embed check`): {verdict}. Field and store queries therefore match on shared words, not meaning.\n"
        ),
        (Some(verdict), engine::embed::check::Similarity::Semantic) => format!("- Embedder check (`sim-cli embed check`): {verdict}.\n"),
        (None, _) => "- Embedder check: skipped (--skip-embed-check); the embedder's similarities were not checked.\n".to_string(),
    });
    r.push_str("- Metrics: retention = gold findings whose key phrases all appear in the report / all gold findings; quality = 1 + 4 x importance-weighted coverage (1-5); tokens = chat input + output + embedding input; latency = measured wall clock for live agents, else modelled (400 ms per call, 0.05 ms per prompt token, 10 ms per completion token, 30 ms + 0.01 ms/token per embedding call; concurrent agents overlap); cross-agent resonance = field patterns accessed by more than one agent; stability and its convergence phase (> 0.75).\n");
    r.push_str("- Statistics: the pre-registered analysis below (topic-level, one-sided exact Wilcoxon signed-rank, Pratt's ties).\n\n");
    r.push_str("## Pass / fail\n\n");
    r.push_str(&criteria_table(s));
    r.push_str(&cost_md(s));
    r.push_str(&accuracy_md(s, records, main_lambda));
    r.push_str("\n## Means\n\n| condition | runs | retention | quality | tokens | latency ms |\n|---|---:|---:|---:|---:|---:|\n");
    for (c, m) in &s.means {
        r.push_str(&format!(
            "| {c} | {} | {:.3} | {:.2} | {:.0} | {:.0} |\n",
            m.runs, m.retention, m.quality, m.tokens, m.latency_ms
        ));
    }
    r.push_str("\n## Per topic\n\n| topic | condition | retention | quality | tokens | latency ms | cross-agent resonance | stability |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for t in topics {
        for (cond, lambda) in
            [(Condition::MessagePassing, None), (Condition::Store, None), (Condition::Field, Some(main_lambda))]
        {
            let rs: Vec<&RunRecord> =
                records.iter().filter(|x| x.topic == t.name && x.condition == cond && x.lambda == lambda).collect();
            let n = rs.len().max(1) as f64;
            let mean = |f: &dyn Fn(&RunRecord) -> f64| rs.iter().map(|x| f(x)).sum::<f64>() / n;
            let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
            let res = (cond == Condition::Field).then(|| mean(&|x| x.cross_agent_resonance.unwrap_or(0) as f64));
            let stab = (cond == Condition::Field).then(|| mean(&|x| x.stability.unwrap_or(0.0)));
            r.push_str(&format!(
                "| {} | {} | {:.3} | {:.2} | {:.0} | {:.0} | {} | {} |\n",
                t.name,
                cond.name(),
                mean(&|x| x.retention),
                mean(&|x| x.quality),
                mean(&|x| x.tokens as f64),
                mean(&|x| x.latency_ms),
                opt(res),
                opt(stab)
            ));
        }
    }
    r.push_str(&lambda_section(s));
    r.push_str("\nEvery field mission's phases are logged in `fields/<topic>-rep<r>-lambda<l>/field.events`; `sim-cli field replay` re-applies one step by step and `sim-cli field stats` shows its telemetry.\n");
    r.push_str("\n## Charts\n\n- `decay.svg`: strength of every field pattern over time (first topic, repetition 1).\n- `retention.svg`: retention per topic and condition.\n- `stability.svg`: field stability per phase, per topic (repetition 1).\n\n");
    r.push_str("The figures above are what this run measured, whichever condition they favour. With a live model the harness is the same; the numbers would not be.\n");
    r
}

/// The field's monitor in one sentence (`lambda` names a sweep point).
pub fn monitor_md(m: &::experiment::summary::FieldMonitor, lambda: Option<f64>) -> String {
    if m.missions == 0 {
        return String::new();
    }
    let at = lambda.map_or(String::new(), |l| format!(" at lambda {l}"));
    let alarm = if m.alarmed_missions > 0 {
        format!("ALARM: the strength ratio passed the field's alarm in {} of them", m.alarmed_missions)
    } else {
        "the strength-ratio alarm never fired".to_string()
    };
    format!(
        "\nField monitor{at}: over {} field missions, the busiest pattern answered {:.0}% of a mission's queries on \
         average ({:.0}% at most); the max/min effective strength ratio peaked at {:.2}; {alarm}.\n",
        m.missions,
        100.0 * m.busiest_share_mean,
        100.0 * m.busiest_share_max,
        m.max_strength_ratio
    )
}

/// The report's lambda sweep table, the sweep's pick and the calibration.
fn lambda_section(s: &Summary) -> String {
    let mut r = String::new();
    r.push_str("\n## Lambda sensitivity (field at each lambda against the same message-passing runs)\n\n| lambda | retention | quality | tokens | cross-agent resonance | stability | converged | busiest share (mean / max) | max strength ratio | alarms | retention p |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for p in &s.lambda_sweep {
        r.push_str(&format!(
            "| {} | {:.3} | {:.2} | {:.0} | {:.1} | {:.3} | {:.0}% | {:.0}% / {:.0}% | {:.2} | {} | {:.4} |\n",
            p.lambda,
            p.means.retention,
            p.means.quality,
            p.means.tokens,
            p.cross_agent_resonance,
            p.stability,
            100.0 * p.converged,
            100.0 * p.monitor.busiest_share_mean,
            100.0 * p.monitor.busiest_share_max,
            p.monitor.max_strength_ratio,
            p.monitor.alarmed_missions,
            p.retention_test.p_value
        ));
    }
    if let Some(pick) = &s.lambda_pick {
        r.push_str(&format!("\nThe sweep picks lambda {} ({}).", pick.chosen, pick.rule));
        if (pick.chosen - s.lambda).abs() > 1e-12 {
            r.push_str(&format!(" The comparison above used lambda {}.", s.lambda));
        }
        if let Some(c) = &pick.calibrated {
            let lambda = c.lambda.map_or("undefined".to_string(), |l| format!("{l:.3}"));
            r.push_str(&format!(
                " Calibrated from pattern lifetimes at lambda {}: {lambda} (ln(S0 / {}) / L with the median lifetime L = {:.2} h and strength S0 = {:.2} of the {} accessed patterns: an untouched pattern reaches the archival threshold after L hours).",
                s.lambda, c.archive_below, c.median_lifetime_hours, c.median_initial_strength, c.accessed_patterns
            ));
        }
        r.push('\n');
    }
    r
}
