//! Panels from data: one respondent per row of a CSV file, described by a
//! panel map that says which column is the row id and which columns are
//! which traits.
//!
//! ```toml
//! [panel.columns]
//! id = "id"                                   # the row id's column
//! age = { trait = "age" }                     # a number, stated as it is
//! educ = { trait = "education", labels = { "5" = "an associate degree" } }
//! TVnews = { trait = "TV news", format = "{} days a week" }
//! popul = { ignore = true }                   # read, never shown
//! ```
//!
//! Every column of the file must be mapped or ignored, so a column is
//! never dropped by accident. A coded column lists its labels, and a value
//! without one is an error; an empty cell leaves that trait out of the
//! persona rather than inventing it. The `age` trait must be a whole
//! number from 0 to 120; any trait may give its own `range = [lo, hi]`.

use crate::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

/// How one column is read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnSpec {
    /// The trait it gives, in words (`age`, `education`, `household
    /// income`); the persona states it as `Trait: value`.
    #[serde(rename = "trait")]
    pub trait_name: Option<String>,
    /// Words for coded values (`"5" = "an associate degree"`). When
    /// given, every non-empty value needs one.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// How an unlabelled value is stated, `{}` standing for it
    /// (`"{} days a week"`).
    pub format: Option<String>,
    /// The values a number must lie in, inclusive.
    pub range: Option<[f64; 2]>,
    /// Read but never shown to the model.
    #[serde(default)]
    pub ignore: bool,
}

/// A parsed panel map.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelMap {
    /// The row id's column.
    pub id: String,
    /// Every other column, by name.
    pub columns: BTreeMap<String, ColumnSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    panel: MapSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapSection {
    columns: BTreeMap<String, toml::Value>,
}

impl PanelMap {
    /// Parses a panel map; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<PanelMap> {
        let spec = |field: &str, cause: String| Error::Spec { file: file.into(), field: field.into(), cause };
        let parsed: MapFile =
            toml::from_str(text).map_err(|e| Error::Parse { file: file.into(), cause: e.to_string() })?;
        let mut id = None;
        let mut columns = BTreeMap::new();
        for (name, value) in parsed.panel.columns {
            if let (true, toml::Value::String(column)) = (name == "id", &value) {
                id = Some(column.clone());
                continue;
            }
            let field = format!("panel.columns.{name}");
            let c: ColumnSpec = value.try_into().map_err(|e: toml::de::Error| spec(&field, e.message().to_string()))?;
            match (&c.trait_name, c.ignore) {
                (Some(_), true) => return Err(spec(&field, "a column is either a trait or ignored, not both".into())),
                (None, false) => return Err(spec(&field, "give it a `trait = \"...\"`, or `ignore = true`".into())),
                (Some(t), false) if t.trim().is_empty() => {
                    return Err(spec(&field, "the trait's name is empty".into()))
                }
                (Some(_), false) | (None, true) => {}
            }
            if let Some(f) = &c.format {
                if !f.contains("{}") {
                    return Err(spec(&field, format!("format {f:?} has no {{}} for the value")));
                }
            }
            if let Some([lo, hi]) = c.range {
                if lo > hi || lo.is_nan() || hi.is_nan() {
                    return Err(spec(&field, format!("range [{lo}, {hi}] is empty")));
                }
            }
            columns.insert(name, c);
        }
        let id = id.ok_or_else(|| spec("panel.columns.id", "name the row id's column: id = \"...\"".into()))?;
        Ok(PanelMap { id, columns })
    }
}

/// One respondent: a row of the panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Respondent {
    /// The row id, so every answer joins back to its row.
    pub id: String,
    /// The traits the row gives, in the file's column order:
    /// (trait, its value in words). Empty cells are left out.
    pub traits: Vec<(String, String)>,
    /// Every mapped or ignored column's raw value, for subgroups.
    pub values: BTreeMap<String, String>,
}

impl Respondent {
    /// The raw value of `column` as a number, if it is one.
    pub fn number(&self, column: &str) -> Option<f64> {
        self.values.get(column)?.trim().parse().ok()
    }

    /// The persona's description, one trait a line (`- Age: 36`), as a
    /// run's persona given by this row states it.
    pub fn describe(&self) -> String {
        self.given().describe()
    }

    /// The row as a run's `[panel]` holds it.
    pub fn given(&self) -> engine::config::panel::Given {
        engine::config::panel::Given { row: self.id.clone(), traits: self.traits.clone() }
    }
}

/// A panel read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Its rows, in file order.
    pub respondents: Vec<Respondent>,
}

impl Panel {
    /// The indices of a seeded subsample of `k` rows, in file order: the
    /// first `k` of a seeded shuffle. `None` when the panel has fewer rows.
    pub fn subsample(&self, k: usize, seed: u64) -> Option<Vec<usize>> {
        let n = self.respondents.len();
        if k > n {
            return None;
        }
        let mut order: Vec<usize> = (0..n).collect();
        let mut s = engine::rng::Stream::derive(seed, 0, 0, engine::rng::Purpose::Survey);
        for i in 0..k {
            let j = i + s.below(n - i);
            order.swap(i, j);
        }
        let mut chosen = order[..k].to_vec();
        chosen.sort_unstable();
        Some(chosen)
    }

