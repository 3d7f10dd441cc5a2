//! The readable summary on stdout and the HTML page of a validation.

use super::figures::{OptionMass, Summary};
use std::fmt::Write;
use survey::rectify::{Estimate, QuestionShares};
use survey::score::{Figure, QuestionScore, SourceScore};
use survey::Kind;

/// A figure with its interval, to two decimals (`summary.json` has them
/// whole).
fn fig(f: Option<&Figure>) -> String {
    match f {
        Some(Figure { value: Some(v), interval: Some([lo, hi]) }) => format!("{v:.2} [{lo:.2}, {hi:.2}]"),
        Some(Figure { value: Some(v), interval: None }) => format!("{v:.2}"),
        Some(Figure { value: None, .. }) => "n/a".into(),
        None => String::new(),
    }
}

/// One column of a question's table: its heading, and the figure of a source.
type Column = (&'static str, fn(&SourceScore) -> Option<&Figure>);

/// The columns of a question's table.
fn columns(kind: Kind) -> Vec<Column> {
    match kind {
        Kind::Ordinal => vec![
            ("KS similarity", |s| s.ks_similarity.as_ref()),
            ("Wasserstein", |s| s.wasserstein.as_ref()),
            ("spread ratio", |s| s.spread_ratio.as_ref()),
            ("subgroup r", |s| Some(&s.subgroup_correlation)),
            ("exact", |s| Some(&s.exact_match)),
            ("within one", |s| s.within_one.as_ref()),
            ("log-loss", |s| Some(&s.log_loss)),
            ("Brier", |s| Some(&s.brier)),
            ("SimBench", |s| Some(&s.simbench)),
        ],
        Kind::Nominal => vec![
            ("total variation", |s| s.total_variation.as_ref()),
            ("subgroup r", |s| Some(&s.subgroup_correlation)),
            ("exact", |s| Some(&s.exact_match)),
            ("log-loss", |s| Some(&s.log_loss)),
            ("Brier", |s| Some(&s.brier)),
            ("SimBench", |s| Some(&s.simbench)),
        ],
    }
}

fn people_line(q: &QuestionScore) -> String {
    match q.human_mean_sd {
        Some([m, sd]) => format!("people: mean {m:.2}, sd {sd:.2}"),
        None => {
            let shares: Vec<String> =
                q.options.iter().zip(&q.human_pmf).map(|(o, p)| format!("{o} {:.1}%", 100.0 * p)).collect();
            format!("people: {}", shares.join(", "))
        }
    }
}

/// The options' mass at the answer, in a sentence.
fn mass_line(m: &OptionMass) -> String {
    let mut line = format!(
        "the options held {:.3} of the model's probability at the answer on average ({:.3} to {:.3}); the rest went \
         to other text",
        m.mean, m.min, m.max
    );
    if let Some(r) = &m.raised {
        let _ = write!(
            line,
            "; {} respondents' options, below [answers] min_option_mass, were weighed again with their tokens raised \
             by logit_bias: their mass went from {:.3} to {:.3} on average (at least {:.3})",
            r.respondents, r.mean_before, r.mean_after, r.min_after
        );
    }
    line
}

/// The calibration of `q`, in a sentence, when the validation has one.
fn calibration_line(s: &Summary, q: &QuestionScore) -> Option<String> {
    let c = s.calibration.as_ref()?.questions.iter().find(|c| c.fit.question == q.id)?;
    let t = c.fit.temperature.map_or("not applicable (sampled answers)".into(), |t| format!("{t:.3}"));
    Some(format!(
        "calibrated on {} fitted respondents: temperature {t}; the model carries {:.3} of its blend with the \
         marginal, {:.3} of its blend with the demographic cell{}",
        c.fit.respondents,
        c.fit.weight_marginal,
        c.fit.weight_demographic,
        c.fit.weight_imputer.map_or(String::new(), |w| format!(", {w:.3} of its blend with the imputer"))
    ))
}

/// What was given and how the figures are weighted, in a sentence, when
/// either applies.
fn design_line(s: &Summary) -> Option<String> {
    let given = (!s.given.is_empty()).then(|| {
        format!(
            "given: each respondent's own answers to {} shown as the interview so far, not scored",
            s.given.join(", ")
        )
    });
    let weights = s.weights.as_ref().map(|w| format!("weighted by the panel column {w}"));
    let parts: Vec<String> = given.into_iter().chain(weights).collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The model against the imputer on `q`, in a sentence, and why the
/// imputer fell back to the marginal when it did.
fn imputer_line(s: &Summary, q: &QuestionScore) -> Option<String> {
    let fit = s.imputer.iter().find(|f| f.question == q.id)?;
    let inputs =
        if s.given.is_empty() { "the traits".to_string() } else { format!("the traits and {}", s.given.join(", ")) };
    let mut line = match &q.versus_imputer {
        Some(v) => format!(
            "the model {} the imputer ({} on {inputs}) on {}: model minus imputer {}",
            v.verdict,
            fit.model,
            v.figure.replace('_', "-"),
            fig(Some(&v.difference))
        ),
        None => format!("the imputer ({} on {inputs}) cannot be compared with the model here", fit.model),
    };
    if let Some(note) = &fit.note {
        let _ = write!(line, "; the imputer did not fit ({note})");
    }
    Some(line)
}

/// The rectified shares of `q`, when the validation has them.
fn rectified_of<'a>(s: &'a Summary, q: &QuestionScore) -> Option<&'a QuestionShares> {
    s.rectified.as_ref()?.iter().find(|r| r.question == q.id)
}

