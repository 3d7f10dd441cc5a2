//! The built-in validation suites.

use crate::answers::Answers;
use crate::panel::{Panel, PanelMap};
use crate::question::Survey;
use crate::Result;

/// A survey with its panel and the people's answers, ready to score.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// Its name (`anes96`, or the survey file's for one's own).
    pub name: String,
    /// The questions and subgroups.
    pub survey: Survey,
    /// The respondents.
    pub panel: Panel,
    /// How the panel's columns became traits (the imputer reads it).
    pub map: PanelMap,
    /// Their answers.
    pub answers: Answers,
    /// Digest of the four input texts, so a score names its data.
    pub inputs: engine::digest::Digest,
}

/// The four texts of a suite, each with the name errors give it.
#[derive(Debug, Clone, Copy)]
pub struct Texts<'a> {
    /// The panel's CSV.
    pub panel: (&'a str, &'a str),
    /// The panel map's TOML.
    pub map: (&'a str, &'a str),
    /// The answers' CSV.
    pub answers: (&'a str, &'a str),
    /// The survey's TOML.
    pub survey: (&'a str, &'a str),
}

impl Suite {
    /// Reads a suite from its texts; every error names the file it is in.
    pub fn from_texts(name: &str, t: Texts<'_>) -> Result<Suite> {
        let map = PanelMap::from_toml(t.map.0, t.map.1)?;
        let panel = Panel::from_csv(t.panel.0, t.panel.1, &map)?;
        let survey = Survey::from_toml(t.survey.0, t.survey.1)?;
        let answers = Answers::from_csv(t.answers.0, t.answers.1, &panel, &survey)?;
        let inputs = engine::digest::DigestWriter::new("survey suite v1")
            .str(t.panel.0)
            .str(t.map.0)
            .str(t.answers.0)
            .str(t.survey.0)
            .finish();
        Ok(Suite { name: name.to_string(), survey, panel, map, answers, inputs })
    }

    /// The built-in suite `name`, if there is one.
    pub fn builtin(name: &str) -> Option<Suite> {
        let texts = match name {
            "anes96" => Texts {
                panel: (include_str!("../../../fixtures/surveys/anes96/panel.csv"), "anes96/panel.csv"),
                map: (include_str!("../../../fixtures/surveys/anes96/panel-map.toml"), "anes96/panel-map.toml"),
                answers: (include_str!("../../../fixtures/surveys/anes96/answers.csv"), "anes96/answers.csv"),
                survey: (include_str!("../../../fixtures/surveys/anes96/survey.toml"), "anes96/survey.toml"),
            },
            _ => return None,
        };
        Some(Suite::from_texts(name, texts).expect("the built-in suites are valid; this is a bug"))
    }
}

/// The built-in suites' names.
pub const BUILTIN: &[&str] = &["anes96"];
