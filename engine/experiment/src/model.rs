//! The scripted research agents' model: a deterministic stand-in for a chat
//! model with a context budget. The harness writes the prompt (role,
//! output budget, question and the items the agent can see, cut to its
//! context budget); the model answers one `- ` line per point, within the
//! output budget:
//!
//! - the **researcher** extracts sentences from its source;
//! - the **analyst** synthesises what it sees into short points (at most
//!   [`ANALYST_WORDS`] words each);
//! - the **writer** writes the report from what it sees, dropping points
//!   that repeat a longer one.
//!
//! Which points make it is decided by salience: figures and substance
//! count, plus noise seeded by (model seed, prompt digest), so the same
//! prompt always gets the same answer and repetitions differ by seed.

use super::topic::Topic;
use engine::chat::{ChatPort, ChatReply, ChatRequest};
use engine::cost::{estimate_tokens, Price};
use engine::digest::DigestWriter;
use engine::rng::Stream;
use engine::BoxFuture;
use serde::{Deserialize, Serialize};

/// Words an analyst keeps per point.
pub const ANALYST_WORDS: usize = 12;

/// An agent's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Extracts findings from sources.
    Researcher,
    /// Synthesises.
    Analyst,
    /// Writes the report.
    Writer,
}

impl Role {
    /// Lower-case name (also the agent's name in the shared context).
    pub fn name(self) -> &'static str {
        match self {
            Role::Researcher => "researcher",
            Role::Analyst => "analyst",
            Role::Writer => "writer",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        [Role::Researcher, Role::Analyst, Role::Writer].into_iter().find(|r| r.name() == s)
    }
}

/// What a role is asked to do, in words: the first line of a live
/// model's prompt ([`live_prompt`]). The scripted model reads only the
/// prompt's fields, so its prompts carry none. The analyst is held to
/// [`ANALYST_WORDS`] words per point, as the scripted analyst is, so that
/// every arm and every model cuts points the same way.
pub fn brief(role: Role) -> String {
    let task = match role {
        Role::Researcher => "The ITEMS are passages of a source. Give the findings in them that bear on the \
                             question, one point per finding, each a sentence of the passage with its figures \
                             and names kept."
            .to_string(),
        Role::Analyst => format!(
            "The ITEMS are the findings gathered so far. Give the most important ones as points of at most \
             {ANALYST_WORDS} words each, most important first, with their figures kept."
        ),
        Role::Writer => "The ITEMS are what the team gathered. Write the final report: one point per finding, \
                         each a complete sentence with its figures and names kept, no finding twice."
            .to_string(),
    };
    format!(
        "You are the {} of a team of three (researcher, analyst, writer) writing a report that answers the \
         QUESTION below. {task} Stay within the OUTPUT BUDGET.",
        role.name()
    )
}

/// Builds an agent prompt for the scripted model. Items are added in the
/// order given while they fit `context_budget` tokens; returns the prompt
/// and how many fitted.
pub fn prompt(
    role: Role,
    output_budget: u64,
    question: &str,
    items: &[String],
    context_budget: u64,
) -> (String, usize) {
    compose(String::new(), role, output_budget, question, items, context_budget)
}

/// [`prompt`] for a live model: the same fields, opened by the role's
/// [`brief`] (`TASK: ...`), whose tokens count against the context budget
/// as the rest of the prompt does.
pub fn live_prompt(
    role: Role,
    output_budget: u64,
    question: &str,
    items: &[String],
    context_budget: u64,
) -> (String, usize) {
    compose(format!("TASK: {}\n", brief(role)), role, output_budget, question, items, context_budget)
}

fn compose(
    mut p: String,
    role: Role,
    output_budget: u64,
    question: &str,
    items: &[String],
    context_budget: u64,
) -> (String, usize) {
    p.push_str(&format!(
        "ROLE: {}\nOUTPUT BUDGET: {output_budget} tokens\nQUESTION: {question}\nITEMS:\n",
        role.name()
    ));
    let mut used = estimate_tokens(&p);
    let mut fitted = 0;
    for item in items {
        let line = format!("- {}\n", item.replace('\n', " "));
        let t = estimate_tokens(&line);
        if used + t > context_budget {
            break;
        }
        used += t;
        p.push_str(&line);
        fitted += 1;
    }
    (p, fitted)
}

