//! Research topics: source passages and the gold findings a good report
//! carries, each with an id, key phrases and an importance.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A source passage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Passage {
    /// Id, unique in the topic.
    pub id: String,
    /// The text, in sentences.
    pub text: String,
}

/// A gold finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Id, unique in the topic.
    pub id: String,
    /// The passage it comes from.
    pub passage: String,
    /// Key phrases; a report carries the finding when it contains all of
    /// them (case-insensitive).
    pub phrases: Vec<String>,
    /// 1 (minor) to 3 (central).
    pub importance: u32,
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topic {
    /// Short name.
    pub name: String,
    /// Title.
    pub title: String,
    /// The question the report answers.
    pub question: String,
    /// Sources, in the order the researcher reads them.
    pub passages: Vec<Passage>,
    /// Gold findings.
    pub findings: Vec<Finding>,
}

/// The built-in topics, by name.
pub const BUILTIN_TOPICS: [(&str, &str); 5] = [
    ("grid-storage", include_str!("../../../../fixtures/topics/grid-storage.toml")),
    ("sleep-wearables", include_str!("../../../../fixtures/topics/sleep-wearables.toml")),
    ("urban-heat", include_str!("../../../../fixtures/topics/urban-heat.toml")),
    ("remote-work", include_str!("../../../../fixtures/topics/remote-work.toml")),
    ("antibiotic-resistance", include_str!("../../../../fixtures/topics/antibiotic-resistance.toml")),
];

/// Splits text into sentences (at `.`, `!` or `?` followed by a space or
/// the end, not after a digit-dot-digit such as `1.27`).
pub fn sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let (mut out, mut cur) = (Vec::new(), String::new());
    for (i, c) in chars.iter().enumerate() {
        cur.push(*c);
        let end = matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        if end {
            let s = cur.trim().to_string();
            if !s.is_empty() {
                out.push(s);
            }
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

impl Topic {
    /// Parses and validates a topic; `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Topic> {
        let topic: Topic =
            toml::from_str(text).map_err(|e| Error::Parse { source_name: source_name.into(), source: Box::new(e) })?;
        topic.validate(source_name)?;
        Ok(topic)
    }

    /// Checks ids, references, phrases and importances.
    pub fn validate(&self, source_name: &str) -> Result<()> {
        let bad = |field: String, cause: String| Error::Fixture { source_name: source_name.into(), field, cause };
        for (field, v) in [("name", &self.name), ("title", &self.title), ("question", &self.question)] {
            if v.trim().is_empty() {
                return Err(bad(field.into(), "must not be empty".into()));
            }
        }
        if self.passages.is_empty() || self.findings.is_empty() {
            return Err(bad("passages".into(), "a topic needs at least one passage and one finding".into()));
        }
        let mut ids = BTreeSet::new();
        for (i, p) in self.passages.iter().enumerate() {
            if p.text.trim().is_empty() || !ids.insert(p.id.as_str()) {
                return Err(bad(
                    format!("passages[{i}]"),
                    format!("passage {:?} is empty or its id is repeated", p.id),
                ));
            }
        }
        let mut fids = BTreeSet::new();
        for (i, f) in self.findings.iter().enumerate() {
            let field = |name: &str| format!("findings[{i}].{name}");
            if !fids.insert(f.id.as_str()) {
                return Err(bad(field("id"), format!("finding id {:?} is repeated", f.id)));
            }
            if !(1..=3).contains(&f.importance) {
                return Err(bad(field("importance"), format!("{} is not between 1 and 3", f.importance)));
            }
            let Some(p) = self.passages.iter().find(|p| p.id == f.passage) else {
                return Err(bad(field("passage"), format!("no passage {:?}", f.passage)));
            };
            if f.phrases.is_empty() {
                return Err(bad(field("phrases"), "a finding needs at least one key phrase".into()));
            }
            let sentences = sentences(&p.text);
            let home =
                sentences.iter().find(|s| f.phrases.iter().all(|ph| s.to_lowercase().contains(&ph.to_lowercase())));
            if home.is_none() {
                return Err(bad(
                    field("phrases"),
                    format!("no sentence of passage {:?} holds all of {:?}", f.passage, f.phrases),
                ));
            }
        }
        Ok(())
    }

    /// A built-in topic.
    pub fn builtin(name: &str) -> Option<Result<Topic>> {
        BUILTIN_TOPICS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, text)| Topic::from_toml(text, &format!("built-in topic {n}")))
    }

    /// Every built-in topic, in order.
    pub fn builtins() -> Result<Vec<Topic>> {
        BUILTIN_TOPICS.iter().map(|(n, text)| Topic::from_toml(text, &format!("built-in topic {n}"))).collect()
    }

    /// Sum of importances.
    pub fn total_importance(&self) -> u32 {
        self.findings.iter().map(|f| f.importance).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_sentences_split_after_decimals() {
        assert_eq!(Topic::builtins().expect("valid").len(), 5);
        assert_eq!(
            sentences("About 1.27 million died. Next one! Last"),
            vec!["About 1.27 million died.", "Next one!", "Last"]
        );
    }

    #[test]
    fn a_bad_topic_names_its_field() {
        let text =
            BUILTIN_TOPICS[0].1.replace("phrases = [\"four-hour batteries\"]", "phrases = [\"six-hour batteries\"]");
        let e = Topic::from_toml(&text, "t.toml").expect_err("phrase not in passage").to_string();
        assert!(e.contains("t.toml") && e.contains("findings[1].phrases"), "{e}");
        let e = Topic::from_toml("name = 3", "u.toml").expect_err("malformed").to_string();
        assert!(e.contains("u.toml") && e.contains("line 1"), "{e}");
    }
}
