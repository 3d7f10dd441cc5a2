//! `sim-cli export outcomes`: one row per job, from the trace: JSON lines
//! (byte for byte what a run writes to `outcomes.jsonl`) or CSV with the
//! persona's traits as columns, for pandas and R.

use crate::prelude::trace_path;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
#[cfg(test)]
use engine::persona::profile::generate;
use engine::persona::profile::{draw_from, Profile, Traits};
use engine::store::trace::file::open_records;
use engine::store::trace::Record;
use engine::turn::{Outcome, Status};
use std::io::Write;
use std::path::PathBuf;

/// Exports.
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// One row per job of a recorded run.
    Outcomes(OutcomesArgs),
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// JSON lines, as `outcomes.jsonl`.
    Jsonl,
    /// CSV with a header row and the persona's traits as columns.
    Csv,
}

/// Options of `sim-cli export outcomes`.
#[derive(Debug, Args)]
#[command(after_help = "JSON lines are byte for byte the run's outcomes.jsonl, unless --with-traits adds a\n\
    \"traits\" object to each line. CSV columns: tick, position, persona, the persona's traits (name,\n\
    age, age_band, city, occupation, income, interests joined by ';', price_sensitivity), stimulus,\n\
    exposure, status, failed_stage, reason, intent, sentiment, importance, ssr_expected, chat and\n\
    embedding costs (nano-USD), tokens, and the reaction text; quoted as RFC 4180 says. Examples:\n\n  \
    sim-cli export outcomes runs/demo --format csv --out outcomes.csv\n  \
    python -c \"import pandas; print(pandas.read_csv('outcomes.csv').groupby('age_band').intent.mean())\"")]
pub struct OutcomesArgs {
    /// The run directory (or its trace file).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// jsonl or csv.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// JSON lines: add each persona's traits.
    #[arg(long)]
    pub with_traits: bool,
    /// Only this tick.
    #[arg(long, value_name = "N")]
    pub tick: Option<u32>,
    /// Only this persona (index or label such as p-00007).
    #[arg(long, value_name = "ID")]
    pub persona: Option<String>,
    /// Write here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs an `export` subcommand. A reader that stops early (`| head`)
/// ends the export quietly.
pub fn export(cmd: ExportCommand) -> Result<()> {
    let ExportCommand::Outcomes(args) = cmd;
    match outcomes(&args) {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io =
            c.downcast_ref::<std::io::Error>().or_else(|| match c.downcast_ref::<csv::Error>().map(csv::Error::kind) {
                Some(csv::ErrorKind::Io(io)) => Some(io),
                _ => None,
            });
        io.is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn outcomes(args: &OutcomesArgs) -> Result<()> {
    let path = trace_path(&args.dir)?;
    let sink: Box<dyn Write> = match &args.out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("--out {}: cannot create it", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let sink = std::io::BufWriter::new(sink);
    let mut reader = open_records(&path)?;
    let mut people: Option<(Traits, u64, Option<engine::config::panel::PanelSection>)> = None;
    let mut persona: Option<u32> = None;
    let mut out = match args.format {
        Format::Csv => {
            let mut w = csv::Writer::from_writer(sink);
            w.write_record(COLUMNS)?;
            Sink::Csv(Box::new(w))
        }
        Format::Jsonl => Sink::Json(sink),
    };
    let mut rows = 0u64;
    while let Some(record) = reader.next_record()? {
        match record {
            Record::Header(h) => {
                let traits = Traits::from_toml(&h.traits_source, "trace header trait table")?;
                if let Some(n) = args.tick.filter(|n| !(1..=h.ticks).contains(n)) {
                    bail!("--tick {n}: the run has ticks 1 to {}", h.ticks);
                }
                persona = args.persona.as_deref().map(|p| crate::prelude::parse_persona(p, h.personas)).transpose()?;
                let panel = engine::config::RawConfig::from_toml(&h.config_toml, "trace header config")?.panel;
                people = Some((traits, h.seed, panel));
            }
            Record::Tick(t) if args.tick.is_none_or(|n| n == t.tick) => {
                let Some((traits, seed, panel)) = &people else {
                    bail!("{}: the first frame is not a header", path.display())
                };
                for o in t.outcomes.iter().filter(|o| persona.is_none_or(|p| p == o.persona)) {
                    rows += 1;
                    let profile = || {
                        draw_from(panel.as_ref(), traits, *seed, o.persona)
                            .with_context(|| format!("{}: persona {} has no panel row", path.display(), o.persona))
                    };
                    match &mut out {
                        Sink::Csv(w) => w.write_record(csv_row(o, &profile()?, traits))?,
                        Sink::Json(sink) if args.with_traits => {
                            let mut v = serde_json::to_value(o)?;
                            v["traits"] = traits_json(&profile()?)?;
                            serde_json::to_writer(&mut *sink, &v)?;
                            sink.write_all(b"\n")?;
                        }
                        Sink::Json(sink) => {
                            serde_json::to_writer(&mut *sink, o)?;
                            sink.write_all(b"\n")?;
                        }
                    }
                }
            }
            Record::Tick(_) | Record::End(_) | Record::TickPart(_) | Record::TickCommit(_) | Record::Split(_) => {}
        }
    }
    match &mut out {
        Sink::Csv(w) => w.flush()?,
        Sink::Json(sink) => sink.flush()?,
    }
    if let Some(p) = &args.out {
        eprintln!("Wrote {rows} rows to {}", p.display());
    }
    Ok(())
}

/// Where rows go.
enum Sink<W: Write> {
    Csv(Box<csv::Writer<W>>),
    Json(W),
}

const COLUMNS: [&str; 27] = [
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
fn traits_json(p: &Profile) -> Result<serde_json::Value> {
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
        engine::persona::profile::label(o.persona),
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
