//! Scenarios: the stimuli of each tick and who is exposed to them.
//!
//! A scenario file (TOML) lists stimuli (products, ads, news) and, for each
//! tick, exposure rules. [`Scenario::jobs`] expands a tick's rules into the
//! tick's jobs, in a fixed order: by persona, then rule, then exposure. A run
//! with more ticks than the scenario defines cycles through its ticks.

use crate::error::{Error, Result};
use crate::rng::{Purpose, Stream};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Built-in scenarios, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../../fixtures/scenarios/default.toml")),
    ("launch-day", include_str!("../../../fixtures/scenarios/launch-day.toml")),
    ("repeat-exposure", include_str!("../../../fixtures/scenarios/repeat-exposure.toml")),
];

/// What kind of thing a stimulus is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StimulusKind {
    /// A product listing.
    Product,
    /// An advertisement.
    Ad,
    /// A news item.
    News,
}

impl StimulusKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StimulusKind::Product => "product",
            StimulusKind::Ad => "ad",
            StimulusKind::News => "news",
        }
    }
}

/// One stimulus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stimulus {
    /// Unique id within the scenario.
    pub id: String,
    /// Product, ad or news.
    pub kind: StimulusKind,
    /// Headline.
    pub title: String,
    /// Brand, if any.
    #[serde(default)]
    pub brand: Option<String>,
    /// Category; matched against persona interests.
    pub category: String,
    /// Price in USD, if any.
    #[serde(default)]
    pub price: Option<f64>,
    /// Claims the stimulus makes.
    #[serde(default)]
    pub claims: Vec<String>,
    /// Body text.
    pub text: String,
    /// Its lines in a prompt, rendered from the fields above on first use:
    /// change a loaded stimulus by loading a new scenario, not in place.
    #[serde(skip)]
    prompt_lines: Rendered,
}

impl Stimulus {
    /// Its lines in a reaction prompt, up to the exposure line.
    pub fn prompt_lines(&self) -> &str {
        self.prompt_lines.0.get_or_init(|| stimulus_lines(self))
    }
}

/// A stimulus's own lines in a reaction prompt (the persona's prompt
/// places them; see `persona::prompt::reaction_prompt`).
fn stimulus_lines(s: &Stimulus) -> String {
    let mut out = String::with_capacity(s.text.len() + 200);
    let _ = write!(out, "\nStimulus: {} | category: {}", s.kind.as_str(), s.category);
    if let Some(b) = &s.brand {
        let _ = write!(out, " | brand: {b}");
    }
    if let Some(p) = s.price {
        let _ = write!(out, " | price: {p:.2}");
    }
    let _ = writeln!(out, "\nTitle: {}", s.title);
    let _ = writeln!(out, "Text: {}", s.text);
    if !s.claims.is_empty() {
        let _ = writeln!(out, "Claims: {}", s.claims.join("; "));
    }
    out
}

/// Text rendered from the fields beside it: not part of the value, so two
/// stimuli are equal whether or not either has been rendered yet.
#[derive(Clone, Default)]
struct Rendered(std::sync::OnceLock<String>);

impl PartialEq for Rendered {
    fn eq(&self, _: &Rendered) -> bool {
        true
    }
}

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

/// Who a rule reaches.
#[derive(Debug, Clone, PartialEq)]
pub enum Audience {
    /// Every persona.
    All,
    /// Each persona independently with this probability, drawn per tick.
    Fraction(f64),
    /// Personas with this interest.
    Interest(String),
}

/// How a rule hands out its stimuli.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assign {
    /// Persona `i` sees `stimuli[(i + tick - 1) % n]`: one each, rotating.
    Rotate,
    /// Every persona in the audience sees every listed stimulus.
    Each,
}