/// The `- ` lines of a reply.
pub fn parse_lines(reply: &str) -> Vec<String> {
    reply
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The scripted agent model.
#[derive(Debug, Clone)]
pub struct ScriptedAgentModel {
    /// Seed (one per repetition).
    pub seed: u64,
    /// Nominal price billed.
    pub price: Price,
    /// Words the analyst keeps per point ([`ANALYST_WORDS`] by default);
    /// `None` keeps every point whole (the sensitivity sweep varies it).
    pub analyst_words: Option<usize>,
}

impl ScriptedAgentModel {
    /// The model with its default assumptions.
    pub fn new(seed: u64, price: Price) -> ScriptedAgentModel {
        ScriptedAgentModel { seed, price, analyst_words: Some(ANALYST_WORDS) }
    }
}

/// What the scripted analyst makes of one item: its first `keep` words
/// (trailing `,;:` trimmed, a full stop added), or the item whole with
/// `None` or when it is no longer.
pub fn condense(item: &str, keep: Option<usize>) -> String {
    let words: Vec<&str> = item.split_whitespace().collect();
    let Some(keep) = keep.filter(|k| words.len() > *k) else {
        return item.to_string();
    };
    let mut s = words[..keep].join(" ");
    s = s.trim_end_matches([',', ';', ':']).to_string();
    s.push('.');
    s
}

impl ScriptedAgentModel {
    /// The reply to a request, without billing.
    pub fn reply_text(&self, request: &ChatRequest) -> String {
        let key = DigestWriter::new("scripted agent model v1").u64(self.seed).digest(&request.digest()).finish();
        let mut s = Stream::from_key(key.0);
        let mut role = None;
        let mut budget = 0u64;
        let mut items = Vec::new();
        for line in request.prompt.lines() {
            if let Some(r) = line.strip_prefix("ROLE: ") {
                role = Role::parse(r.trim());
            } else if let Some(b) = line.strip_prefix("OUTPUT BUDGET: ") {
                budget = b.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
            } else if let Some(item) = line.strip_prefix("- ") {
                items.push(item.trim().to_string());
            }
        }
        let Some(role) = role else { return "I cannot tell which role to play.\n".into() };
        let mut points: Vec<String> = match role {
            Role::Analyst => items.iter().map(|i| condense(i, self.analyst_words)).collect(),
            Role::Researcher | Role::Writer => items,
        };
        if role == Role::Writer {
            let lower: Vec<String> =
                points.iter().map(|p| p.to_lowercase().trim_end_matches(['.', '!', '?']).to_string()).collect();
            let repeats = |i: usize| {
                lower
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.contains(&lower[i]) && (o.len() > lower[i].len() || j < i))
            };
            points = points.iter().enumerate().filter(|(i, _)| !repeats(*i)).map(|(_, p)| p.clone()).collect();
        }
        let salience: Vec<f64> = points
            .iter()
            .map(|p| {
                let digits = if p.chars().any(|c| c.is_ascii_digit()) { 0.5 } else { 0.0 };
                digits + 0.02 * p.split_whitespace().count().min(25) as f64 + 0.6 * s.unit()
            })
            .collect();
        let mut order: Vec<usize> = (0..points.len()).collect();
        order.sort_by(|a, b| salience[*b].total_cmp(&salience[*a]).then(a.cmp(b)));
        let mut chosen = vec![false; points.len()];
        let mut used = 0u64;
        for i in order {
            let t = estimate_tokens(&points[i]) + 1;
            if used + t <= budget {
                used += t;
                chosen[i] = true;
            }
        }
        points.iter().zip(chosen).filter(|(_, c)| *c).map(|(p, _)| format!("- {p}\n")).collect()
    }
}

impl ChatPort for ScriptedAgentModel {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        engine::chat::scripted_reply(&self.price, request, self.reply_text(request))
    }
}

/// A gold finding some arm can never carry to the report, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreachable {
    /// The topic.
    pub topic: String,
    /// The finding's id.
    pub finding: String,
    /// The arm that cannot carry it: `message_passing`, or `shared`
    /// (the field and the store, where the writer reads the researcher).
    pub arm: String,
    /// Why, in words.
    pub cause: String,
}

/// The output budgets a finding's path goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathBudgets {
    /// The researcher's output per passage.
    pub researcher: u64,
    /// The analyst's output per iteration.
    pub analyst: u64,
    /// The writer's report.
    pub writer: u64,
}

