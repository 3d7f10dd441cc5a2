//! Exporting a run's outcomes: one row per job, from the trace: JSON lines
//! (byte for byte what a run writes to `outcomes.jsonl`) or CSV with the
//! persona's traits as columns, for pandas and R.

use crate::dir::trace_of;
use crate::error::{refuse, Error, Result};
use engine::persona::profile::{draw_from, label, Profile, Traits};
use engine::store::trace::file::open_records;
use engine::store::trace::Record;
use engine::turn::{Outcome, Status};
use std::io::Write;
use std::path::Path;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// JSON lines, as `outcomes.jsonl`.
    #[default]
    Jsonl,
    /// CSV with a header row ([`COLUMNS`]) and the persona's traits as columns.
    Csv,
}

/// Which rows, and what each JSON line carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this tick.
    pub tick: Option<u32>,
    /// Only this persona: an index or a label such as `p-00007`.
    pub persona: Option<String>,
    /// JSON lines: add each persona's traits.
    pub with_traits: bool,
}

/// A persona named by index or label (`7` or `p-00007`) in a panel of `personas`.
pub fn persona_index(s: &str, personas: u32) -> Result<u32> {
    let digits = s.strip_prefix("p-").unwrap_or(s);
    let Ok(id) = digits.parse::<u32>() else {
        refuse!("--persona {s:?}: expected an index or a label like p-00007");
    };
    if id >= personas {
        refuse!("--persona {s}: the run has personas p-00000 to {}", label(personas.saturating_sub(1)));
    }
    Ok(id)
}

/// A CSV error as this crate's: an I/O error stays one (a reader that
/// stopped early is told by its kind).
pub(crate) fn csv_error(e: csv::Error, what: &str) -> Error {
    if !e.is_io_error() {
        return Error::Input(format!("{what}: {e}"));
    }
    let text = e.to_string();
    if let csv::ErrorKind::Io(io) = e.into_kind() {
        return Error::Io { what: what.to_string(), source: io };
    }
    Error::Input(format!("{what}: {text}"))
}

/// Writes the outcomes of the run in `dir` (a run directory or its trace)
/// to `sink` in `format`, as `filter` selects; returns the rows written.
pub fn write_outcomes(dir: &Path, format: Format, filter: &Filter, sink: impl Write) -> Result<u64> {
    let sink = std::io::BufWriter::new(sink);
    let writing = "cannot write the export";
    let io = |e: std::io::Error| Error::Io { what: writing.to_string(), source: e };
    let json = |e: serde_json::Error| match e.io_error_kind() {
        Some(kind) => io(std::io::Error::from(kind)),
        None => Error::Input(format!("cannot encode an outcome: {e}")),
    };
    let mut out = match format {
        Format::Csv => {
            let mut w = csv::Writer::from_writer(sink);
            w.write_record(COLUMNS).map_err(|e| csv_error(e, writing))?;
            Sink::Csv(Box::new(w))
        }
        Format::Jsonl => Sink::Json(sink),
    };
    let rows = walk(dir, filter, |o, profile, traits| {
        match &mut out {
            Sink::Csv(w) => w.write_record(row(o, &profile()?, traits).csv()).map_err(|e| csv_error(e, writing))?,
            Sink::Json(sink) if filter.with_traits => {
                let mut v = serde_json::to_value(o).map_err(json)?;
                v["traits"] = traits_json(&profile()?).map_err(json)?;
                serde_json::to_writer(&mut *sink, &v).map_err(json)?;
                sink.write_all(b"\n").map_err(io)?;
            }
            Sink::Json(sink) => {
                serde_json::to_writer(&mut *sink, o).map_err(json)?;
                sink.write_all(b"\n").map_err(io)?;
            }
        }
        Ok(())
    })?;
    match &mut out {
        Sink::Csv(w) => w.flush().map_err(io)?,
        Sink::Json(sink) => sink.flush().map_err(io)?,
    }
    Ok(rows)
}

/// The outcomes of the run in `dir` as typed rows (what the CSV export
/// writes, one per job, in trace order), as `filter` selects; a binding's
/// table is built from them. `filter.with_traits` changes nothing here:
/// the persona's traits are columns.
pub fn rows(dir: &Path, filter: &Filter) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    walk(dir, filter, |o, profile, traits| {
        out.push(row(o, &profile()?, traits));
        Ok(())
    })?;
    Ok(out)
}

