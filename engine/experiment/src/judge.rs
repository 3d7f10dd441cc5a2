//! Task accuracy, LLM-as-judge style: a judge model scores a final report
//! against the topic's rubric from 1 to 5, with a short justification.
//! The judge is any chat port (a live model through `--judge-config` or
//! `--config`), or the [`ScriptedJudge`]: a deterministic rubric scorer,
//! labelled as such, that counts the rubric items whose content words the
//! report carries.
//!
//! The prompt holds the question, the weighted rubric and the report, and
//! asks for `{"score": 1-5, "justification": "..."}`.

use super::topic::{sentences, RubricItem, Topic};
use engine::chat::{ChatPort, ChatReply, ChatRequest};
use engine::cost::Price;
use engine::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The scripted judge's name.
pub const SCRIPTED_JUDGE: &str = "scripted-rubric-judge-v1";

/// Share of an item's content words a report must carry for the scripted
/// judge to count the item as met.
pub const MET_SHARE: f64 = 0.6;

/// A judge's score of one report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeScore {
    /// 1 to 5.
    pub score: u8,
    /// The judge's reason, in a sentence or two.
    pub justification: String,
    /// The judge model.
    pub judge: String,
    /// True for the scripted rubric scorer.
    pub scripted: bool,
}

/// The rubric of `topic`: its own `[[rubric]]`, or one item per gold
/// finding (the sentence of its passage that holds its key phrases,
/// weighted by importance) when it has none.
pub fn rubric(topic: &Topic) -> Vec<RubricItem> {
    if !topic.rubric.is_empty() {
        return topic.rubric.clone();
    }
    topic
        .findings
        .iter()
        .map(|f| RubricItem {
            id: f.id.clone(),
            criterion: format!("States that: {}", home_sentence(topic, f)),
            weight: f.importance,
        })
        .collect()
}

/// The sentence of a finding's passage that holds all its key phrases
/// (validation guarantees one; its phrases stand in otherwise).
pub fn home_sentence(topic: &Topic, f: &super::topic::Finding) -> String {
    let text = topic.passages.iter().find(|p| p.id == f.passage).map(|p| p.text.as_str()).unwrap_or("");
    sentences(text)
        .into_iter()
        .find(|s| f.phrases.iter().all(|ph| s.to_lowercase().contains(&ph.to_lowercase())))
        .unwrap_or_else(|| f.phrases.join(", "))
}

/// The judge's prompt.
pub fn prompt(topic: &Topic, report: &str) -> String {
    let mut p = format!(
        "You are grading a research report against a rubric.\nQUESTION: {}\nRUBRIC (weight 1-3):\n",
        topic.question
    );
    for item in rubric(topic) {
        p.push_str(&format!("* [{}] {}: {}\n", item.weight, item.id, item.criterion.replace('\n', " ")));
    }
    p.push_str("REPORT:\n");
    p.push_str(report);
    p.push_str(
        "\nEND OF REPORT\nScore the report from 1 (meets no rubric item) to 5 (meets every item, weighted). \
         Answer with one JSON object and nothing else: {\"score\": <1-5>, \"justification\": \"<one or two sentences>\"}\n",
    );
    p
}

/// The score and justification of a judge's reply; `None` when it holds
/// no such object or the score is not 1 to 5.
pub fn parse(reply: &str) -> Option<(u8, String)> {
    #[derive(Deserialize)]
    struct Verdict {
        score: f64,
        #[serde(default)]
        justification: String,
    }
    let (a, b) = (reply.find('{')?, reply.rfind('}')?);
    let v: Verdict = serde_json::from_str(reply.get(a..=b)?).ok()?;
    let score = v.score.round();
    ((1.0..=5.0).contains(&score)).then(|| (score as u8, v.justification.trim().to_string()))
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 4).map(str::to_lowercase).collect()
}

/// The scripted judge: for each rubric item of the prompt, whether the
/// report carries at least [`MET_SHARE`] of its content words (four letters
/// or more); the score is `1 + 4 x` the met share of the weight, rounded.
#[derive(Debug, Clone)]
pub struct ScriptedJudge {
    /// Nominal price billed.
    pub price: Price,
}

impl ScriptedJudge {
    /// The reply to a judge prompt, without billing.
    pub fn reply_text(prompt: &str) -> String {
        let (head, report) = prompt.split_once("\nREPORT:\n").unwrap_or((prompt, ""));
        let report = report.split("\nEND OF REPORT").next().unwrap_or("");
        let have = words(report);
        let (mut met, mut total, mut missed) = (0u32, 0u32, Vec::new());
        for line in head.lines().filter_map(|l| l.strip_prefix("* [")) {
            let Some((weight, rest)) = line.split_once("] ") else { continue };
            let weight: u32 = weight.parse().unwrap_or(1);
            let (id, criterion) = rest.split_once(": ").unwrap_or((rest, rest));
            let want = words(criterion);
            let share = want.iter().filter(|w| have.contains(*w)).count() as f64 / want.len().max(1) as f64;
            total += weight;
            if share >= MET_SHARE {
                met += weight;
            } else {
                missed.push(id.to_string());
            }
        }
        let score = (1.0 + 4.0 * f64::from(met) / f64::from(total.max(1))).round() as u8;
        let justification = match missed.len() {
            0 => format!("Meets every rubric item (weight {met} of {total})."),
            _ => format!("Meets rubric weight {met} of {total}; misses {}.", missed.join(", ")),
        };
        serde_json::json!({ "score": score, "justification": justification }).to_string()
    }
}

impl ChatPort for ScriptedJudge {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        engine::chat::scripted_reply(&self.price, request, ScriptedJudge::reply_text(&request.prompt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> Topic {
        Topic::builtin("grid-storage").expect("built in").expect("valid")
    }

    /// A report carrying every finding's sentence scores 5, one carrying
    /// none scores 1, and one carrying part scores in between, naming what
    /// it misses; the reply always parses.
    #[test]
    fn the_scripted_judge_scores_by_the_rubric() {
        let t = topic();
        let all: String = t.passages.iter().map(|p| p.text.clone()).collect::<Vec<_>>().join(" ");
        let ask = |report: &str| parse(&ScriptedJudge::reply_text(&prompt(&t, report))).expect("parses");
        assert_eq!(ask(&all).0, 5);
        assert_eq!(ask("Nothing relevant here.").0, 1);
        let part = "Lithium-ion pack prices fell by about 90 percent between 2010 and 2023. \
                    Interconnection queues are the main bottleneck, with projects waiting a median of five years.";
        let (score, why) = ask(part);
        assert!((2..=4).contains(&score), "{score}: {why}");
        assert!(why.contains("misses") && why.contains("f5") && !why.contains("f1,"), "{why}");
        assert_eq!(ask(part), ask(part), "deterministic");
    }

    #[test]
    fn replies_parse_only_with_a_score_from_1_to_5() {
        assert_eq!(parse("Sure! {\"score\": 4, \"justification\": \"Good.\"} Done."), Some((4, "Good.".into())));
        assert_eq!(parse("{\"score\": 4.4}"), Some((4, String::new())));
        assert_eq!(parse("{\"score\": 7, \"justification\": \"x\"}"), None);
        assert_eq!(parse("{\"score\": \"high\"}"), None);
        assert_eq!(parse("no json"), None);
    }

    #[test]
    fn a_topic_without_a_rubric_gets_one_item_per_finding() {
        let t = topic();
        let r = rubric(&t);
        assert_eq!(r.len(), t.findings.len());
        assert!(r[0].criterion.contains("90 percent") && r[0].weight == 3, "{:?}", r[0]);
    }
}