/// The findings of `topic` the scripted agents can never carry, arm by
/// arm. A finding reaches a report through its home sentence: in the field
/// and the store the researcher shares the sentence whole and the writer
/// reads it there; in message passing it reaches the writer only as the
/// analyst's point, cut to `analyst_words` words. It is reachable when its
/// key phrases survive that path and every step's output budget can hold
/// it; whether it is selected is then a matter of salience and budget,
/// which is what the experiment measures.
pub fn unreachable(topic: &Topic, analyst_words: Option<usize>, budgets: PathBudgets) -> Vec<Unreachable> {
    let mut out = Vec::new();
    for f in &topic.findings {
        let home = super::judge::home_sentence(topic, f);
        let mut miss = |arm: &str, cause: String| {
            out.push(Unreachable { topic: topic.name.clone(), finding: f.id.clone(), arm: arm.into(), cause })
        };
        // A point costs its tokens and a line break.
        let fits = |text: &str, budget: u64| estimate_tokens(text) < budget;
        if !fits(&home, budgets.researcher.min(budgets.writer)) {
            miss(
                "shared",
                format!("its sentence ({} tokens) is longer than an agent's output budget", estimate_tokens(&home)),
            );
        }
        let point = condense(&home, analyst_words);
        if !super::metrics::carries(&point, f) {
            let words = analyst_words.unwrap_or(usize::MAX);
            miss(
                "message_passing",
                format!("a key phrase lies past word {words} of its sentence, where the analyst cuts"),
            );
        } else if !fits(&point, budgets.analyst.min(budgets.writer)) || !fits(&home, budgets.researcher) {
            miss("message_passing", "its sentence or the analyst's point is longer than an output budget".into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::chat::ChatPurpose;

    fn ask(m: &ScriptedAgentModel, role: Role, budget: u64, items: &[&str]) -> Vec<String> {
        let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        let (p, _) = prompt(role, budget, "q?", &items, 10_000);
        parse_lines(&m.reply_text(&ChatRequest::new("scripted-agent", ChatPurpose::Agent, p)))
    }

    #[test]
    fn roles_keep_to_their_budget_and_style() {
        let m = ScriptedAgentModel::new(1, Price::from_usd_per_mtok(0.15, 0.6));
        let long = "Interconnection queues are the main bottleneck, with projects waiting a median of five years for approval.";
        let items = [long, "Prices fell by 90 percent.", "Crowds grow."];
        let r = ask(&m, Role::Researcher, 1000, &items);
        assert_eq!(r.len(), 3, "a large budget keeps everything");
        let a = ask(&m, Role::Analyst, 1000, &items);
        assert_eq!(a[0], "Interconnection queues are the main bottleneck, with projects waiting a median of.");
        let tight = ask(&m, Role::Researcher, 10, &items);
        assert!(tight.iter().map(|l| estimate_tokens(l) + 1).sum::<u64>() <= 10);
        let w = ask(&m, Role::Writer, 1000, &[long, "Interconnection queues are the main bottleneck."]);
        assert_eq!(w, vec![long.to_string()], "the writer drops a point a longer one repeats");
        assert_eq!(ask(&m, Role::Writer, 40, &items), ask(&m, Role::Writer, 40, &items), "same prompt, same reply");
    }

    #[test]
    fn the_prompt_cuts_items_at_the_context_budget() {
        let items: Vec<String> = (0..50).map(|i| format!("item number {i} with some words")).collect();
        let (p, fitted) = prompt(Role::Writer, 10, "q?", &items, 100);
        assert!(fitted < 50 && estimate_tokens(&p) <= 100);
        assert_eq!(parse_lines(&p).len(), fitted);
    }

    /// A live model's prompt opens with its role's brief and then holds the
    /// scripted prompt's fields; the brief's tokens count against the
    /// context budget, so fewer items fit, and the analyst is held to the
    /// scripted analyst's words per point.
    #[test]
    fn a_live_prompt_opens_with_the_brief_within_the_same_budget() {
        let items: Vec<String> = (0..50).map(|i| format!("item number {i} with some words")).collect();
        for role in [Role::Researcher, Role::Analyst, Role::Writer] {
            let (scripted, fitted) = prompt(role, 10, "q?", &items, 200);
            let (live, live_fitted) = live_prompt(role, 10, "q?", &items, 200);
            let first = live.lines().next().expect("a first line");
            assert!(first.starts_with(&format!("TASK: You are the {} of a team", role.name())), "{first}");
            assert!(live_fitted < fitted && estimate_tokens(&live) <= 200, "{live_fitted} of {fitted}");
            assert_eq!(live.lines().skip(1).take(4).collect::<Vec<_>>(), scripted.lines().take(4).collect::<Vec<_>>());
            assert_eq!(parse_lines(&live).len(), live_fitted);
            assert!(!scripted.contains("TASK:"), "the scripted model's prompts are unchanged");
        }
        assert!(brief(Role::Analyst).contains(&format!("at most {ANALYST_WORDS} words")));
    }

    /// Every shipped topic is reachable at the default budgets; a key
    /// phrase past the analyst's cut is named, for message passing only.
    #[test]
    fn shipped_topics_are_reachable_and_a_late_phrase_is_not() {
        let budgets = PathBudgets { researcher: 60, analyst: 60, writer: 150 };
        for t in Topic::builtins().expect("valid") {
            assert_eq!(unreachable(&t, Some(ANALYST_WORDS), budgets), Vec::new(), "{}", t.name);
        }
        let mut t = Topic::builtin("grid-storage").expect("built in").expect("valid");
        t.passages[0].text = t.passages[0].text.replace(
            "Developers now pair most new solar plants with four-hour batteries.",
            "Developers now pair most of the new solar plants they build each year with four-hour batteries.",
        );
        let u = unreachable(&t, Some(ANALYST_WORDS), budgets);
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!((u[0].finding.as_str(), u[0].arm.as_str()), ("f2", "message_passing"));
        assert!(u[0].cause.contains("past word 12"), "{}", u[0].cause);
        assert_eq!(unreachable(&t, None, budgets), Vec::new(), "whole points carry it");
    }
}