/// Calls `visit` with each outcome of the run in `dir` that `filter`
/// selects, a way to draw its persona's profile, and the run's trait
/// table; returns how many it visited.
fn walk(
    dir: &Path,
    filter: &Filter,
    mut visit: impl FnMut(&Outcome, &dyn Fn() -> Result<Profile>, &Traits) -> Result<()>,
) -> Result<u64> {
    let path = trace_of(dir)?;
    let mut reader = open_records(&path)?;
    let mut people: Option<(Traits, u64, Option<engine::config::panel::PanelSection>)> = None;
    let mut persona: Option<u32> = None;
    let mut rows = 0u64;
    while let Some(record) = reader.next_record()? {
        match record {
            Record::Header(h) => {
                let traits = Traits::from_toml(&h.traits_source, "trace header trait table")?;
                if let Some(n) = filter.tick.filter(|n| !(1..=h.ticks).contains(n)) {
                    refuse!("--tick {n}: the run has ticks 1 to {}", h.ticks);
                }
                persona = filter.persona.as_deref().map(|p| persona_index(p, h.personas)).transpose()?;
                let panel = engine::config::RawConfig::from_toml(&h.config_toml, "trace header config")?.panel;
                people = Some((traits, h.seed, panel));
            }
            Record::Tick(t) if filter.tick.is_none_or(|n| n == t.tick) => {
                let Some((traits, seed, panel)) = &people else {
                    refuse!("{}: the first frame is not a header", path.display())
                };
                for o in t.outcomes.iter().filter(|o| persona.is_none_or(|p| p == o.persona)) {
                    rows += 1;
                    let profile = || match draw_from(panel.as_ref(), traits, *seed, o.persona) {
                        Some(p) => Ok(p),
                        None => {
                            Err(Error::Input(format!("{}: persona {} has no panel row", path.display(), o.persona)))
                        }
                    };
                    visit(o, &profile, traits)?;
                }
            }
            Record::Tick(_) | Record::End(_) | Record::TickPart(_) | Record::TickCommit(_) | Record::Split(_) => {}
        }
    }
    Ok(rows)
}

/// Where rows go.
enum Sink<W: Write> {
    Csv(Box<csv::Writer<W>>),
    Json(W),
}

/// The CSV columns, in order.
pub const COLUMNS: [&str; 27] = [
    "tick",
    "position",
    "persona",
    "name",
    "age",
    "age_band",
    "city",
    "occupation",
    "income",
    "interests",
    "price_sensitivity",
    "stimulus",
    "exposure",
    "status",
    "failed_stage",
    "reason",
    "intent",
    "sentiment",
    "importance",
    "ssr_expected",
    "chat_nano_usd",
    "embedding_nano_usd",
    "total_nano_usd",
    "input_tokens",
    "output_tokens",
    "reaction",
    "respondent",
];

/// A persona's traits for `--with-traits`: the whole profile, or for a
/// persona given by data its name, row id and the row's own traits.
fn traits_json(p: &Profile) -> serde_json::Result<serde_json::Value> {
    Ok(match &p.given {
        Some(g) => serde_json::json!({"id": p.id, "name": p.name, "row": g.row, "traits": g.traits}),
        None => serde_json::to_value(p)?,
    })
}

/// One job's row of the export: [`COLUMNS`], typed. `None` is an empty
/// CSV cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The tick (from 1).
    pub tick: u32,
    /// The job's position in its tick.
    pub position: u32,
    /// The persona's label (`p-00007`).
    pub persona: String,
    /// Its name.
    pub name: String,
    /// Its age; none for a persona given by data whose row gives none.
    pub age: Option<u8>,
    /// The trait table's age band that holds the age (`25-34`), if any.
    pub age_band: Option<String>,
    /// Its city.
    pub city: String,
    /// Its occupation.
    pub occupation: String,
    /// Its income band.
    pub income: String,
    /// Its interests (`;`-joined in CSV).
    pub interests: Vec<String>,
    /// Its price sensitivity; none for a persona given by data.
    pub price_sensitivity: Option<f32>,
    /// The stimulus it met.
    pub stimulus: String,
    /// How many times it had met that stimulus before.
    pub exposure: u32,
    /// `ok`, `failed` or `refused`.
    pub status: String,
    /// The stage a failed job failed in.
    pub failed_stage: Option<String>,
    /// Why it failed or was refused.
    pub reason: Option<String>,
    /// The reply's purchase intent (1-5).
    pub intent: Option<u8>,
    /// The reply's sentiment (-1 to 1).
    pub sentiment: Option<f32>,
    /// The reply's importance (1-10).
    pub importance: Option<u8>,
    /// The SSR rating's expected value (1-5), when SSR rated the reply.
    pub ssr_expected: Option<f64>,
    /// The job's chat cost.
    pub chat_nano_usd: u64,
    /// Its share of embedding costs (an estimate).
    pub embedding_nano_usd: u64,
    /// Both.
    pub total_nano_usd: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The reaction's text.
    pub reaction: Option<String>,
    /// The panel row's id, for a persona given by data.
    pub respondent: Option<String>,
}

