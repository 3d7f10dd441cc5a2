//! The run's report: one self-contained HTML page (inline CSS, inline SVG
//! charts, a few lines of inline script to sort tables; no network, no
//! CDN, no font) and `report.json` with the same aggregates, built from
//! the trace alone, one frame at a time.

use crate::dir::{trace_of, RunDir};
use crate::error::{refuse, Error, Result};
use actors::progress::Progress;
use engine::analysis::{Analysis, Builder, Picker, Segments, TRAITS};
use engine::store::trace::file::open_records;
use engine::store::trace::Record;
use engine::summary::Distribution;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A report as written.
#[derive(Debug)]
pub struct Reported {
    /// The page.
    pub html: PathBuf,
    /// The aggregates as JSON, beside it.
    pub json: PathBuf,
    /// The aggregates.
    pub analysis: Analysis,
}

/// Writes the report of the run in `dir` (a run directory or its trace):
/// the page at `out` (default the run directory's `report.html`) and
/// `report.json` beside it, crossing intent with the traits `by`.
pub fn report(dir: &Path, out: Option<&Path>, by: &[String], progress: &dyn Progress) -> Result<Reported> {
    if let Some(bad) = by.iter().find(|t| !TRAITS.contains(&t.as_str())) {
        refuse!("--by {bad}: unknown trait; known: {}", TRAITS.join(", "));
    }
    let path = trace_of(dir)?;
    let analysis = analyse(&path, by, progress)
        .map_err(|e| Error::context(format!("cannot build the report of {}", path.display()), e))?;
    let html = match out {
        Some(p) => p.to_path_buf(),
        None => RunDir::at(path.parent().unwrap_or(Path::new("."))).report(),
    };
    let json = html.with_file_name(crate::dir::REPORT_JSON);
    let text =
        serde_json::to_string_pretty(&analysis).map_err(|e| Error::Input(format!("cannot encode the report: {e}")))?;
    std::fs::write(&html, page(&analysis)).map_err(Error::io(format!("cannot write {}", html.display())))?;
    std::fs::write(&json, &text).map_err(Error::io(format!("cannot write {}", json.display())))?;
    Ok(Reported { html, json, analysis })
}

/// Reads the trace at `path` record by record into `visit`, the header
/// first. A tail left by a stopped run ends the reading.
fn frames(path: &Path, mut visit: impl FnMut(Record) -> Result<()>) -> Result<()> {
    let mut reader = open_records(path)?;
    while let Some(record) = reader.next_record()? {
        visit(record)?;
    }
    Ok(())
}

