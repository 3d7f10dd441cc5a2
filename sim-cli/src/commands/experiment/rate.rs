//! `sim-cli experiment rate DIR --ratings FILE`: the blind kit's filled-in
//! sheet, un-blinded with its `key.json`, becomes the quality criterion's
//! human source. The proxy criterion is kept beside it; nothing in
//! `results.json` is lost.

use ::experiment::stats::OneSided;
use ::experiment::summary::{decide, Criterion, QUALITY_NAME};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The sheet's pair column.
pub const PAIR: &str = "pair";
/// The sheet's score column of report A.
pub const SCORE_A: &str = "report_a_score_1_to_5";
/// The sheet's score column of report B.
pub const SCORE_B: &str = "report_b_score_1_to_5";

/// Options of `sim-cli experiment rate`.
#[derive(Debug, Args)]
#[command(
    after_help = "DIR is the experiment's output (results.json, report.md). The sheet is the kit's ratings.csv\n\
    with a 1-5 score for each report; the key is the kit's key.json (by default beside the sheet).\n\
    The kit carries the experiment's id: a sheet or key from another experiment is refused.\n\n\
    Example:\n  \
    sim-cli experiment --out runs/exp --blind-export kit     then fill in kit/ratings.csv\n  \
    sim-cli experiment rate runs/exp --ratings kit/ratings.csv"
)]
pub struct RateArgs {
    /// The experiment's output directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The filled-in ratings sheet.
    #[arg(long, value_name = "FILE")]
    pub ratings: PathBuf,
    /// The kit's key.json. Default: key.json beside the sheet.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Accept a sheet with unrated pairs (the report says how many were rated).
    #[arg(long)]
    pub partial: bool,
    /// Print the human section as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// One pair's two scores, un-blinded.
#[derive(Debug, Clone, PartialEq)]
struct Rated {
    topic: String,
    field: f64,
    control: f64,
}

/// The `human` section of `results.json`.
#[derive(Debug, Serialize)]
struct Human {
    sheet: String,
    rated_pairs: usize,
    total_pairs: usize,
    partial: bool,
    means: BTreeMap<&'static str, f64>,
    mean_difference: f64,
    /// Topics with a rated pair: the unit of the test.
    topics: usize,
    /// The topic-level one-sided test of field - message passing - 0.5.
    one_sided: OneSided,
    criterion: Criterion,
}

/// Which condition each pair's report A and B are, from `key.json`.
fn read_key(path: &Path, id: &str) -> Result<BTreeMap<String, (String, String, String)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the key {}", path.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let Some(kit) = v["experiment"].as_str() else {
        bail!("{}: no experiment id (a kit written before kits carried one); export the kit again", path.display());
    };
    if kit != id {
        bail!("{}: the key of experiment {kit}, not of this one ({id})", path.display());
    }
    let mut out = BTreeMap::new();
    for p in v["pairs"].as_array().into_iter().flatten() {
        let get = |k: &str| p[k].as_str().map(str::to_string);
        match (get("pair"), get("A"), get("B"), get("topic")) {
            (Some(pair), Some(a), Some(b), Some(topic)) => out.insert(pair, (a, b, topic)),
            _ => bail!("{}: a pair without its pair, topic, A and B: {p}", path.display()),
        };
    }
    Ok(out)
}

/// A 1-5 score, or `None` when the cell is empty.
fn score(cell: &str, row: usize, column: &str, sheet: &Path) -> Result<Option<f64>> {
    let cell = cell.trim();
    if cell.is_empty() {
        return Ok(None);
    }
    match cell.parse::<u8>() {
        Ok(n @ 1..=5) => Ok(Some(f64::from(n))),
        _ => bail!("{} row {row}, {column}: {cell:?} is not a score from 1 to 5", sheet.display()),
    }
}