/// Whether rectifying shrank the error, in words.
fn shrank(r: &QuestionShares) -> &'static str {
    if r.shrinks_error {
        "rectifying shrank it"
    } else {
        "rectifying did not shrink it"
    }
}

/// An estimate with its interval, to three decimals.
fn estimate(e: &Estimate) -> String {
    format!("{:.3} [{:.3}, {:.3}]", e.value, e.interval[0], e.interval[1])
}

fn rectified_text(r: &QuestionShares) -> String {
    let shares: Vec<String> = r
        .options
        .iter()
        .map(|o| {
            let [p, e] = [&o.people_only, &o.rectified.estimate].map(estimate);
            format!("{} {p} / {e} / {:.3}", o.option, o.held_out_share)
        })
        .collect();
    format!(
        "  shares, people only / rectified (PPI++, {} labelled, {} unlabelled) / held-out people: {}\n  \
         mean absolute error against the held-out people: people only {:.4}, rectified {:.4} ({})",
        r.labelled,
        r.unlabelled,
        shares.join("; "),
        r.error_people_only,
        r.error_rectified,
        shrank(r)
    )
}

fn rectified_html(r: &QuestionShares) -> String {
    let mut out = String::from(
        "<table><tr><th>option</th><th>people only</th><th>rectified (PPI++)</th><th>&lambda;</th>\
         <th>effective n</th><th>held-out people</th></tr>",
    );
    for o in &r.options {
        let [p, e] = [&o.people_only, &o.rectified.estimate].map(estimate);
        let _ = write!(
            out,
            "<tr><td>{}. {}</td><td>{p}</td><td>{e}</td><td>{:.3}</td><td>{}</td><td>{:.3}</td></tr>",
            o.option,
            esc(&o.label),
            o.rectified.lambda,
            o.rectified.effective_n.map_or("-".into(), |n| format!("{n:.1}")),
            o.held_out_share
        );
    }
    let _ = write!(
        out,
        "</table><p>Mean absolute error against the held-out people: people only {:.4}, rectified {:.4} \
         ({}; {} labelled, {} unlabelled).</p>",
        r.error_people_only,
        r.error_rectified,
        shrank(r),
        r.labelled,
        r.unlabelled
    );
    out
}

