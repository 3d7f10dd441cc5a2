//! `[panel]`: a panel given by data, one persona per respondent.
//!
//! Nobody writes this section by hand: `sim-cli run --panel FILE
//! --panel-map MAP` reads the file (the `survey` crate does) and resolves
//! it to the rows below, so that the run's configuration, its trace header
//! and its digest hold the personas exactly as they were given.

use serde::{Deserialize, Serialize};

/// One respondent: a persona given by data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Given {
    /// The row id, so every answer joins back to its respondent.
    pub row: String,
    /// The traits the row gives, in words, in the panel's column order:
    /// `(trait, value)`. A trait the row does not give is absent.
    pub traits: Vec<(String, String)>,
}

impl Given {
    /// The traits, one a line: `- Age: 36`.
    pub fn describe(&self) -> String {
        let mut out = String::with_capacity(32 * self.traits.len());
        for (name, value) in &self.traits {
            let mut chars = name.chars();
            out.push_str("- ");
            out.extend(chars.next().map(|c| c.to_uppercase()).into_iter().flatten());
            out.push_str(chars.as_str());
            out.push_str(": ");
            out.push_str(value);
            out.push('\n');
        }
        out
    }

    /// The value of trait `name` (case-insensitive), if the row gives it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.traits.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The panel a run's personas come from, in persona order: persona `i` is
/// `rows[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanelSection {
    /// The file the rows were read from (shown, never read again).
    pub source: String,
    /// The rows.
    pub rows: Vec<Given>,
}

impl PanelSection {
    /// Why the section is unusable, if it is: no rows, an empty or
    /// repeated row id.
    pub fn problem(&self) -> Option<String> {
        if self.rows.is_empty() {
            return Some("the panel has no rows".into());
        }
        let mut seen = std::collections::HashSet::new();
        for r in &self.rows {
            if r.row.is_empty() {
                return Some("a row id is empty".into());
            }
            if !seen.insert(r.row.as_str()) {
                return Some(format!("row id {:?} appears twice", r.row));
            }
        }
        None
    }
}