/// The rated pairs of the sheet, un-blinded; errors name the row.
fn read_sheet(
    sheet: &Path,
    id: &str,
    key: &BTreeMap<String, (String, String, String)>,
    partial: bool,
) -> Result<BTreeMap<String, Rated>> {
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(sheet)
        .with_context(|| format!("cannot read the sheet {}", sheet.display()))?;
    let headers = r.headers().with_context(|| format!("{}: no header row", sheet.display()))?.clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| format!("{}: no {name} column", sheet.display()))
    };
    let (cp, ca, cb, ce) = (col(PAIR)?, col(SCORE_A)?, col(SCORE_B)?, col("experiment")?);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut rated = BTreeMap::new();
    for (i, rec) in r.records().enumerate() {
        let row = i + 2;
        let rec = rec.with_context(|| format!("{} row {row}: not a CSV row", sheet.display()))?;
        let cell = |c: usize| rec.get(c).unwrap_or("");
        let pair = cell(cp).to_string();
        if pair.is_empty() && rec.iter().all(str::is_empty) {
            continue;
        }
        if cell(ce) != id {
            bail!("{} row {row}: from experiment {:?}, not this one ({id})", sheet.display(), cell(ce));
        }
        let Some((a, _, topic)) = key.get(&pair) else {
            bail!("{} row {row}: pair {pair:?} is not in the key", sheet.display());
        };
        if let Some(first) = seen.insert(pair.clone(), row) {
            bail!("{} row {row}: pair {pair} is rated twice (first at row {first})", sheet.display());
        }
        match (score(cell(ca), row, SCORE_A, sheet)?, score(cell(cb), row, SCORE_B, sheet)?) {
            (Some(sa), Some(sb)) => {
                let (field, control) = if a == "field" { (sa, sb) } else { (sb, sa) };
                rated.insert(pair, Rated { topic: topic.clone(), field, control });
            }
            (None, None) if partial => {}
            _ if partial => bail!("{} row {row}: pair {pair} has one score of two", sheet.display()),
            _ => bail!("{} row {row}: pair {pair} is not rated (use --partial for a partial sheet)", sheet.display()),
        }
    }
    if !partial {
        if let Some(missing) = key.keys().find(|p| !seen.contains_key(*p)) {
            bail!("{}: pair {missing} has no row (use --partial for a partial sheet)", sheet.display());
        }
    }
    if rated.is_empty() {
        bail!("{}: no pair is rated", sheet.display());
    }
    Ok(rated)
}

/// Runs `sim-cli experiment rate`.
pub fn rate(a: &RateArgs) -> Result<()> {
    let results_path = a.dir.join("results.json");
    let text = std::fs::read_to_string(&results_path)
        .with_context(|| format!("{}: no results.json (is it an experiment's output?)", a.dir.display()))?;
    let mut results: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", results_path.display()))?;
    let Some(id) = results["experiment"]["id"].as_str().map(str::to_string) else {
        bail!("{}: no experiment id (written before experiments had one)", results_path.display());
    };
    let key_path = a.key.clone().unwrap_or_else(|| a.ratings.parent().unwrap_or(Path::new(".")).join("key.json"));
    let key = read_key(&key_path, &id)?;
    let rated = read_sheet(&a.ratings, &id, &key, a.partial)?;
    let n = rated.len() as f64;
    let field = rated.values().map(|r| r.field).sum::<f64>() / n;
    let control = rated.values().map(|r| r.control).sum::<f64>() / n;
    let gain = field - control;
    // The topic is the unit: a topic's rated pairs are averaged first.
    let mut by_topic: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for r in rated.values() {
        let e = by_topic.entry(r.topic.as_str()).or_default();
        (e.0, e.1) = (e.0 + r.field - r.control, e.1 + 1);
    }
    let d: Vec<f64> = by_topic.values().map(|(sum, n)| sum / *n as f64 - 0.5).collect();
    let criterion = Criterion::tested(
        "quality",
        QUALITY_NAME,
        (0.5, gain, gain >= 0.5),
        "field - message_passing - 0.5",
        &d,
        "human",
        true,
    );
    let test = criterion.one_sided.clone().context("a tested criterion carries its test")?;
    let human = Human {
        sheet: a.ratings.display().to_string(),
        rated_pairs: rated.len(),
        total_pairs: key.len(),
        partial: rated.len() < key.len(),
        means: BTreeMap::from([("field", field), ("message_passing", control)]),
        mean_difference: gain,
        topics: d.len(),
        one_sided: test,
        criterion: criterion.clone(),
    };
    fold_in(&mut results, &human, criterion)?;
    std::fs::write(&results_path, serde_json::to_vec_pretty(&results)?)
        .with_context(|| format!("cannot write {}", results_path.display()))?;
    let summary: ::experiment::summary::Summary =
        serde_json::from_value(results["summary"].clone()).context("the updated summary does not read back")?;
    let report = rewrite_report(&a.dir.join("report.md"), &summary, &human)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&human)?);
    } else {
        print!("{}", human_md(&human));
        print!("\n{}", super::markdown::criteria_table(&summary));
        println!("\nUpdated {} and {}.", results_path.display(), report.display());
    }
    Ok(())
}

