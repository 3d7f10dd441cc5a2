#![warn(missing_docs)]
//! Checked against people: synthetic panels scored against real survey
//! answers.
//!
//! - [`panel`]: a [`Panel`] of [`Respondent`]s read from a CSV file by a
//!   [`PanelMap`] that says which column is which trait.
//! - [`question`]: a [`Survey`] of [`Question`]s with 2 to 11 labelled
//!   options, ordinal or nominal, the prompt that asks one, SSR over any
//!   number of options, and the [`Subgroup`]s figures are split by.
//! - [`answers`]: the people's own [`Answers`].
//! - [`score`]: the held-out split, the baselines and every figure of
//!   `sim-cli validate`, each with a bootstrap interval, weighted or not.
//! - [`compare`]: several models compared on the same respondents, paired,
//!   and ranked.
//! - [`impute`]: the statistical imputer the model must beat (a
//!   multinomial or ordered logit on the traits and the given answers),
//!   fitted by [`logit`].
//! - [`interview`]: the transcript of the answers a respondent gave
//!   earlier in the interview, as the model is shown them.
//! - [`suite`]: the built-in `anes96` suite (944 respondents of the 1996
//!   American National Election Study).
//!
//! The crate is pure: the CLI asks the model and hands the answers here.
//!
//! ```
//! let suite = survey::Suite::builtin("anes96").expect("built in");
//! assert_eq!(suite.panel.respondents.len(), 944);
//! assert_eq!(suite.survey.questions.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(), ["selfLR", "PID", "vote"]);
//! ```

pub mod answers;
pub mod calibrate;
pub mod compare;
pub mod impute;
pub mod interview;
pub mod logit;
pub mod panel;
pub mod question;
pub mod rectify;
pub mod score;
pub mod stats;
pub mod suite;

pub use answers::Answers;
pub use panel::{Panel, PanelMap, Respondent};
pub use question::{Kind, Question, Subgroup, Survey};
pub use suite::Suite;

/// What went wrong reading a panel, a survey or answers. Each names the
/// file; a row's error names the row id and the column too.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not valid CSV or TOML.
    #[error("{file}: {cause}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message.
        cause: String,
    },
    /// A setting or column is wrong.
    #[error("{file}: {field}: {cause}")]
    Spec {
        /// The file.
        file: String,
        /// The setting or column.
        field: String,
        /// What is wrong.
        cause: String,
    },
    /// A row holds a bad value.
    #[error("{file}: row {row}, column {column}: {cause}")]
    Row {
        /// The file.
        file: String,
        /// The row's id (or its line, when the id is missing).
        row: String,
        /// The column.
        column: String,
        /// What is wrong.
        cause: String,
    },
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;

/// A CSV reader over `text` (cells trimmed) and its header row; `file`
/// names it in errors.
fn csv_with_headers<'t>(text: &'t str, file: &str) -> Result<(csv::Reader<&'t [u8]>, Vec<String>)> {
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| Error::Parse { file: file.into(), cause: e.to_string() })?
        .iter()
        .map(str::to_string)
        .collect();
    Ok((reader, headers))
}