    /// Reads a panel from CSV `text` by `map`; `file` names it in errors,
    /// which also name the row id and the column.
    pub fn from_csv(text: &str, file: &str, map: &PanelMap) -> Result<Panel> {
        let (mut reader, headers) = crate::csv_with_headers(text, file)?;
        let id_at = headers.iter().position(|h| *h == map.id).ok_or_else(|| Error::Spec {
            file: file.into(),
            field: map.id.clone(),
            cause: "the panel map's id column is not in the file".into(),
        })?;
        for h in &headers {
            if *h != map.id && !map.columns.contains_key(h) {
                return Err(Error::Spec {
                    file: file.into(),
                    field: h.clone(),
                    cause: "column not in the panel map: map it to a trait, or mark it `{ ignore = true }`".into(),
                });
            }
        }
        if let Some(missing) = map.columns.keys().find(|c| !headers.contains(c)) {
            return Err(Error::Spec {
                file: file.into(),
                field: missing.clone(),
                cause: "the panel map names this column but the file has none".into(),
            });
        }
        let mut respondents = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (n, record) in reader.records().enumerate() {
            let line = n + 2;
            let record = record.map_err(|e| Error::Parse { file: file.into(), cause: format!("line {line}: {e}") })?;
            let id = record.get(id_at).unwrap_or("").to_string();
            let row_error = |column: &str, cause: String| Error::Row {
                file: file.into(),
                row: if id.is_empty() { format!("line {line}") } else { id.clone() },
                column: column.into(),
                cause,
            };
            if id.is_empty() {
                return Err(row_error(&map.id, "the row id is empty".into()));
            }
            if !seen.insert(id.clone()) {
                return Err(row_error(&map.id, "this row id appears twice".into()));
            }
            let mut traits = Vec::new();
            let mut values = BTreeMap::new();
            for (h, value) in headers.iter().zip(record.iter()) {
                let Some(spec) = map.columns.get(h) else { continue };
                values.insert(h.clone(), value.to_string());
                if value.is_empty() {
                    continue;
                }
                let is_age = spec.trait_name.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("age"));
                let range = spec.range.or(is_age.then_some([0.0, 120.0]));
                if let Some([lo, hi]) = range {
                    match value.parse::<f64>() {
                        Ok(x) if (lo..=hi).contains(&x) && (!is_age || x.fract() == 0.0) => {}
                        Ok(_) | Err(_) => {
                            let what = if is_age { "a whole number" } else { "a number" };
                            return Err(row_error(h, format!("{value:?} is not {what} from {lo} to {hi}")));
                        }
                    }
                }
                if spec.ignore {
                    continue;
                }
                let words = if spec.labels.is_empty() {
                    spec.format.as_deref().map_or_else(|| value.to_string(), |f| f.replace("{}", value))
                } else {
                    match spec.labels.get(value) {
                        Some(label) => label.clone(),
                        None => return Err(row_error(h, format!("{value:?} has no label in the panel map"))),
                    }
                };
                traits.push((spec.trait_name.clone().unwrap_or_default(), words));
            }
            respondents.push(Respondent { id, traits, values });
        }
        if respondents.is_empty() {
            return Err(Error::Spec { file: file.into(), field: "rows".into(), cause: "the panel has no rows".into() });
        }
        Ok(Panel { respondents })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"
[panel.columns]
id = "id"
age = { trait = "age" }
educ = { trait = "education", labels = { "3" = "a high school diploma", "5" = "a college degree" } }
tv = { trait = "TV news", format = "{} days a week" }
popul = { ignore = true }
"#;

    fn map() -> PanelMap {
        PanelMap::from_toml(MAP, "map.toml").expect("the map parses")
    }

    #[test]
    fn rows_become_respondents_with_their_traits_in_words() {
        let csv = "id,age,educ,tv,popul\nr1,36,3,7,190\nr2,,5,0,4\n";
        let panel = Panel::from_csv(csv, "panel.csv", &map()).expect("reads");
        let r1 = &panel.respondents[0];
        assert_eq!(r1.id, "r1");
        assert_eq!(r1.describe(), "- Age: 36\n- Education: a high school diploma\n- TV news: 7 days a week\n");
        assert_eq!(r1.number("popul"), Some(190.0), "ignored columns are kept for subgroups");
        let r2 = &panel.respondents[1];
        assert_eq!(r2.traits.len(), 2, "an empty age is left out, not invented");
        assert!(!r2.describe().contains("Age"));
    }

    #[test]
    fn bad_rows_and_maps_name_file_row_and_column() {
        let err = |csv: &str| Panel::from_csv(csv, "panel.csv", &map()).expect_err("refused").to_string();
        assert_eq!(
            err("id,age,educ,tv,popul\nr1,36,3,7,1\nr2,two hundred,3,1,1\n"),
            "panel.csv: row r2, column age: \"two hundred\" is not a whole number from 0 to 120"
        );
        assert_eq!(
            err("id,age,educ,tv,popul\nr1,36,4,7,1\n"),
            "panel.csv: row r1, column educ: \"4\" has no label in the panel map"
        );
        assert_eq!(
            err("id,age,educ,tv,popul\nr1,36,3,7,1\nr1,37,3,7,1\n"),
            "panel.csv: row r1, column id: this row id appears twice"
        );
        assert!(err("id,age,educ,tv,popul,income\nr1,36,3,7,1,5\n").contains("income: column not in the panel map"));
        assert!(err("id,age,educ,tv\nr1,36,3,7\n").contains("popul: the panel map names this column"));
        let bad_map = |text: &str| PanelMap::from_toml(text, "map.toml").expect_err("refused").to_string();
        assert!(bad_map("[panel.columns]\nage = { trait = \"age\" }\n").contains("panel.columns.id"));
        assert!(bad_map("[panel.columns]\nid = \"id\"\nx = { }\n").contains("ignore = true"));
        assert!(bad_map("[panel.columns]\nid = \"id\"\nx = { trait = \"t\", format = \"days\" }\n").contains("no {}"));
    }
}
