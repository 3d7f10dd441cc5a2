//! Research topics: source passages and the gold findings a good report
//! carries, each with an id, key phrases and an importance.

use engine::error::{Error, Result};
use engine::turn::Outcome;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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

/// One rubric item: what a good report does, and how much it counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricItem {
    /// Id, unique in the topic.
    pub id: String,
    /// What the report must do or say.
    pub criterion: String,
    /// 1 (minor) to 3 (central).
    pub weight: u32,
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
    /// What the judge scores task accuracy by; one item per gold finding
    /// when absent (see [`super::judge::rubric`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rubric: Vec<RubricItem>,
}

/// The built-in topics, by name: hand-written, each with its own gold
/// findings (`sim-cli experiment topics --check` proves every one reachable).
pub const BUILTIN_TOPICS: [(&str, &str); 12] = [
    ("grid-storage", include_str!("../../../fixtures/topics/grid-storage.toml")),
    ("sleep-wearables", include_str!("../../../fixtures/topics/sleep-wearables.toml")),
    ("urban-heat", include_str!("../../../fixtures/topics/urban-heat.toml")),
    ("remote-work", include_str!("../../../fixtures/topics/remote-work.toml")),
    ("antibiotic-resistance", include_str!("../../../fixtures/topics/antibiotic-resistance.toml")),
    ("coral-reefs", include_str!("../../../fixtures/topics/coral-reefs.toml")),
    ("school-phones", include_str!("../../../fixtures/topics/school-phones.toml")),
    ("ev-charging", include_str!("../../../fixtures/topics/ev-charging.toml")),
    ("wildfire-smoke", include_str!("../../../fixtures/topics/wildfire-smoke.toml")),
    ("food-waste", include_str!("../../../fixtures/topics/food-waste.toml")),
    ("plastic-recycling", include_str!("../../../fixtures/topics/plastic-recycling.toml")),
    ("groundwater", include_str!("../../../fixtures/topics/groundwater.toml")),
];

impl Topic {
    /// A topic built from a persona run's outcomes: per stimulus, the
    /// panel's mean purchase intent and share of positive reactions (intent
    /// 4 or more) are the gold findings; six of its reactions, quoted, are
    /// the rest of the source. `title` names the run. Fails when no outcome
    /// holds a reaction.
    pub fn from_outcomes<'a>(title: &str, outcomes: impl IntoIterator<Item = &'a Outcome>) -> Result<Topic> {
        let mut by_stimulus: BTreeMap<&str, Vec<(u8, &str)>> = BTreeMap::new();
        for o in outcomes {
            if let Some(r) = &o.reaction {
                by_stimulus.entry(&o.stimulus).or_default().push((r.intent, &r.text));
            }
        }
        if by_stimulus.is_empty() {
            return Err(Error::Fixture {
                source_name: title.to_string(),
                field: "outcomes".into(),
                cause: "the run holds no successful reactions".into(),
            });
        }
        let (mut passages, mut findings) = (Vec::new(), Vec::new());
        for (si, (stimulus, reactions)) in by_stimulus.iter().enumerate() {
            let n = reactions.len();
            let mean = reactions.iter().map(|(i, _)| f64::from(*i)).sum::<f64>() / n as f64;
            let positive = (100.0 * reactions.iter().filter(|(i, _)| *i >= 4).count() as f64 / n as f64).round();
            let mean_s = format!("{mean:.1} of 5");
            let share_s = format!("{positive}% of reactions to {stimulus}");
            let mut text = format!(
                "Mean purchase intent for {stimulus} was {mean_s} across {n} reactions. {share_s} showed intent of 4 or more."
            );
            for (_, said) in reactions.iter().take(6) {
                let said = said.trim().trim_end_matches(['.', '!', '?']);
                text.push_str(&format!(" One panellist said: {said}."));
            }
            let pid = format!("p{}", si + 1);
            findings.push(Finding {
                id: format!("{stimulus}-intent"),
                passage: pid.clone(),
                phrases: vec![format!("mean purchase intent for {stimulus}"), mean_s],
                importance: 3,
            });
            findings.push(Finding {
                id: format!("{stimulus}-positive"),
                passage: pid.clone(),
                phrases: vec![share_s],
                importance: 2,
            });
            passages.push(Passage { id: pid, text });
        }
        let topic = Topic {
            name: "panel".into(),
            title: title.to_string(),
            question: "How did the persona panel react to each stimulus, and how likely are they to buy?".into(),
            passages,
            findings,
            rubric: Vec::new(),
        };
        topic.validate(title)?;
        Ok(topic)
    }
}

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
        let mut rids = BTreeSet::new();
        for (i, r) in self.rubric.iter().enumerate() {
            if !rids.insert(r.id.as_str()) || r.criterion.trim().is_empty() || !(1..=3).contains(&r.weight) {
                return Err(bad(
                    format!("rubric[{i}]"),
                    format!("item {:?}: ids are unique, criteria not empty, weights 1 to 3", r.id),
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
        assert_eq!(Topic::builtins().expect("valid").len(), 12);
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

    #[test]
    fn a_run_becomes_a_topic_with_intent_findings() {
        let reacted = |persona: u32, stimulus: &str, intent: u8| {
            let mut o = Outcome::new(1, persona, persona, stimulus.into(), 0);
            o.reaction = Some(engine::persona::reply::Reaction {
                text: format!("Persona {persona} says intent {intent}."),
                sentiment: 0.0,
                intent,
                importance: 3,
            });
            o
        };
        let outcomes = [reacted(0, "mug", 5), reacted(1, "mug", 2), Outcome::new(1, 2, 2, "mug".into(), 0)];
        let t = Topic::from_outcomes("panel run", &outcomes).expect("a topic");
        assert_eq!(t.findings.len(), 2);
        assert_eq!(t.findings[0].phrases, vec!["mean purchase intent for mug".to_string(), "3.5 of 5".into()]);
        assert_eq!(t.findings[1].phrases, vec!["50% of reactions to mug".to_string()]);
        let none = Topic::from_outcomes("empty run", &outcomes[2..]).expect_err("no reactions").to_string();
        assert!(none.contains("empty run") && none.contains("no successful reactions"), "{none}");
    }
}