/// The aggregates of the run at `path`, crossing intent with `by`.
pub fn analyse(path: &Path, by: &[String], progress: &dyn Progress) -> Result<Analysis> {
    let mut builder: Option<(Builder, engine::config::Config)> = None;
    let file = path.display().to_string();
    let (mut done, mut total) = (0u64, 0u64);
    frames(path, |record| {
        match (record, &mut builder) {
            (Record::Header(h), None) => {
                let config = h.config(&file)?;
                let b = match Builder::new(&h, &config, by) {
                    Ok(b) => b,
                    Err(e) => refuse!("--by: {e}"),
                };
                builder = Some((b, config));
                total = 2 * u64::from(h.ticks);
            }
            (Record::Tick(t), Some((b, _))) => {
                b.tick(&t);
                done += 1;
                progress.stage(0, "report: aggregating", done, total);
            }
            (Record::End(e), Some((b, _))) => b.end(&e),
            // The record reader puts the header first and only once, and
            // returns ticks whole.
            _ => {}
        }
        Ok(())
    })?;
    let Some((builder, config)) = builder else { refuse!("{file}: an empty trace (no header)") };
    let (centroids, strategy) = (builder.centroids(), builder.strategy());
    let mut analysis = builder.finish(&config);
    let mut picker = Picker::new(&analysis, centroids, strategy);
    frames(path, |record| {
        if let Record::Tick(t) = record {
            picker.tick(&t);
            done += 1;
            progress.stage(0, "report: picking reactions", done, total);
        }
        Ok(())
    })?;
    analysis.reactions = picker.finish();
    Ok(analysis)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn usd(nano: u64) -> String {
    format!("${:.6}", nano as f64 / 1e9)
}

const COLOURS: [&str; 5] = ["#c0392b", "#e67e22", "#bdc3c7", "#27ae60", "#1e8449"];

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right}\
th{background:#f4f4f4;cursor:pointer}td.l,th.l{text-align:left}.small{color:#aaa}.note{color:#666;font-size:.9em}\
.warn{background:#fff3cd;padding:.4em .8em;border-left:4px solid #e0a800}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}\
dt{font-weight:600}code{font-size:.9em}.legend span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}";

const SCRIPT: &str = "document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){\
var t=th.closest('table'),b=t.tBodies[0],rows=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';\
rows.sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent;\
var n=parseFloat(a),m=parseFloat(c);var r=(!isNaN(n)&&!isNaN(m))?n-m:a.localeCompare(c);return asc?r:-r;});\
rows.forEach(function(r){b.appendChild(r);});});});";

/// The whole page.
pub fn page(a: &Analysis) -> String {
    let mut h = String::new();
    let o = &a.overview;
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Run report: {} ({} personas)</title>\
         <style>{STYLE}</style></head><body><h1>Run report: {}, {} personas, {} of {} ticks</h1>",
        esc(&o.scenario),
        o.personas,
        esc(&o.scenario),
        o.personas,
        o.ticks_recorded,
        o.ticks
    );
    overview(&mut h, a);
    intent(&mut h, a);
    segments(&mut h, a);
    reactions(&mut h, a);
    probes(&mut h, a);
    costs(&mut h, a);
    memory(&mut h, a);
    failures(&mut h, a);
    let _ = write!(h, "<script>{SCRIPT}</script></body></html>");
    h
}

fn overview(h: &mut String, a: &Analysis) {
    let o = &a.overview;
    let _ = write!(
        h,
        "<section id=\"overview\"><h2>Overview</h2><dl><dt>Status</dt><dd>{}</dd><dt>Panel</dt><dd>{} personas, {} of {} ticks recorded, \
         {} jobs ({} ok, {} failed, {} refused)</dd><dt>Scenario</dt><dd>{}</dd><dt>Seed</dt><dd>{}</dd>\
         <dt>Chat model</dt><dd>{} ({})</dd><dt>Embedding model</dt><dd>{} ({})</dd><dt>Purchase intent</dt><dd>{}</dd>\
         <dt>Digest</dt><dd><code>{}</code></dd><dt>Full digest</dt><dd><code>{}</code></dd><dt>Engine</dt><dd>{}</dd></dl></section>",
        esc(&o.status),
        o.personas,
        o.ticks_recorded,
        o.ticks,
        o.jobs[0],
        o.jobs[1],
        o.jobs[2],
        o.jobs[3],
        esc(&o.scenario),
        o.seed,
        esc(&o.chat_model),
        esc(&o.chat_kind),
        esc(&o.embedding_model),
        esc(&o.embedding_provider),
        esc(&o.intent_method),
        esc(&o.digest),
        esc(&o.full_digest),
        esc(&o.engine_version)
    );
}

/// The colour of answer `k` (from 0) of `points`: the five intent colours
/// for a 1-5 scale, else hues from red to green.
fn colour(k: usize, points: usize) -> String {
    match points {
        5 => COLOURS[k].to_string(),
        _ => format!("hsl({:.0}, 55%, 45%)", 120.0 * k as f64 / (points.max(2) - 1) as f64),
    }
}

