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
    let path = trace_of(dir)?;
    let sink = std::io::BufWriter::new(sink);
    let writing = "cannot write the export";
    let io = |e: std::io::Error| Error::Io { what: writing.to_string(), source: e };
    let json = |e: serde_json::Error| match e.io_error_kind() {
        Some(kind) => io(std::io::Error::from(kind)),
        None => Error::Input(format!("cannot encode an outcome: {e}")),
    };
    let mut reader = open_records(&path)?;
    let mut people: Option<(Traits, u64, Option<engine::config::panel::PanelSection>)> = None;
    let mut persona: Option<u32> = None;
    let mut out = match format {
        Format::Csv => {
            let mut w = csv::Writer::from_writer(sink);
            w.write_record(COLUMNS).map_err(|e| csv_error(e, writing))?;
            Sink::Csv(Box::new(w))
        }
        Format::Jsonl => Sink::Json(sink),
    };
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
                    match &mut out {
                        Sink::Csv(w) => {
                            w.write_record(csv_row(o, &profile()?, traits)).map_err(|e| csv_error(e, writing))?
                        }
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
                }
            }
            Record::Tick(_) | Record::End(_) | Record::TickPart(_) | Record::TickCommit(_) | Record::Split(_) => {}
        }
    }
    match &mut out {
        Sink::Csv(w) => w.flush().map_err(io)?,
        Sink::Json(sink) => sink.flush().map_err(io)?,
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

fn csv_row(o: &Outcome, p: &Profile, traits: &Traits) -> Vec<String> {
    let band = traits
        .age_bands
        .iter()
        .find(|b| (b.min..=b.max).contains(&p.age))
        .map_or(String::new(), |b| format!("{}-{}", b.min, b.max));
    let (status, stage, reason) = match &o.status {
        Status::Ok => ("ok", String::new(), String::new()),
        Status::Failed { stage, reason } => ("failed", format!("{stage:?}"), reason.clone()),
        Status::Refused { reason } => ("refused", String::new(), reason.clone()),
    };
    let r = o.reaction.as_ref();
    let s = &o.spend;
    let embedding = s.retrieval_embedding_estimate.nano_usd + s.memory_embedding_estimate.nano_usd;
    let total = s.total();
    vec![
        o.tick.to_string(),
        o.position.to_string(),
        label(o.persona),
        p.name.clone(),
        if p.given.is_some() && p.age == 0 { String::new() } else { p.age.to_string() },
        band,
        p.city.to_string(),
        p.occupation.to_string(),
        p.income.to_string(),
        p.interests.iter().map(|i| &**i).collect::<Vec<_>>().join(";"),
        // A persona given by data has the sensitivity its row gives: none.
        if p.given.is_some() { String::new() } else { p.price_sensitivity.to_string() },
        o.stimulus.clone(),
        o.exposure.to_string(),
        status.into(),
        stage,
        reason,
        r.map_or(String::new(), |r| r.intent.to_string()),
        r.map_or(String::new(), |r| r.sentiment.to_string()),
        r.map_or(String::new(), |r| r.importance.to_string()),
        o.ssr.as_ref().map_or(String::new(), |x| x.expected.to_string()),
        s.chat.nano_usd.to_string(),
        embedding.to_string(),
        total.nano_usd.to_string(),
        total.input_tokens.to_string(),
        total.output_tokens.to_string(),
        r.map_or(String::new(), |r| r.text.clone()),
        p.given.as_ref().map_or(String::new(), |g| g.row.clone()),
    ]
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
        w.write_record(csv_row(&o, &profile, &traits)).expect("row");
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