/// The readable summary.
pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    let c = &s.calls;
    let _ = writeln!(
        out,
        "validate {}: {} respondents ({} fitted, {} held out) of {}; chat {} ({}); seed {}",
        s.suite, s.scores.respondents, s.scores.fitted, s.scores.held_out, s.panel, s.chat_model, s.method, s.seed
    );
    let _ = writeln!(
        out,
        "{} questions asked in {} chat calls, {} without a valid answer; {} + {} tokens, ${:.4}{}",
        c.asked,
        c.calls,
        c.failed,
        c.input_tokens,
        c.output_tokens,
        c.cost_usd,
        if c.estimated { " (estimated)" } else { "" }
    );
    if let Some(cache) = &c.response_cache {
        let _ = writeln!(out, "{}", cache.line());
    }
    if let Some(e) = &s.estimate {
        let billed = (c.cost_usd * engine::cost::NANO_PER_USD as f64).round() as u64;
        let _ = writeln!(out, "{}", e.against(billed, c.input_tokens + c.output_tokens));
    }
    let _ = writeln!(out, "digest {}\nout {}", s.digest, s.out);
    if let Some(line) = design_line(s) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "Figures on the held-out half, 95% bootstrap intervals ({} resamples).", s.scores.resamples);
    for q in &s.scores.questions {
        let kind = match q.kind {
            Kind::Ordinal => "ordinal",
            Kind::Nominal => "nominal",
        };
        let _ = writeln!(
            out,
            "\n{}: {kind}, {} options; {} held out; {}",
            q.id,
            q.options.len(),
            q.held_out,
            people_line(q)
        );
        let cols = columns(q.kind);
        let width = q.sources.iter().map(|s| s.name.chars().count()).max().unwrap_or(0).max(30);
        let _ = write!(out, "  {:<width$}", "");
        for (h, _) in &cols {
            let _ = write!(out, " {h:<19}");
        }
        out.push('\n');
        for src in &q.sources {
            let _ = write!(out, "  {:<width$}", src.name);
            for (_, get) in &cols {
                let _ = write!(out, " {:<19}", fig(get(src)));
            }
            if src.missing > 0 {
                let _ = write!(out, " ({} without an answer)", src.missing);
            }
            out.push('\n');
        }
        if let Some(m) = s.option_mass.iter().find(|m| m.question == q.id) {
            let _ = writeln!(out, "  {}", mass_line(m));
        }
        if let Some(line) = imputer_line(s, q) {
            let _ = writeln!(out, "  {line}");
        }
        if let Some(line) = calibration_line(s, q) {
            let _ = writeln!(out, "  {line}");
        }
        if let Some(r) = rectified_of(s, q) {
            let _ = writeln!(out, "{}", rectified_text(r));
        }
        if let Some(r) = &q.reliability {
            let _ = writeln!(
                out,
                "  reliability, {} against {}: same answer {}, distribution similarity {}",
                r.runs[0],
                r.runs[1],
                fig(Some(&r.exact_match)),
                fig(Some(&r.distribution_similarity))
            );
        }
        let what = if q.kind == Kind::Ordinal { "mean" } else { "share choosing the first option" };
        let model = q.sources.first().map_or("model", |m| m.name.as_str());
        let _ = writeln!(out, "  by subgroup ({what}): people / {model}");
        for b in &q.bands {
            let _ = writeln!(
                out,
                "    {:<12} {:<24} n {:>4}   {:<19} / {}",
                b.subgroup,
                b.band,
                b.n,
                fig(Some(&b.human)),
                fig(b.sources.first())
            );
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Bars of each option, people beside each source: one SVG.
fn bars(q: &QuestionScore) -> String {
    let mut series: Vec<(&str, &[f64])> = vec![("people", &q.human_pmf)];
    series.extend(q.sources.iter().map(|s| (s.name.as_str(), s.pmf.as_slice())));
    const COLOURS: [&str; 6] = ["#222222", "#1f77b4", "#2ca02c", "#bbbbbb", "#ff7f0e", "#9467bd"];
    let k = q.options.len();
    let (group, bar, height, top) = (24.0 * series.len() as f64 + 24.0, 24.0, 200.0, 20.0);
    let width = 60.0 + group * k as f64;
    let max = series.iter().flat_map(|(_, p)| p.iter()).fold(0.05f64, |m, p| m.max(*p));
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" role=\"img\" aria-label=\"{} distributions\">",
        height + 90.0,
        esc(&q.id)
    );
    for (i, option) in q.options.iter().enumerate() {
        let x0 = 50.0 + group * i as f64;
        for (j, (_, pmf)) in series.iter().enumerate() {
            let h = height * pmf[i] / max;
            let _ = write!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{:.1}%</title></rect>",
                x0 + bar * j as f64,
                top + height - h,
                bar - 2.0,
                COLOURS[j % COLOURS.len()],
                100.0 * pmf[i]
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            x0 + bar * series.len() as f64 / 2.0,
            top + height + 16.0,
            esc(&format!("{}. {option}", i + 1))
        );
    }
    for (j, (name, _)) in series.iter().enumerate() {
        let y = top + height + 36.0 + 14.0 * (j / 3) as f64;
        let x = 50.0 + 220.0 * (j % 3) as f64;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{y:.1}\" font-size=\"12\">{}</text>",
            y - 9.0,
            COLOURS[j % COLOURS.len()],
            x + 14.0,
            esc(name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The model's confusion matrix of `q` as a table.
fn confusion_html(q: &QuestionScore) -> String {
    let mut out = String::new();
    if let Some(model) = q.sources.first() {
        let _ = write!(out, "<table class=\"confusion\"><tr><th>people \\ {}</th>", esc(&model.name));
        for i in 1..=q.options.len() {
            let _ = write!(out, "<th>{i}</th>");
        }
        out.push_str("</tr>");
        for (i, row) in model.confusion.iter().enumerate() {
            let _ = write!(out, "<tr><td>{}. {}</td>", i + 1, esc(&q.options[i]));
            for n in row {
                let _ = write!(out, "<td>{n}</td>");
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
    }
    out
}

/// The self-contained HTML page.
pub fn html(s: &Summary) -> String {
    let mut out = String::from("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(out, "<title>Validation: {}</title>", esc(&s.suite));
    out.push_str(
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:0.5em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th:first-child,td:first-child{text-align:left}\
         .note{color:#555}</style></head><body>",
    );
    let _ = write!(
        out,
        "<h1>Validation: {}</h1><p>{} respondents ({} fitted, {} held out) of {}; chat model <b>{}</b> ({}); seed {}; \
         digest <code>{}</code>.</p><p class=\"note\">Every figure is on the held-out half, with a 95% bootstrap interval \
         over {} resamples. Baselines: uniform answers, the fitted half's marginal distribution, its distribution \
         within each demographic cell, and a statistical imputer (a multinomial or ordered logit on the traits and the \
         given answers, fitted on the fitted half).</p>",
        esc(&s.suite),
        s.scores.respondents,
        s.scores.fitted,
        s.scores.held_out,
        s.panel,
        esc(&s.chat_model),
        esc(&s.method),
        s.seed,
        s.digest,
        s.scores.resamples
    );
    if let Some(line) = design_line(s) {
        let _ = write!(out, "<p>{}.</p>", esc(&line));
    }
    for q in &s.scores.questions {
        let _ = write!(
            out,
            "<section id=\"q-{}\"><h2>{}</h2><p>{} held out; {}</p>",
            esc(&q.id),
            esc(&q.id),
            q.held_out,
            esc(&people_line(q))
        );
        out.push_str(&bars(q));
        out.push_str("<table><tr><th>source</th>");
        let cols = columns(q.kind);
        for (h, _) in &cols {
            let _ = write!(out, "<th>{h}</th>");
        }
        out.push_str("</tr>");
        for src in &q.sources {
            let _ = write!(out, "<tr><td>{}</td>", esc(&src.name));
            for (_, get) in &cols {
                let _ = write!(out, "<td>{}</td>", fig(get(src)));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
        if let Some(m) = s.option_mass.iter().find(|m| m.question == q.id) {
            let _ = write!(out, "<p>{}</p>", esc(&mass_line(m)));
        }
        if let Some(line) = imputer_line(s, q) {
            let _ = write!(out, "<p><b>{}</b></p>", esc(&line));
        }
        if let Some(line) = calibration_line(s, q) {
            let _ = write!(out, "<p>{}</p>", esc(&line));
        }
        if let Some(r) = rectified_of(s, q) {
            out.push_str(&rectified_html(r));
        }
        if let Some(r) = &q.reliability {
            let _ = write!(
                out,
                "<p>Reliability, {} against {}: same answer {}, distribution similarity {}.</p>",
                esc(&r.runs[0]),
                esc(&r.runs[1]),
                fig(Some(&r.exact_match)),
                fig(Some(&r.distribution_similarity))
            );
        }
        out.push_str("<table><tr><th>subgroup</th><th>band</th><th>n</th><th>people</th>");
        for src in &q.sources {
            let _ = write!(out, "<th>{}</th>", esc(&src.name));
        }
        out.push_str("</tr>");
        for b in &q.bands {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                esc(&b.subgroup),
                esc(&b.band),
                b.n,
                fig(Some(&b.human))
            );
            for f in &b.sources {
                let _ = write!(out, "<td>{}</td>", fig(Some(f)));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
        out.push_str(&confusion_html(q));
        out.push_str("</section>");
    }
    out.push_str("</body></html>\n");
    out
}

/// A comparison of models in text, as `sim-cli validate` prints it.
pub(super) fn comparison_text(s: &super::ComparisonSummary) -> String {
    let mut out = String::new();
    let finished = s.models.iter().filter(|m| m.summary.is_some()).count();
    let _ = writeln!(out, "{} models compared, {finished} finished; seed {}; out {}", s.models.len(), s.seed, s.out);
    for m in &s.models {
        match (&m.summary, &m.error) {
            (Some(v), _) => {
                let _ = writeln!(
                    out,
                    "  {} ({}, {}): digest {}, {} chat calls, ${:.4} (${:.6} per respondent)",
                    m.label,
                    m.config,
                    m.chat_model,
                    &v.digest[..16.min(v.digest.len())],
                    v.calls.calls,
                    v.calls.cost_usd,
                    v.calls.cost_per_respondent_usd
                );
            }
            (None, error) => {
                let _ = writeln!(
                    out,
                    "  {} ({}, {}): FAILED: {}",
                    m.label,
                    m.config,
                    m.chat_model,
                    error.as_deref().unwrap_or("")
                );
            }
        }
    }
    let better = |f: &str| if f == "log_loss" { "lower is better" } else { "higher is better" };
    let interval = |f: &Figure| match (f.value, f.interval) {
        (Some(v), Some([lo, hi])) => format!("{v:+.4} [{lo:+.4}, {hi:+.4}]"),
        (Some(v), None) => format!("{v:+.4}"),
        _ => "n/a".into(),
    };
    let c = &s.comparison;
    let standings = |r: &[survey::compare::Standing]| {
        r.iter()
            .map(|x| format!("{}. {} {}", x.rank, x.name, x.value.map_or("n/a".into(), |v| format!("{v:.4}"))))
            .collect::<Vec<_>>()
            .join("   ")
    };
    for q in &c.questions {
        let figure = q.ranking.first().map_or("log_loss", |r| r.figure);
        let _ = writeln!(out, "{} ({figure}, {}): {}", q.question, better(figure), standings(&q.ranking));
        for p in &q.pairs {
            let _ = writeln!(
                out,
                "  {} - {}: {} {} ({}); {} {}",
                p.a,
                p.b,
                p.figure,
                interval(&p.difference),
                p.verdict,
                p.distribution_figure,
                interval(&p.distribution_difference)
            );
        }
    }
    let figure = c.ranking.first().map_or("log_loss", |r| r.figure);
    let _ =
        writeln!(out, "Overall ({figure} averaged over the questions, {}): {}", better(figure), standings(&c.ranking));
    for p in c.overall.iter().filter(|p| c.ranking.iter().any(|r| r.name == p.b)) {
        let _ = writeln!(out, "  {} - {}: {} {} ({})", p.a, p.b, p.figure, interval(&p.difference), p.verdict);
    }
    let _ = writeln!(out, "Ranks tie where the paired 95% interval of a difference covers 0.");
    out
}