/// An exposure rule as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Stimulus ids.
    pub stimuli: Vec<String>,
    /// `all`, `fraction:P` or `interest:NAME`. Default `all`.
    #[serde(default = "default_audience")]
    pub audience: String,
    /// `rotate` or `each`. Default `rotate`.
    #[serde(default = "default_assign")]
    pub assign: Assign,
    /// Exposures per persona per stimulus. Default 1.
    #[serde(default = "one")]
    pub repeat: u32,
}

fn default_audience() -> String {
    "all".into()
}
fn default_assign() -> Assign {
    Assign::Rotate
}
fn one() -> u32 {
    1
}

/// One tick's rules, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TickSpec {
    /// Exposure rules, applied in order.
    pub show: Vec<RuleSpec>,
}

/// A survey question asked at a tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Tick (1-based) after whose reaction the question is asked.
    pub tick: u32,
    /// Short id used in reports.
    pub id: String,
    /// The question.
    pub question: String,
    /// The options' labels, 2 to 11 in scale order, for a question on its
    /// own scale (asked with purpose `Survey`); empty for the 1-5 probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Probe {
    /// The number of answers it takes: its options, or 5.
    pub fn points(&self) -> u8 {
        if self.options.is_empty() {
            5
        } else {
            u8::try_from(self.options.len()).unwrap_or(u8::MAX)
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default)]
    description: String,
    stimuli: Vec<Stimulus>,
    ticks: Vec<TickSpec>,
    #[serde(default)]
    probes: Vec<Probe>,
}

/// Why a probe's options are unusable, if they are: not 2 to 11, an
/// empty one, or two the same (no options at all is the 1-5 probe).
fn options_problem(options: &[String]) -> Option<String> {
    let max = usize::from(crate::chat::schema::MAX_OPTIONS);
    if !options.is_empty() && !(2..=max).contains(&options.len()) {
        return Some(format!("{} options; a question has 2 to {max} (or none, for the 1-5 scale)", options.len()));
    }
    for (i, o) in options.iter().enumerate() {
        if o.trim().is_empty() {
            return Some(format!("option {} is empty", i + 1));
        }
        if let Some(j) = options[..i].iter().position(|p| p.trim() == o.trim()) {
            return Some(format!("options {} and {} are the same ({o:?})", j + 1, i + 1));
        }
    }
    None
}

/// A resolved rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Stimulus indices.
    pub stimuli: Vec<usize>,
    /// Who sees them.
    pub audience: Audience,
    /// How they are handed out.
    pub assign: Assign,
    /// Exposures per persona per stimulus.
    pub repeat: u32,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// What it models.
    pub description: String,
    /// Stimuli, in file order.
    pub stimuli: Vec<Stimulus>,
    /// Rules per scenario tick.
    pub ticks: Vec<Vec<Rule>>,
    /// Survey questions.
    pub probes: Vec<Probe>,
    /// BLAKE3 hex of the source text, recorded with a run.
    pub source_hash: String,
}

/// One persona meeting one stimulus in one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Position in the tick's job list; outcomes come back in this order.
    pub position: u32,
    /// Persona index.
    pub persona: u32,
    /// Stimulus index in the scenario.
    pub stimulus: u32,
    /// 0 for the first exposure to this stimulus in this tick, then 1, 2...
    pub exposure: u32,
}