impl Row {
    /// The CSV cells, in [`COLUMNS`] order.
    pub fn csv(&self) -> Vec<String> {
        let cell = |v: Option<String>| v.unwrap_or_default();
        vec![
            self.tick.to_string(),
            self.position.to_string(),
            self.persona.clone(),
            self.name.clone(),
            cell(self.age.map(|a| a.to_string())),
            cell(self.age_band.clone()),
            self.city.clone(),
            self.occupation.clone(),
            self.income.clone(),
            self.interests.join(";"),
            cell(self.price_sensitivity.map(|p| p.to_string())),
            self.stimulus.clone(),
            self.exposure.to_string(),
            self.status.clone(),
            cell(self.failed_stage.clone()),
            cell(self.reason.clone()),
            cell(self.intent.map(|i| i.to_string())),
            cell(self.sentiment.map(|s| s.to_string())),
            cell(self.importance.map(|i| i.to_string())),
            cell(self.ssr_expected.map(|e| e.to_string())),
            self.chat_nano_usd.to_string(),
            self.embedding_nano_usd.to_string(),
            self.total_nano_usd.to_string(),
            self.input_tokens.to_string(),
            self.output_tokens.to_string(),
            cell(self.reaction.clone()),
            cell(self.respondent.clone()),
        ]
    }
}

fn row(o: &Outcome, p: &Profile, traits: &Traits) -> Row {
    let band =
        traits.age_bands.iter().find(|b| (b.min..=b.max).contains(&p.age)).map(|b| format!("{}-{}", b.min, b.max));
    let (status, failed_stage, reason) = match &o.status {
        Status::Ok => ("ok", None, None),
        Status::Failed { stage, reason } => ("failed", Some(format!("{stage:?}")), Some(reason.clone())),
        Status::Refused { reason } => ("refused", None, Some(reason.clone())),
    };
    let r = o.reaction.as_ref();
    let s = &o.spend;
    let total = s.total();
    Row {
        tick: o.tick,
        position: o.position,
        persona: label(o.persona),
        name: p.name.clone(),
        age: (p.given.is_none() || p.age != 0).then_some(p.age),
        age_band: band,
        city: p.city.to_string(),
        occupation: p.occupation.to_string(),
        income: p.income.to_string(),
        interests: p.interests.iter().map(|i| i.to_string()).collect(),
        // A persona given by data has the sensitivity its row gives: none.
        price_sensitivity: p.given.is_none().then_some(p.price_sensitivity),
        stimulus: o.stimulus.clone(),
        exposure: o.exposure,
        status: status.into(),
        failed_stage,
        reason,
        intent: r.map(|r| r.intent),
        sentiment: r.map(|r| r.sentiment),
        importance: r.map(|r| r.importance),
        ssr_expected: o.ssr.as_ref().map(|x| x.expected),
        chat_nano_usd: s.chat.nano_usd,
        embedding_nano_usd: s.retrieval_embedding_estimate.nano_usd + s.memory_embedding_estimate.nano_usd,
        total_nano_usd: total.nano_usd,
        input_tokens: total.input_tokens,
        output_tokens: total.output_tokens,
        reaction: r.map(|r| r.text.clone()),
        respondent: p.given.as_ref().map(|g| g.row.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::persona::profile::generate;

    #[test]
    fn csv_rows_round_trip_with_commas_quotes_and_newlines() {
        let traits = Traits::builtin();
        let mut o = Outcome::new(2, 7, 3, "trailflex-shoe".into(), 0);
        let text = "Nice, but \"pricey\"; I'd wait,\nmaybe next year.\r\nOr not.";
        o.reaction =
            Some(engine::persona::reply::Reaction { text: text.into(), sentiment: -0.25, intent: 2, importance: 4 });
        let profile = generate(&traits, 42, 3);
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(COLUMNS).expect("header");
        w.write_record(row(&o, &profile, &traits).csv()).expect("row");
        let bytes = w.into_inner().expect("flushed");
        let mut r = csv::Reader::from_reader(&bytes[..]);
        let header: Vec<String> = r.headers().expect("header").iter().map(str::to_string).collect();
        let rows: Vec<csv::StringRecord> = r.records().collect::<std::result::Result<_, _>>().expect("parses");
        assert_eq!(rows.len(), 1);
        let get = |name: &str| rows[0][header.iter().position(|h| h == name).expect("column")].to_string();
        assert_eq!(get("reaction"), text);
        assert_eq!(
            (get("tick"), get("persona"), get("intent"), get("status")),
            ("2".into(), "p-00003".into(), "2".into(), "ok".into())
        );
        assert_eq!(get("interests"), profile.interests.join(";"));
        assert_eq!(get("city"), &*profile.city);
    }
}