/// One horizontal stacked bar per row: `rows` of (label, shares of each
/// answer, 1..5 or a probe's options, note).
fn stacked(h: &mut String, rows: &[(String, Vec<f64>, String)]) {
    let (w, bar, row_h) = (980.0, 480.0, 26.0);
    let height = rows.len() as f64 * row_h + 8.0;
    let _ = write!(h, "<svg class=\"chart\" width=\"{w}\" height=\"{height}\" role=\"img\">");
    for (i, (label, shares, note)) in rows.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let _ = write!(h, "<text x=\"0\" y=\"{}\" font-size=\"13\">{}</text>", y + 15.0, esc(label));
        let mut x = 150.0;
        for (k, s) in shares.iter().enumerate() {
            let width = s * bar;
            if width > 0.0 {
                let _ = write!(
                    h,
                    "<rect class=\"bar\" x=\"{x:.1}\" y=\"{y}\" width=\"{width:.1}\" height=\"20\" fill=\"{}\"><title>{}: {:.1}%</title></rect>",
                    colour(k, shares.len()),
                    k + 1,
                    100.0 * s
                );
            }
            x += width;
        }
        let _ = write!(h, "<text x=\"640\" y=\"{}\" font-size=\"13\">{}</text>", y + 15.0, esc(note));
    }
    h.push_str("</svg>");
}

/// The mean of a distribution over 1 to k.
fn mean_of(p: &[f64]) -> f64 {
    p.iter().enumerate().map(|(i, x)| (i + 1) as f64 * x).sum()
}

fn shares(d: &Distribution) -> Vec<f64> {
    let n = d.n.max(1) as f64;
    d.histogram.iter().map(|c| *c as f64 / n).collect()
}

fn intent(h: &mut String, a: &Analysis) {
    h.push_str("<section id=\"intent\"><h2>Purchase intent</h2><p class=\"legend\">Share of answers 1 to 5:");
    for (k, c) in COLOURS.iter().enumerate() {
        let _ = write!(h, "<span style=\"background:{c}\"></span>{}", k + 1);
    }
    h.push_str("</p>");
    if a.intent.is_empty() {
        h.push_str("<p>No job reacted.</p>");
    }
    for s in &a.intent {
        let _ = write!(h, "<h3>{}</h3>", esc(&s.stimulus));
        let mut rows = Vec::new();
        for (tick, d) in &s.ticks {
            let note = format!("mean {:.2} ({:.2}-{:.2}), n {}", d.mean, d.ci95[0], d.ci95[1], d.n);
            if let Some(m) = &d.mixture {
                rows.push((
                    format!("tick {tick} distribution"),
                    m.clone(),
                    format!("mean {:.2}, the panel's", mean_of(m)),
                ));
                rows.push((format!("tick {tick} rounded"), shares(d), note));
            } else {
                rows.push((format!("tick {tick} direct"), shares(d), note));
            }
            if let Some(ssr) = s.ssr.get(tick) {
                rows.push((
                    format!("tick {tick} SSR"),
                    ssr.pmf.to_vec(),
                    format!("expected {:.2}, n {}", ssr.expected, ssr.n),
                ));
            }
        }
        stacked(h, &rows);
    }
    if a.intent.iter().any(|s| s.ticks.values().any(|d| d.mixture.is_some())) {
        h.push_str("<p class=\"note\">Distribution: the panel's, the mean of each persona's distribution over 1 to 5 (its probabilities, or the shares it gave); rounded: each persona's rounded mean, the intent it acts on.</p>");
    }
    if a.intent.iter().any(|s| !s.ssr.is_empty()) {
        h.push_str("<p class=\"note\">SSR: semantic similarity rating of the reaction text (mean pmf over respondents), beside the digit the model printed (direct).</p>");
    }
    h.push_str("<p class=\"note\">Intervals: 95%, normal approximation over the tick's respondents.</p></section>");
}

