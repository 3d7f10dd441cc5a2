//! Survey questions on any scale, the survey file that holds them, and
//! the prompt a persona answers them in.
//!
//! ```toml
//! context = "It is October 1996."           # optional, opens every prompt
//!
//! [[question]]
//! id = "vote"                                # the answers file's column
//! text = "Whom would you vote for?"
//! kind = "nominal"                           # or "ordinal"
//! options = ["Bill Clinton", "Bob Dole"]     # 2 to 11, in scale order
//! # anchors = ["...", "..."]                 # SSR statements, one per option
//!
//! [[subgroup]]
//! name = "age"
//! column = "age"                             # a panel column, read as a number
//! bands = [{ label = "18-29", min = 18, max = 29 }, { label = "30+", min = 30, max = 200 }]
//! ```

use crate::panel::Respondent;
use crate::{Error, Result};
use engine::chat::schema::MAX_OPTIONS;
use serde::{Deserialize, Serialize};

/// Whether the options are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Ordered options, one scale point apart (a 7-point scale).
    Ordinal,
    /// Unordered options (a vote): no mean, no distance in points.
    Nominal,
}

/// One question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// Its id: the answers file's column.
    pub id: String,
    /// The question as asked.
    pub text: String,
    /// Ordinal or nominal.
    pub kind: Kind,
    /// The options' labels, 2 to 11, in scale order.
    pub options: Vec<String>,
    /// Statements SSR compares a free-text answer with, one per option;
    /// the labels serve when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchors: Option<Vec<String>>,
}

impl Question {
    /// The options' count, as the parser wants it.
    pub fn points(&self) -> u8 {
        u8::try_from(self.options.len()).expect("checked at parse: at most 11 options; this is a bug")
    }

    /// The SSR anchors: the given statements, or the labels.
    pub fn anchor_texts(&self) -> &[String] {
        self.anchors.as_deref().unwrap_or(&self.options)
    }

    /// The prompt that asks `respondent` this question under `context`.
    /// The options are numbered lines (`3. Slightly liberal`), which is
    /// also what the scripted model reads.
    pub fn prompt(&self, context: Option<&str>, respondent: &Respondent) -> String {
        let as_asked: Vec<usize> = (0..self.options.len()).collect();
        self.prompt_in(context, respondent, &as_asked, "")
    }

    /// [`Question::prompt`] with the options shown in `order`, after the
    /// interview so far. The line numbered `i + 1` shows option `order[i]`
    /// (from 0): an answer `d` is option `order[d - 1] + 1`. `earlier`, a
    /// [`crate::interview::transcript`] (empty for none), stands between
    /// the respondent's description and the question.
    pub fn prompt_in(&self, context: Option<&str>, respondent: &Respondent, order: &[usize], earlier: &str) -> String {
        let mut out = self.asked(context, respondent, order, earlier);
        out.push_str(&format!(
            "\nReply exactly in this format:\nANSWER: <the number of your option, 1 to {}>\nWHY: <one sentence in your own voice>\n",
            self.options.len()
        ));
        out
    }

    /// [`Question::prompt_in`] asking for the shares of people like the
    /// respondent who would choose each option (`verbalized` mode), not
    /// for one answer.
    pub fn shares_prompt_in(
        &self,
        context: Option<&str>,
        respondent: &Respondent,
        order: &[usize],
        earlier: &str,
    ) -> String {
        let mut out = self.asked(context, respondent, order, earlier);
        out.push('\n');
        engine::persona::prompt::shares_format(&mut out, self.options.len());
        out
    }

    /// The prompt up to its reply format: the context, the respondent, the
    /// interview so far, the question and its options in `order`.
    fn asked(&self, context: Option<&str>, respondent: &Respondent, order: &[usize], earlier: &str) -> String {
        let mut out = String::with_capacity(512);
        if let Some(c) = context {
            out.push_str(c.trim());
            out.push_str("\n\n");
        }
        out.push_str("You are answering a survey as the person described below. Answer as they would, in their own voice.\nAbout you:\n");
        out.push_str(&respondent.describe());
        if !earlier.is_empty() {
            out.push('\n');
            out.push_str(earlier);
        }
        out.push_str("\nQuestion: ");
        out.push_str(self.text.trim());
        out.push_str("\nOptions:\n");
        for (i, &o) in order.iter().enumerate() {
            out.push_str(&format!("{}. {}\n", i + 1, self.options[o]));
        }
        out
    }
}

