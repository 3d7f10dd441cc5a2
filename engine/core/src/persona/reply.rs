//! Parsing model replies, strictly. A reply that does not parse triggers a
//! guardrail retry (reactions, probes) or a fallback (reflections).

use serde::{Deserialize, Serialize};

/// Why a reply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// A required line is missing.
    #[error("reply has no {0} line")]
    Missing(&'static str),
    /// A line is present but its value is out of range or not a number.
    #[error("reply has an invalid {field}: {value:?}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What it said.
        value: String,
    },
}

/// A parsed reaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct Reaction {
    /// The persona's words.
    pub text: String,
    /// Sentiment in [-1, 1].
    pub sentiment: f32,
    /// Purchase intent 1-5.
    pub intent: u8,
    /// Importance 1-10.
    pub importance: u8,
}

/// A parsed probe answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct ProbeReply {
    /// Answer 1-5.
    pub answer: u8,
    /// The stated reason.
    pub why: String,
}

impl ProbeReply {
    /// In `probabilities` mode: the model's probabilities over the options,
    /// which `why` then holds in their recorded form
    /// ([`crate::chat::OptionProbabilities::to_text`]).
    pub fn probabilities(&self) -> Option<Vec<f64>> {
        crate::chat::OptionProbabilities::parse_text(&self.why).map(|(p, _)| p)
    }
}

/// The value of the first line labelled with each of `keys` (labels match
/// ignoring ASCII case and surrounding space), in one pass over the reply.
fn fields<'a, const N: usize>(text: &'a str, keys: [&str; N]) -> [Option<&'a str>; N] {
    let mut out = [None; N];
    for l in crate::scan::lines(text) {
        let Some(colon) = memchr::memchr(b':', l.as_bytes()) else { continue };
        let k = l[..colon].trim();
        for (slot, key) in out.iter_mut().zip(keys) {
            if slot.is_none() && k.eq_ignore_ascii_case(key) {
                *slot = Some(l[colon + 1..].trim());
            }
        }
        if out.iter().all(Option::is_some) {
            break;
        }
    }
    out
}

fn int_in(v: Option<&str>, key: &'static str, lo: u8, hi: u8) -> Result<u8, ReplyError> {
    let v = v.ok_or(ReplyError::Missing(key))?;
    match v.parse::<u8>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(ReplyError::Invalid { field: key, value: v.to_string() }),
    }
}

/// Parses a reaction reply.
pub fn parse_reaction(text: &str) -> Result<Reaction, ReplyError> {
    let [reaction, sentiment, intent, importance] = fields(text, ["REACTION", "SENTIMENT", "INTENT", "IMPORTANCE"]);
    let reaction = reaction.ok_or(ReplyError::Missing("REACTION"))?;
    if !long_enough(reaction) {
        return Err(ReplyError::Invalid { field: "REACTION", value: reaction.to_string() });
    }
    let s = sentiment.ok_or(ReplyError::Missing("SENTIMENT"))?;
    let sentiment = match crate::scan::parse_f32(s) {
        Some(v) if (-1.0..=1.0).contains(&v) => v,
        _ => return Err(ReplyError::Invalid { field: "SENTIMENT", value: s.to_string() }),
    };
    Ok(Reaction {
        text: reaction.to_string(),
        sentiment,
        intent: int_in(intent, "INTENT", 1, 5)?,
        importance: int_in(importance, "IMPORTANCE", 1, 10)?,
    })
}

/// Parses a reflection reply into (insight, importance) pairs, at most
/// `max`. A reply with no valid insight line is an error.
pub fn parse_insights(text: &str, max: usize) -> Result<Vec<(String, u8)>, ReplyError> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((k, v)) = line.trim().split_once(':') else { continue };
        if !k.trim().eq_ignore_ascii_case("INSIGHT") {
            continue;
        }
        let v = v.trim();
        let Some(open) = v.rfind("(importance ") else { continue };
        let insight = v[..open].trim();
        let imp = v[open + 12..].trim_end_matches(')').trim().parse::<u8>();
        if let (true, Ok(i @ 1..=10)) = (long_enough(insight), imp) {
            out.push((insight.to_string(), i));
        }
        if out.len() == max {
            break;
        }
    }
    if out.is_empty() {
        return Err(ReplyError::Missing("INSIGHT"));
    }
    Ok(out)
}

/// Parses a probe reply.
pub fn parse_probe(text: &str) -> Result<ProbeReply, ReplyError> {
    parse_survey(text, 5)
}

/// Parses the reply to a survey question with `options` numbered options:
/// `ANSWER` must be one of 1 to `options`, `WHY` real text.
pub fn parse_survey(text: &str, options: u8) -> Result<ProbeReply, ReplyError> {
    let [answer, why] = fields(text, ["ANSWER", "WHY"]);
    let answer = int_in(answer, "ANSWER", 1, options)?;
    let why = why.ok_or(ReplyError::Missing("WHY"))?;
    if !long_enough(why) {
        return Err(ReplyError::Invalid { field: "WHY", value: why.to_string() });
    }
    Ok(ProbeReply { answer, why: why.to_string() })
}