fn segment_table(h: &mut String, t: &Segments) {
    let _ = write!(
        h,
        "<h3>By {} (largest difference between segments: {:.2})</h3><table class=\"sortable\"><thead><tr><th class=\"l\">{}</th>",
        esc(&t.by),
        t.largest_difference,
        esc(&t.by)
    );
    for stimulus in t.cells.keys() {
        let _ = write!(h, "<th>{}</th>", esc(stimulus));
    }
    h.push_str("</tr></thead><tbody>");
    for (v, value) in t.values.iter().enumerate() {
        let _ = write!(h, "<tr><td class=\"l\">{}</td>", esc(value));
        for row in t.cells.values() {
            let c = &row[v];
            if c.n == 0 {
                h.push_str("<td class=\"small\" data-v=\"-1\" title=\"no respondents\">-</td>");
                continue;
            }
            let class = if c.small { " class=\"small\"" } else { "" };
            let _ = write!(
                h,
                "<td{class} data-v=\"{:.3}\" title=\"n {}; {:.0}% positive{}\">{:.2} <small>({}; {:.0}% +)</small></td>",
                c.mean_intent,
                c.n,
                100.0 * c.positive_share,
                if c.small { "; too few respondents" } else { "" },
                c.mean_intent,
                c.n,
                100.0 * c.positive_share
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    if t.many_valued {
        h.push_str("<p class=\"note\">A persona holds several of these values and counts in the cell of each.</p>");
    }
}

fn segments(h: &mut String, a: &Analysis) {
    let _ = write!(
        h,
        "<section id=\"segments\"><h2>Segments</h2><p class=\"note\">Mean intent (respondents; share of positive reactions). \
         Grey cells have fewer than {} respondents. Tables with the largest differences come first; click a heading to sort.</p>",
        engine::analysis::MIN_CELL
    );
    for t in &a.segments {
        segment_table(h, t);
    }
    h.push_str("</section>");
}

fn reactions(h: &mut String, a: &Analysis) {
    let _ = write!(
        h,
        "<section id=\"reactions\"><h2>Reactions</h2><p class=\"note\">Picked {}.</p>",
        esc(&a.reactions_method)
    );
    for p in &a.reactions {
        let _ = write!(h, "<h3>{}</h3><table><thead><tr><th class=\"l\">kind</th><th class=\"l\">persona</th><th>tick</th><th>intent</th><th>sentiment</th><th class=\"l\">reaction</th></tr></thead><tbody>", esc(&p.stimulus));
        for (kind, list) in [("typical", &p.typical), ("unusual", &p.unusual)] {
            for r in list {
                let _ = write!(
                    h,
                    "<tr><td class=\"l\">{kind}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:+.2}</td><td class=\"l\">{}</td></tr>",
                    esc(&r.persona),
                    r.tick,
                    r.intent,
                    r.sentiment,
                    esc(&r.text)
                );
            }
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}

fn probes(h: &mut String, a: &Analysis) {
    h.push_str("<section id=\"probes\"><h2>Probes</h2>");
    if a.probes.is_empty() {
        h.push_str("<p>The scenario asked no probe question.</p>");
    } else {
        let mut rows: Vec<(String, Vec<f64>, String)> = Vec::new();
        for (id, d) in &a.probes {
            let note = format!("mean {:.2}, n {}, answers 1-{}", d.mean, d.n, d.histogram.len());
            match &d.mixture {
                Some(m) => {
                    rows.push((
                        format!("{id} distribution"),
                        m.clone(),
                        format!("mean {:.2}, the panel's", mean_of(m)),
                    ));
                    rows.push((format!("{id} rounded"), shares(d), note));
                }
                None => rows.push((id.clone(), shares(d), note)),
            }
        }
        stacked(h, &rows);
    }
    h.push_str("</section>");
}

fn kv_table(h: &mut String, head: (&str, &str), rows: impl IntoIterator<Item = (String, String)>) {
    let _ = write!(
        h,
        "<table class=\"sortable\"><thead><tr><th class=\"l\">{}</th><th>{}</th></tr></thead><tbody>",
        head.0, head.1
    );
    for (k, v) in rows {
        let _ = write!(h, "<tr><td class=\"l\">{}</td><td>{}</td></tr>", esc(&k), esc(&v));
    }
    h.push_str("</tbody></table>");
}

fn costs(h: &mut String, a: &Analysis) {
    let c = &a.costs;
    h.push_str("<section id=\"costs\"><h2>Costs</h2>");
    if c.price_kinds.values().any(|k| k == "nominal") {
        let _ = write!(
            h,
            "<p class=\"warn\">Prices are nominal: {}. No provider billed these amounts unless a live model ran.</p>",
            esc(&c.price_label)
        );
    }
    let kinds: Vec<String> = c.price_kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = write!(h, "<p>Price kinds: {}.</p><h3>By stage</h3>", esc(&kinds.join(", ")));
    kv_table(h, ("stage", "USD"), c.by_stage.iter().map(|(k, v)| (k.clone(), usd(*v))));
    h.push_str("<h3>By model</h3>");
    kv_table(h, ("model", "USD"), c.by_model.iter().map(|(k, v)| (k.clone(), usd(*v))));
    h.push_str("<h3>Tokens</h3>");
    kv_table(h, ("tokens", "count"), c.tokens.iter().map(|(k, v)| (k.clone(), v.to_string())));
    if let (Some(cached), Some(all)) = (c.tokens.get("chat input from the prompt cache"), c.tokens.get("chat input")) {
        let share = 100.0 * *cached as f64 / (*all).max(1) as f64;
        let _ = write!(
            h,
            "<p>The providers served {share:.1}% of the chat prompt tokens from their prompt caches, billed at {}.</p>",
            esc(&c.cached_input_price)
        );
    }
    h.push_str("<h3>Embedding work</h3>");
    kv_table(h, ("", "count"), c.embedding.iter().map(|(k, v)| (k.clone(), v.to_string())));
    if c.ssr_nano_usd > 0 {
        let _ = write!(h, "<p>SSR's texts cost {} on top of direct rating.</p>", usd(c.ssr_nano_usd));
    }
    h.push_str("<h3>The ten most expensive personas</h3>");
    kv_table(h, ("persona", "USD"), c.top_personas.iter().map(|(k, v)| (k.clone(), usd(*v))));
    h.push_str("</section>");
}

fn memory(h: &mut String, a: &Analysis) {
    h.push_str("<section id=\"memory\"><h2>Memory</h2><table><thead><tr><th>tick</th><th class=\"l\">created</th><th>promoted</th><th>expired</th><th>clustered</th>\
        <th>working</th><th>short-term</th><th>long-term</th><th>expired (all)</th></tr></thead><tbody>");
    for m in &a.memory {
        let created: Vec<String> = m.created.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let tier = |t: &str| m.tiers.get(t).copied().unwrap_or(0);
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            m.tick,
            esc(&created.join(", ")),
            m.promoted,
            m.expired,
            m.clustered,
            tier("working"),
            tier("shortTerm"),
            tier("longTerm"),
            tier("expired")
        );
    }
    h.push_str(
        "</tbody></table><p class=\"note\">Records per tier at the end of each tick, from the trace's \
        creations, promotions and expiries (a persona's memories enter the working tier). Energies are not shown: \
        the trace records consolidation's decisions, not every decay. The automatic pass at each commit is off \
        unless <code>[consolidation] enabled</code>; passes run by hand (<code>sim-cli memory consolidate</code>) \
        are in <code>sim-cli memory status</code>, not here.</p></section>",
    );
}

fn failures(h: &mut String, a: &Analysis) {
    h.push_str("<section id=\"failures\"><h2>Failures</h2>");
    if a.failures.is_empty() {
        h.push_str("<p>No job failed or was refused.</p>");
    } else {
        h.push_str("<table class=\"sortable\"><thead><tr><th class=\"l\">stage</th><th class=\"l\">cause</th><th>jobs</th><th class=\"l\">first</th></tr></thead><tbody>");
        for f in &a.failures {
            let first: Vec<String> = f.first.iter().map(|(t, p, s)| format!("tick {t} {p} {s}")).collect();
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&f.stage),
                esc(&f.cause),
                f.count,
                esc(&first.join("; "))
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</section>");
}