/// A band of a subgroup: respondents whose column lies in [min, max].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    /// Shown in the report (`18-29`).
    pub label: String,
    /// Smallest value, inclusive.
    pub min: f64,
    /// Largest value, inclusive.
    pub max: f64,
}

/// A way to split respondents (by age, by education...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subgroup {
    /// Its name (`age`).
    pub name: String,
    /// The panel column it reads, as a number.
    pub column: String,
    /// Its bands; a respondent in none is left out of this subgroup.
    pub bands: Vec<Band>,
}

impl Subgroup {
    /// The band `respondent` falls in, if any.
    pub fn band_of(&self, respondent: &Respondent) -> Option<usize> {
        let x = respondent.number(&self.column)?;
        self.bands.iter().position(|b| (b.min..=b.max).contains(&x))
    }
}

/// A survey: its questions and the subgroups its figures are split by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Survey {
    /// Opens every prompt (the time and place the respondents answered in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The questions.
    #[serde(rename = "question")]
    pub questions: Vec<Question>,
    /// The subgroups.
    #[serde(default, rename = "subgroup")]
    pub subgroups: Vec<Subgroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubgroupFile {
    #[serde(rename = "subgroup")]
    subgroups: Vec<Subgroup>,
}

impl Survey {
    /// Parses and checks a survey file; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Survey> {
        let survey: Survey =
            toml::from_str(text).map_err(|e| Error::Parse { file: file.into(), cause: e.to_string() })?;
        survey.check(file)?;
        Ok(survey)
    }

    /// Parses a file of `[[subgroup]]` tables that replace the survey's own.
    pub fn subgroups_from_toml(text: &str, file: &str) -> Result<Vec<Subgroup>> {
        let parsed: SubgroupFile =
            toml::from_str(text).map_err(|e| Error::Parse { file: file.into(), cause: e.to_string() })?;
        check_subgroups(&parsed.subgroups, file)?;
        Ok(parsed.subgroups)
    }

    fn check(&self, file: &str) -> Result<()> {
        let spec = |field: String, cause: String| Error::Spec { file: file.into(), field, cause };
        if self.questions.is_empty() {
            return Err(spec("question".into(), "the survey has no [[question]]".into()));
        }
        for (i, q) in self.questions.iter().enumerate() {
            let field = |f: &str| format!("question[{i}] ({}).{f}", q.id);
            if q.id.trim().is_empty() {
                return Err(spec(format!("question[{i}].id"), "empty".into()));
            }
            if self.questions[..i].iter().any(|p| p.id == q.id) {
                return Err(spec(field("id"), "two questions have this id".into()));
            }
            if q.text.trim().is_empty() {
                return Err(spec(field("text"), "empty".into()));
            }
            if !(2..=usize::from(MAX_OPTIONS)).contains(&q.options.len()) {
                return Err(spec(
                    field("options"),
                    format!("{} options; a question has 2 to {MAX_OPTIONS}", q.options.len()),
                ));
            }
            distinct(&q.options).map_err(|c| spec(field("options"), c))?;
            if let Some(a) = &q.anchors {
                if a.len() != q.options.len() {
                    return Err(spec(
                        field("anchors"),
                        format!("{} anchors for {} options; give one per option", a.len(), q.options.len()),
                    ));
                }
                distinct(a).map_err(|c| spec(field("anchors"), c))?;
            }
        }
        check_subgroups(&self.subgroups, file)
    }
}

fn distinct(items: &[String]) -> std::result::Result<(), String> {
    for (i, s) in items.iter().enumerate() {
        if s.trim().is_empty() {
            return Err(format!("item {} is empty", i + 1));
        }
        if let Some(j) = items[..i].iter().position(|t| t.trim() == s.trim()) {
            return Err(format!("items {} and {} are the same ({s:?})", j + 1, i + 1));
        }
    }
    Ok(())
}

fn check_subgroups(subgroups: &[Subgroup], file: &str) -> Result<()> {
    for (i, g) in subgroups.iter().enumerate() {
        let spec =
            |cause: String| Error::Spec { file: file.into(), field: format!("subgroup[{i}] ({})", g.name), cause };
        if g.bands.len() < 2 {
            return Err(spec("give at least two bands".into()));
        }
        for (j, b) in g.bands.iter().enumerate() {
            if b.min > b.max || b.min.is_nan() || b.max.is_nan() {
                return Err(spec(format!("band {:?}: min is above max", b.label)));
            }
            if g.bands[..j].iter().any(|c| c.min <= b.max && b.min <= c.max) {
                return Err(spec(format!("band {:?} overlaps an earlier band", b.label)));
            }
        }
    }
    Ok(())
}