/// Parses a `verbalized` reply: `SHARES` must list exactly `options`
/// numbers (commas or a JSON array), none negative or above 100, not all
/// zero. Returns them normalised to sum to 1.
pub fn parse_shares(text: &str, options: u8) -> Result<Vec<f64>, ReplyError> {
    let [shares] = fields(text, ["SHARES"]);
    let raw = shares.ok_or(ReplyError::Missing("SHARES"))?;
    let invalid = || ReplyError::Invalid { field: "SHARES", value: raw.to_string() };
    let list = raw.trim().trim_start_matches('[').trim_end_matches(']');
    let values: Vec<f64> = list
        .split(',')
        .map(|v| crate::scan::parse_f64(v.trim().trim_end_matches('%')))
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    let in_range = values.iter().all(|v| v.is_finite() && (0.0..=100.0).contains(v));
    let total: f64 = values.iter().sum();
    if values.len() != usize::from(options) || !in_range || total <= 0.0 {
        return Err(invalid());
    }
    Ok(values.iter().map(|v| v / total).collect())
}

/// Whether free text is real text: at least
/// [`MIN_TEXT_CHARS`](crate::chat::schema::MIN_TEXT_CHARS) characters,
/// as the reply schemas ask of every provider.
fn long_enough(text: &str) -> bool {
    text.chars().count() >= crate::chat::schema::MIN_TEXT_CHARS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_well_formed_reaction() {
        let r = parse_reaction("REACTION: Nice: but pricey.\nSENTIMENT: -0.25\nINTENT: 2\nIMPORTANCE: 7\n");
        assert_eq!(r, Ok(Reaction { text: "Nice: but pricey.".into(), sentiment: -0.25, intent: 2, importance: 7 }));
    }

    #[test]
    fn rejects_malformed_reactions() {
        assert_eq!(parse_reaction("Sure, I like it!"), Err(ReplyError::Missing("REACTION")));
        let e = parse_reaction("REACTION: Looks okay.\nSENTIMENT: 0.1\nINTENT: 9\nIMPORTANCE: 3");
        assert_eq!(e, Err(ReplyError::Invalid { field: "INTENT", value: "9".into() }));
        let e = parse_reaction("REACTION: Looks okay.\nSENTIMENT: lots\nINTENT: 3\nIMPORTANCE: 3");
        assert!(matches!(e, Err(ReplyError::Invalid { field: "SENTIMENT", .. })));
    }

    /// Free text shorter than ten characters is not a reply, as the
    /// schemas say: a small model under a grammar wrote reactions such as
    /// "," and "1". Ten characters count as characters, not bytes.
    #[test]
    fn free_text_needs_ten_characters() {
        for short in [",", "1", "ok", "Fine, yes"] {
            let e = parse_reaction(&format!("REACTION: {short}\nSENTIMENT: 0.1\nINTENT: 3\nIMPORTANCE: 3"));
            assert_eq!(e, Err(ReplyError::Invalid { field: "REACTION", value: short.into() }));
        }
        let ten = parse_reaction("REACTION: Très chère\nSENTIMENT: 0.1\nINTENT: 3\nIMPORTANCE: 3");
        assert_eq!(ten.map(|r| r.text), Ok("Très chère".to_string()), "ten characters, eleven bytes");
        assert_eq!(
            parse_probe("ANSWER: 4\nWHY: fine"),
            Err(ReplyError::Invalid { field: "WHY", value: "fine".into() })
        );
        let insights = parse_insights("INSIGHT: Tea (importance 6)\nINSIGHT: I like green tea (importance 5)", 3);
        assert_eq!(insights, Ok(vec![("I like green tea".to_string(), 5)]), "a short insight is skipped");
    }

    /// Shares: one per option, in lines or a JSON array, normalised; a list
    /// of the wrong length, a negative share or none at all is refused.
    #[test]
    fn shares_are_one_per_option_and_normalised() {
        assert_eq!(parse_shares("SHARES: 20, 30, 50", 3), Ok(vec![0.2, 0.3, 0.5]));
        let json = crate::chat::schema::to_lines("{\"shares\": [1, 1, 2, 0]}").into_owned();
        assert_eq!(parse_shares(&json, 4), Ok(vec![0.25, 0.25, 0.5, 0.0]));
        assert_eq!(parse_shares("SHARES: 10%, 90%", 2), Ok(vec![0.1, 0.9]));
        for bad in ["SHARES: 50, 50", "SHARES: 50, -10, 60", "SHARES: 0, 0, 0", "SHARES: a, b, c", "SHARES: 200, 1, 1"]
        {
            assert!(matches!(parse_shares(bad, 3), Err(ReplyError::Invalid { field: "SHARES", .. })), "{bad}");
        }
        assert_eq!(parse_shares("{\"shares\": [30, 70", 2), Err(ReplyError::Missing("SHARES")), "broken JSON");
    }

    #[test]
    fn insights_are_capped_and_validated() {
        let text = "INSIGHT: I like my tea (importance 6)\nINSIGHT: broken\nINSIGHT: Price matters (importance 8)\nINSIGHT: an extra one (importance 2)";
        let got = parse_insights(text, 2).expect("two valid");
        assert_eq!(got, vec![("I like my tea".to_string(), 6), ("Price matters".to_string(), 8)]);
        assert!(parse_insights("I have no idea.", 3).is_err());
    }

    #[test]
    fn probe_needs_answer_and_reason() {
        assert_eq!(parse_probe("ANSWER: 4\nWHY: it fits my budget").map(|p| p.answer), Ok(4));
        assert!(parse_probe("ANSWER: 4").is_err());
        assert!(parse_probe("ANSWER: 0\nWHY: it fits my budget").is_err());
    }
}
