//! The interview so far: the questions a respondent was asked before this
//! one and the answers they gave, in the survey's own wording, as the
//! model is shown them before the question it answers.
//!
//! ```text
//! Earlier in this interview you were asked:
//! Question: Generally speaking, do you usually think of yourself as ...
//! You answered: Weak Democrat
//! ```
//!
//! `sim-cli validate --given` shows each respondent's real answers to the
//! given questions this way.

use crate::question::Question;

/// One earlier question and the option answered (from 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn<'a> {
    /// The question as the survey words it.
    pub question: &'a Question,
    /// The option chosen, from 1.
    pub answer: u8,
}

/// The transcript of `turns`, in order; empty without any.
pub fn transcript(turns: &[Turn<'_>]) -> String {
    if turns.is_empty() {
        return String::new();
    }
    let mut out = String::from("Earlier in this interview you were asked:\n");
    for t in turns {
        out.push_str("Question: ");
        out.push_str(t.question.text.trim());
        out.push_str("\nYou answered: ");
        out.push_str(&t.question.options[usize::from(t.answer) - 1]);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Kind;

    #[test]
    fn turns_read_in_the_surveys_own_words() {
        let q = Question {
            id: "PID".into(),
            text: "Which party? ".into(),
            kind: Kind::Ordinal,
            options: vec!["Democrat".into(), "Independent".into(), "Republican".into()],
            anchors: None,
        };
        assert_eq!(transcript(&[]), "");
        assert_eq!(
            transcript(&[Turn { question: &q, answer: 3 }]),
            "Earlier in this interview you were asked:\nQuestion: Which party?\nYou answered: Republican\n"
        );
    }
}