impl Scenario {
    /// A built-in scenario by name.
    pub fn builtin(name: &str) -> Option<Scenario> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(n, text)| {
            Scenario::from_toml(text, &format!("built-in scenario {n}"))
                .expect("built-in scenarios are valid; this is a bug")
        })
    }

    /// Parses and validates a scenario. `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Scenario> {
        let file: ScenarioFile =
            toml::from_str(text).map_err(|e| Error::Parse { source_name: source_name.into(), source: Box::new(e) })?;
        let bad = |field: String, cause: String| Error::Fixture { source_name: source_name.into(), field, cause };
        if file.stimuli.is_empty() {
            return Err(bad("stimuli".into(), "a scenario needs at least one stimulus".into()));
        }
        if file.ticks.is_empty() {
            return Err(bad("ticks".into(), "a scenario needs at least one tick".into()));
        }
        let mut seen = BTreeSet::new();
        for (i, s) in file.stimuli.iter().enumerate() {
            if s.id.trim().is_empty() {
                return Err(bad(format!("stimuli[{i}].id"), "must not be empty".into()));
            }
            if !seen.insert(s.id.as_str()) {
                return Err(bad(format!("stimuli[{i}].id"), format!("duplicate stimulus id {:?}", s.id)));
            }
            if let Some(p) = s.price {
                if !(p.is_finite() && p >= 0.0) {
                    return Err(bad(format!("stimuli[{i}].price"), format!("must be a non-negative number, got {p}")));
                }
            }
        }
        let mut ticks = Vec::with_capacity(file.ticks.len());
        for (t, tick) in file.ticks.iter().enumerate() {
            let mut rules = Vec::with_capacity(tick.show.len());
            for (r, rule) in tick.show.iter().enumerate() {
                let field = |f: &str| format!("ticks[{t}].show[{r}].{f}");
                if rule.stimuli.is_empty() {
                    return Err(bad(field("stimuli"), "must list at least one stimulus".into()));
                }
                let mut idx = Vec::with_capacity(rule.stimuli.len());
                for id in &rule.stimuli {
                    match file.stimuli.iter().position(|s| &s.id == id) {
                        Some(i) => idx.push(i),
                        None => return Err(bad(field("stimuli"), format!("unknown stimulus id {id:?}"))),
                    }
                }
                if rule.repeat == 0 || rule.repeat > 16 {
                    return Err(bad(field("repeat"), format!("must be between 1 and 16, got {}", rule.repeat)));
                }
                let audience = parse_audience(&rule.audience).map_err(|cause| bad(field("audience"), cause))?;
                rules.push(Rule { stimuli: idx, audience, assign: rule.assign, repeat: rule.repeat });
            }
            ticks.push(rules);
        }
        for (i, p) in file.probes.iter().enumerate() {
            if p.tick == 0 {
                return Err(bad(format!("probes[{i}].tick"), "ticks are numbered from 1".into()));
            }
            if let Some(cause) = options_problem(&p.options) {
                return Err(bad(format!("probes[{i}].options"), cause));
            }
        }
        Ok(Scenario {
            name: file.name,
            description: file.description,
            stimuli: file.stimuli,
            ticks,
            probes: file.probes,
            source_hash: blake3::hash(text.as_bytes()).to_hex().to_string(),
        })
    }

    /// The rules in force at `tick` (1-based), cycling through the
    /// scenario's ticks.
    pub fn rules(&self, tick: u32) -> &[Rule] {
        &self.ticks[(tick.max(1) as usize - 1) % self.ticks.len()]
    }

    /// Checks the scenario against a run of `ticks` ticks over personas
    /// whose interests are drawn from `interests` (the trait table's). Errors name `source_name` and the field: a probe
    /// past both the run and the scenario's own ticks (it can never be
    /// asked), and an audience interest no persona can have. A stimulus
    /// shown to nobody over the run (or the scenario's own cycle, when that
    /// is longer: a run may stop before a stimulus's turn on purpose) is a
    /// warning, returned as text.
    pub fn check_run(&self, source_name: &str, ticks: u32, interests: &[std::sync::Arc<str>]) -> Result<Vec<String>> {
        let bad = |field: String, cause: String| Error::Fixture { source_name: source_name.into(), field, cause };
        let mut warnings = Vec::new();
        let own = self.ticks.len() as u32;
        for (i, p) in self.probes.iter().enumerate() {
            if p.tick > ticks.max(own) {
                let cause = format!("tick {} never comes: the run has {ticks} tick(s), the scenario {own}", p.tick);
                return Err(bad(format!("probes[{i}].tick"), cause));
            }
        }
        for (t, rules) in self.ticks.iter().enumerate() {
            for (r, rule) in rules.iter().enumerate() {
                if let Audience::Interest(name) = &rule.audience {
                    if !interests.iter().any(|i| **i == **name) {
                        let known: Vec<&str> = interests.iter().map(|i| &**i).collect();
                        let cause = format!("no persona has the interest {name:?}; known: {}", known.join(", "));
                        return Err(bad(format!("ticks[{t}].show[{r}].audience"), cause));
                    }
                }
            }
        }
        let mut shown = vec![false; self.stimuli.len()];
        for tick in 1..=own {
            for rule in self.rules(tick) {
                let reaches = !matches!(rule.audience, Audience::Fraction(f) if f <= 0.0);
                for s in &rule.stimuli {
                    shown[*s] |= reaches;
                }
            }
        }
        warnings.extend(
            self.stimuli
                .iter()
                .zip(shown)
                .filter(|(_, shown)| !shown)
                .map(|(s, _)| format!("{source_name}: stimulus {:?} is never shown to anybody", s.id)),
        );
        Ok(warnings)
    }

    /// The probes asked at `tick`.
    pub fn probes_at(&self, tick: u32) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(move |p| p.tick == tick)
    }

    /// The jobs of `tick` for a panel of `personas`, in position order.
    /// `interests(p)` gives persona `p`'s interests for interest audiences.
    pub fn jobs<'a>(
        &self,
        seed: u64,
        tick: u32,
        personas: u32,
        interests: impl Fn(u32) -> &'a [std::sync::Arc<str>],
    ) -> Vec<Job> {
        self.jobs_of(seed, tick, 0..personas, interests)
    }

    /// The jobs of the personas in `personas` only (a shard of the panel),
    /// numbered from 0 in the same order: each persona's jobs are those of
    /// [`Scenario::jobs`], whatever the range.
    pub fn jobs_of<'a>(
        &self,
        seed: u64,
        tick: u32,
        personas: std::ops::Range<u32>,
        interests: impl Fn(u32) -> &'a [std::sync::Arc<str>],
    ) -> Vec<Job> {
        let rules = self.rules(tick);
        let mut jobs = Vec::with_capacity(personas.len());
        for p in personas {
            for (r, rule) in rules.iter().enumerate() {
                let included = match &rule.audience {
                    Audience::All => true,
                    Audience::Fraction(f) => {
                        Stream::derive(seed, tick, (u64::from(p) << 16) | r as u64, Purpose::Exposure).unit() < *f
                    }
                    Audience::Interest(name) => interests(p).iter().any(|i| **i == **name),
                };
                if !included {
                    continue;
                }
                let chosen: &[usize] = match rule.assign {
                    Assign::Rotate => {
                        let n = rule.stimuli.len();
                        let i = (p as usize + tick as usize - 1) % n;
                        &rule.stimuli[i..=i]
                    }
                    Assign::Each => &rule.stimuli,
                };
                for s in chosen {
                    for exposure in 0..rule.repeat {
                        jobs.push(Job { position: jobs.len() as u32, persona: p, stimulus: *s as u32, exposure });
                    }
                }
            }
        }
        jobs
    }
}

