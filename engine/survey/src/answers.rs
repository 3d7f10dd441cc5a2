//! The people's answers: a CSV file with the panel's row id and one column
//! per question id, each cell the number of the option chosen (1 for the
//! first) or empty when the respondent gave none.
//!
//! ```text
//! id,selfLR,PID,vote
//! r1,7,7,2
//! r2,3,,1
//! ```

use crate::panel::Panel;
use crate::question::Survey;
use crate::{Error, Result};

/// Every respondent's answer to every question, in the panel's row order:
/// `by_question[q][r]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// Per question (the survey's order), per respondent (the panel's).
    pub by_question: Vec<Vec<Option<u8>>>,
}

impl Answers {
    /// Reads answers for `panel` to `survey` from CSV `text`; `file` names
    /// it in errors. An id the panel lacks, a question without a column, or
    /// an answer outside its options is an error naming file, row and
    /// column; a panel row without an answers row has no answers.
    pub fn from_csv(text: &str, file: &str, panel: &Panel, survey: &Survey) -> Result<Answers> {
        let (mut reader, headers) = crate::csv_with_headers(text, file)?;
        let spec =
            |field: &str, cause: &str| Error::Spec { file: file.into(), field: field.into(), cause: cause.into() };
        if headers.is_empty() {
            return Err(spec("id", "the file has no columns"));
        }
        let columns: Vec<usize> = survey
            .questions
            .iter()
            .map(|q| headers.iter().position(|h| *h == q.id).ok_or_else(|| spec(&q.id, "no column for this question")))
            .collect::<Result<_>>()?;
        let index: std::collections::HashMap<&str, usize> =
            panel.respondents.iter().enumerate().map(|(i, r)| (r.id.as_str(), i)).collect();
        let mut by_question = vec![vec![None; panel.respondents.len()]; survey.questions.len()];
        let mut seen = vec![false; panel.respondents.len()];
        for (n, record) in reader.records().enumerate() {
            let record =
                record.map_err(|e| Error::Parse { file: file.into(), cause: format!("line {}: {e}", n + 2) })?;
            let id = record.get(0).unwrap_or("");
            let row = |column: &str, cause: String| Error::Row {
                file: file.into(),
                row: id.to_string(),
                column: column.into(),
                cause,
            };
            let Some(&r) = index.get(id) else { return Err(row(&headers[0], "no panel row has this id".into())) };
            if std::mem::replace(&mut seen[r], true) {
                return Err(row(&headers[0], "this id has two answers rows".into()));
            }
            for ((q, question), &at) in survey.questions.iter().enumerate().zip(&columns) {
                let cell = record.get(at).unwrap_or("");
                if cell.is_empty() {
                    continue;
                }
                match cell.parse::<u8>() {
                    Ok(a) if (1..=question.points()).contains(&a) => by_question[q][r] = Some(a),
                    Ok(_) | Err(_) => {
                        return Err(row(
                            &question.id,
                            format!("{cell:?} is not an option number from 1 to {}", question.points()),
                        ))
                    }
                }
            }
        }
        Ok(Answers { by_question })
    }
}