/// Puts the human criterion in place of the proxy one (kept as
/// `summary.proxy_quality`), adds the `human` section and restates the
/// verdict and the recommendation.
fn fold_in(results: &mut Value, human: &Human, criterion: Criterion) -> Result<()> {
    let summary = &mut results["summary"];
    let mut criteria: Vec<Criterion> =
        serde_json::from_value(summary["criteria"].clone()).context("results.json: unreadable criteria")?;
    let Some(slot) = criteria.iter_mut().find(|c| c.key == "quality") else {
        bail!("results.json: no quality criterion");
    };
    if summary.get("proxy_quality").is_none() {
        summary["proxy_quality"] = serde_json::to_value(&*slot)?;
    }
    *slot = criterion;
    let topics = summary["topics"].as_u64().context("results.json: no topic count")? as usize;
    let store: Option<OneSided> =
        serde_json::from_value(summary["comparisons"]["field_vs_store"]["one_sided"].clone()).ok();
    let recommendation = decide(&criteria, topics, store.as_ref());
    summary["pass"] = Value::Bool(criteria.iter().filter(|c| c.counted).all(|c| c.pass));
    summary["verdict"] = serde_json::to_value(recommendation.verdict)?;
    summary["recommendation"] = serde_json::to_value(&recommendation)?;
    summary["criteria"] = serde_json::to_value(&criteria)?;
    results["human"] = serde_json::to_value(human)?;
    Ok(())
}

const HUMAN_START: &str = "<!-- human -->\n";
const HUMAN_END: &str = "<!-- /human -->\n";

fn human_md(h: &Human) -> String {
    let w = &h.one_sided;
    format!(
        "## Human ratings (blind, 1-5)\n\n{} of {} pairs rated ({}). Mean score: field {:.2}, message passing {:.2}; \
         difference {:+.2}. Over {} topics, d = field - message passing - 0.5: one-sided p = {:.4} ({} ties). The \
         quality criterion now takes this figure (source `human`, counted); the key-phrase proxy stays in \
         `summary.proxy_quality`.\n",
        h.rated_pairs,
        h.total_pairs,
        h.sheet,
        h.means["field"],
        h.means["message_passing"],
        h.mean_difference,
        h.topics,
        w.p_value,
        w.zeros
    )
}

/// Restates the recommendation at the top of `report.md` and puts the
/// human section after it (replacing an earlier one).
fn rewrite_report(path: &Path, s: &::experiment::summary::Summary, h: &Human) -> Result<PathBuf> {
    use super::markdown::{recommendation_md, RECOMMENDATION_END, RECOMMENDATION_START};
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let replace = |text: &str, start: &str, end: &str, with: &str| -> Option<String> {
        let a = text.find(start)?;
        let b = text[a..].find(end)? + a + end.len();
        Some(format!("{}{start}{with}{end}{}", &text[..a], &text[b..]))
    };
    let text = replace(&text, RECOMMENDATION_START, RECOMMENDATION_END, &recommendation_md(s))
        .with_context(|| format!("{}: no recommendation block to restate", path.display()))?;
    let text = match replace(&text, HUMAN_START, HUMAN_END, &human_md(h)) {
        Some(t) => t,
        None => {
            let at = text.find(RECOMMENDATION_END).map_or(0, |i| i + RECOMMENDATION_END.len());
            format!("{}\n{HUMAN_START}{}{HUMAN_END}{}", &text[..at], human_md(h), &text[at..])
        }
    };
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_path_buf())
}