fn parse_audience(s: &str) -> std::result::Result<Audience, String> {
    if s == "all" {
        return Ok(Audience::All);
    }
    if let Some(f) = s.strip_prefix("fraction:") {
        return match f.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(Audience::Fraction(v)),
            _ => Err(format!("fraction must be a number in [0, 1], got {f:?}")),
        };
    }
    if let Some(name) = s.strip_prefix("interest:") {
        if !name.trim().is_empty() {
            return Ok(Audience::Interest(name.trim().to_string()));
        }
    }
    Err(format!("expected \"all\", \"fraction:P\" or \"interest:NAME\", got {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::Traits;

    fn no_interests(_: u32) -> &'static [std::sync::Arc<str>] {
        &[]
    }

    #[test]
    fn builtins_parse_and_default_gives_one_job_per_persona_per_tick() {
        for (name, _) in BUILTIN {
            assert!(Scenario::builtin(name).is_some(), "{name}");
        }
        let s = Scenario::builtin("default").expect("built in");
        for tick in 1..=3 {
            let jobs = s.jobs(1, tick, 50, no_interests);
            assert_eq!(jobs.len(), 50);
            assert!(jobs.iter().enumerate().all(|(i, j)| j.position as usize == i && j.persona as usize == i));
        }
    }

    #[test]
    fn repeat_and_each_multiply_exposures() {
        let text = r#"
name = "t"
[[stimuli]]
id = "a"
kind = "ad"
title = "A"
category = "tech"
text = "a"
[[stimuli]]
id = "b"
kind = "news"
title = "B"
category = "tech"
text = "b"
[[ticks]]
[[ticks.show]]
stimuli = ["a", "b"]
assign = "each"
repeat = 2
"#;
        let s = Scenario::from_toml(text, "t.toml").expect("valid");
        let jobs = s.jobs(1, 1, 3, no_interests);
        assert_eq!(jobs.len(), 12);
        assert_eq!((jobs[1].stimulus, jobs[1].exposure), (0, 1));
        assert_eq!((jobs[2].stimulus, jobs[2].exposure), (1, 0));
    }

    #[test]
    fn unknown_stimulus_names_file_and_field() {
        let text = "name = \"t\"\n[[stimuli]]\nid = \"a\"\nkind = \"ad\"\ntitle = \"A\"\ncategory = \"x\"\ntext = \"a\"\n[[ticks]]\n[[ticks.show]]\nstimuli = [\"zzz\"]\n";
        let err = Scenario::from_toml(text, "s.toml").unwrap_err().to_string();
        assert!(err.contains("s.toml") && err.contains("ticks[0].show[0].stimuli") && err.contains("zzz"), "{err}");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let err = Scenario::from_toml("name = \"t\"\nstimuli = [\n", "s.toml").unwrap_err().to_string();
        assert!(err.contains("s.toml") && err.contains("line"), "{err}");
    }

    #[test]
    fn fraction_audience_is_seeded() {
        let s = Scenario::builtin("repeat-exposure").expect("built in");
        let a = s.jobs(5, 2, 500, no_interests);
        assert_eq!(a, s.jobs(5, 2, 500, no_interests));
        assert_ne!(a, s.jobs(6, 2, 500, no_interests));
    }

    #[test]
    fn a_stimulus_nobody_sees_in_the_run_is_a_warning() {
        let text = "name = \"s\"\n\
            [[stimuli]]\nid = \"a\"\nkind = \"ad\"\ntitle = \"A\"\ncategory = \"coffee\"\ntext = \"x\"\n\
            [[stimuli]]\nid = \"b\"\nkind = \"ad\"\ntitle = \"B\"\ncategory = \"coffee\"\ntext = \"y\"\n\
            [[ticks]]\n[[ticks.show]]\nstimuli = [\"a\"]\n\
            [[ticks]]\n[[ticks.show]]\nstimuli = [\"b\"]\naudience = \"fraction:0\"\n";
        let s = Scenario::from_toml(text, "s.toml").expect("valid");
        let traits = Traits::builtin();
        let warned = vec!["s.toml: stimulus \"b\" is never shown to anybody".to_string()];
        assert_eq!(s.check_run("s.toml", 1, &traits.interests).expect("no error"), warned);
        assert_eq!(s.check_run("s.toml", 5, &traits.interests).expect("no error"), warned);
        let fixed = Scenario::from_toml(&text.replace("fraction:0", "all"), "s.toml").expect("valid");
        assert!(
            fixed.check_run("s.toml", 1, &traits.interests).expect("no error").is_empty(),
            "a short run is not an error"
        );
    }
}