/// The SSR pmf over a question's `k` options from the answer's cosine
/// similarities to the anchors: the SSR paper's equation 8 for `k` points
/// rather than five, reshaped by `temperature`, as purchase intent's
/// ([`engine::intent::set_pmf_over`]). Equal similarities (and `eps = 0`)
/// give the uniform pmf.
pub fn ssr_pmf(similarities: &[f64], epsilon: f64, temperature: f64) -> Vec<f64> {
    engine::intent::with_temperature_over(engine::intent::set_pmf_over(similarities, epsilon), temperature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::chat::{ChatPurpose, ChatRequest, ScriptedPersonaModel};
    use engine::persona::reply::parse_survey;

    const SURVEY: &str = r#"
context = "It is 1996."
[[question]]
id = "lr"
text = "Where would you place yourself?"
kind = "ordinal"
options = ["Liberal", "Moderate", "Conservative"]
[[subgroup]]
name = "age"
column = "age"
bands = [{ label = "young", min = 18, max = 39 }, { label = "old", min = 40, max = 120 }]
"#;

    #[test]
    fn the_scripted_model_answers_any_scale_within_its_options() {
        let survey = Survey::from_toml(SURVEY, "s.toml").expect("parses");
        let q = &survey.questions[0];
        let r = Respondent { id: "r1".into(), traits: vec![("age".into(), "36".into())], values: Default::default() };
        let prompt = q.prompt(survey.context.as_deref(), &r);
        assert!(
            prompt.starts_with("It is 1996.\n\n")
                && prompt.contains("- Age: 36\n")
                && prompt.contains("\n2. Moderate\n")
        );
        let model = ScriptedPersonaModel {
            seed: 7,
            malformed_rate: 0.0,
            price: engine::cost::Price::from_usd_per_mtok(0.0, 0.0),
        };
        let mut seen = [0u32; 3];
        for attempt in 0..300 {
            let request =
                ChatRequest::new("scripted-persona-v1", ChatPurpose::Survey, prompt.as_str()).attempt(attempt);
            let reply = parse_survey(&model.reply_text(&request), q.points()).expect("a valid answer");
            seen[usize::from(reply.answer) - 1] += 1;
            assert!(reply.why.contains(&q.options[usize::from(reply.answer) - 1]), "it names its option");
        }
        assert!(seen.iter().all(|n| (70..=130).contains(n)), "about uniform: {seen:?}");
    }

    #[test]
    fn bad_surveys_are_refused_with_the_field() {
        let err = |text: &str| Survey::from_toml(text, "s.toml").expect_err("refused").to_string();
        let one = SURVEY.replace(r#"["Liberal", "Moderate", "Conservative"]"#, r#"["Yes"]"#);
        assert!(err(&one).contains("question[0] (lr).options: 1 options; a question has 2 to 11"), "{}", err(&one));
        let twice = SURVEY.replace(r#""Conservative""#, r#""Liberal""#);
        assert!(err(&twice).contains("items 1 and 3 are the same"));
        let overlap = SURVEY.replace("min = 40", "min = 30");
        assert!(err(&overlap).contains("subgroup[0] (age): band \"old\" overlaps"));
        let anchors = SURVEY.replace("kind = \"ordinal\"", "kind = \"ordinal\"\nanchors = [\"a\"]");
        assert!(err(&anchors).contains("1 anchors for 3 options"));
    }

    #[test]
    fn ssr_over_k_points_follows_equation_8() {
        let p = ssr_pmf(&[0.2, 0.5, 0.8, 0.3], 0.0, 1.0);
        let total = 0.0 + 0.3 + 0.6 + 0.1;
        let want = [0.0, 0.3 / total, 0.6 / total, 0.1 / total];
        assert!(p.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{p:?}");
        assert_eq!(ssr_pmf(&[0.4, 0.4], 0.0, 1.0), vec![0.5, 0.5]);
        assert_eq!(ssr_pmf(&[0.2, 0.9, 0.5], 0.0, 0.0), vec![0.0, 1.0, 0.0]);
        let five = [0.31, 0.52, 0.47, 0.18, 0.66];
        let intent = engine::intent::with_temperature(engine::intent::set_pmf(&five, 0.01), 0.7);
        assert_eq!(ssr_pmf(&five, 0.01, 0.7), intent.to_vec(), "five options are purchase intent's scale");
    }
}
