//! Structured replies: the JSON Schema a live model is given for each
//! purpose, and the reading of a JSON reply back into the line format the
//! parsers of [`crate::persona::reply`] and `experiment::model` (the `experiment` crate)
//! check. So one set of parsers and range checks serves scripted and live
//! models alike.

use super::ChatPurpose;
use serde_json::{json, Map, Value};

/// The fewest characters (Unicode scalar values, as JSON Schema's
/// `minLength` counts them) of a reply's free text: a reaction, a probe's
/// reason, a reflection's insight, an agent's point, a judge's
/// justification. A small model constrained by a schema without it wrote
/// reactions such as `","` and `"1"`. The persona parsers refuse shorter
/// text whatever the provider, so a server that ignores the schema is held
/// to it too.
pub const MIN_TEXT_CHARS: usize = 10;

/// The most options a survey question may have (an 11-point scale, 0 to
/// 10, is the longest in common use).
pub const MAX_OPTIONS: u8 = 11;

/// The JSON Schema of a reply to `purpose`, with its ranges (intent 1-5,
/// sentiment -1 to 1, importance 1-10) and its free text at least
/// [`MIN_TEXT_CHARS`] long.
pub fn schema(purpose: ChatPurpose) -> Value {
    let string = json!({"type": "string", "minLength": MIN_TEXT_CHARS});
    let int = |lo: u8, hi: u8| json!({"type": "integer", "minimum": lo, "maximum": hi});
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    match purpose {
        ChatPurpose::Reaction => object(
            json!({
                "reaction": string,
                "sentiment": {"type": "number", "minimum": -1, "maximum": 1},
                "intent": int(1, 5),
                "importance": int(1, 10),
            }),
            &["reaction", "sentiment", "intent", "importance"],
        ),
        ChatPurpose::Reflection => {
            let insight = object(json!({"insight": string, "importance": int(1, 10)}), &["insight", "importance"]);
            object(json!({"insights": {"type": "array", "items": insight, "minItems": 1}}), &["insights"])
        }
        ChatPurpose::Probe => object(json!({"answer": int(1, 5), "why": string}), &["answer", "why"]),
        ChatPurpose::Agent => object(json!({"points": {"type": "array", "items": string, "minItems": 1}}), &["points"]),
        ChatPurpose::Judge => object(json!({"score": int(1, 5), "justification": string}), &["score", "justification"]),
        // The largest scale; `schema_for` narrows it to a request's own
        // options, and the survey parser holds each answer to them.
        ChatPurpose::Survey => object(json!({"answer": int(1, MAX_OPTIONS), "why": string}), &["answer", "why"]),
    }
}

/// The JSON Schema of a reply to `request`: [`schema`] of its purpose,
/// with a survey answer held to the request's own options when it names
/// them (so a constrained server never offers option 9 of 7).
pub fn schema_for(request: &super::ChatRequest) -> Value {
    if request.shares {
        return shares_schema(request.options);
    }
    let mut s = schema(request.purpose);
    if request.purpose == ChatPurpose::Survey && (2..=MAX_OPTIONS).contains(&request.options) {
        s["properties"]["answer"]["maximum"] = json!(request.options);
    }
    s
}

/// The schema of a `verbalized` reply: one share per option, in percent,
/// exactly `options` of them (2 to [`MAX_OPTIONS`]; the largest range when
/// the count is out of it).
pub fn shares_schema(options: u8) -> Value {
    let (least, most) = match (2..=MAX_OPTIONS).contains(&options) {
        true => (options, options),
        false => (2, MAX_OPTIONS),
    };
    let share = json!({"type": "number", "minimum": 0, "maximum": 100});
    json!({
        "type": "object",
        "properties": {"shares": {"type": "array", "items": share, "minItems": least, "maxItems": most}},
        "required": ["shares"],
        "additionalProperties": false,
    })
}

/// The name of `request`'s schema, as `response_format` wants one.
pub fn schema_name_for(request: &super::ChatRequest) -> &'static str {
    match request.shares {
        true => "option_shares",
        false => schema_name(request.purpose),
    }
}

/// The schema's name, as `response_format` wants one.
pub fn schema_name(purpose: ChatPurpose) -> &'static str {
    match purpose {
        ChatPurpose::Reaction => "reaction",
        ChatPurpose::Reflection => "reflection",
        ChatPurpose::Probe => "probe",
        ChatPurpose::Agent => "agent_points",
        ChatPurpose::Judge => "judge_score",
        ChatPurpose::Survey => "survey_answer",
    }
}

/// The instruction appended to a prompt when the server is not given the
/// schema (`structured_output = "json_object"` or `"none"`).
pub fn instruction(request: &super::ChatRequest) -> String {
    format!("Answer with only one JSON object, no other text, matching this JSON Schema:\n{}", schema_for(request))
}

/// The first JSON object in `text`, if any (a model may wrap it in words or
/// a code fence).
pub fn first_object(text: &str) -> Option<Map<String, Value>> {
    text.match_indices('{').find_map(|(i, _)| {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(Value::Object(map))) => Some(map),
            Some(Ok(_) | Err(_)) | None => None,
        }
    })
}

/// A reply in the line format the parsers read. A reply holding a JSON
/// object is rewritten field by field (`"intent": 4` becomes `INTENT: 4`,
/// insights become `INSIGHT: text (importance n)`, points become `- text`);
/// any other reply is returned as it is. Values keep their text, so the
/// parsers' range checks still apply (4.5 is not an intent).
pub fn to_lines(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(map) = first_object(text) else { return std::borrow::Cow::Borrowed(text) };
    let one_line = |v: &Value| match v {
        Value::String(s) => s.replace(['\n', '\r'], " "),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_)) => {
            other.to_string()
        }
    };
    let mut out = String::new();
    for (key, value) in &map {
        match (key.as_str(), value) {
            ("insights", Value::Array(items)) => {
                for item in items {
                    let (Some(insight), Some(imp)) = (item.get("insight"), item.get("importance")) else { continue };
                    out.push_str(&format!("INSIGHT: {} (importance {})\n", one_line(insight), one_line(imp)));
                }
            }
            ("points", Value::Array(items)) => {
                for item in items {
                    out.push_str(&format!("- {}\n", one_line(item)));
                }
            }
            (k, v) => out.push_str(&format!("{}: {}\n", k.to_ascii_uppercase(), one_line(v))),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::reply::{parse_insights, parse_probe, parse_reaction};

    #[test]
    fn json_replies_reach_the_same_parsers_and_range_checks() {
        let wrapped = "Sure! ```json\n{\"reaction\": \"Nice,\\nbut pricey.\", \"sentiment\": -0.25, \"intent\": 2, \"importance\": 7}\n```";
        let r = parse_reaction(&to_lines(wrapped)).expect("parses");
        assert_eq!((r.text.as_str(), r.sentiment, r.intent, r.importance), ("Nice, but pricey.", -0.25, 2, 7));
        let out_of_range = "{\"reaction\": \"Fine by me.\", \"sentiment\": 0.1, \"intent\": 9, \"importance\": 3}";
        assert!(parse_reaction(&to_lines(out_of_range)).is_err(), "intent 9 is refused");
        let probe = parse_probe(&to_lines("{\"answer\": 4, \"why\": \"it fits my life\"}")).expect("probe");
        assert_eq!((probe.answer, probe.why.as_str()), (4, "it fits my life"));
        let insights = "{\"insights\": [{\"insight\": \"I like trails\", \"importance\": 6}]}";
        assert_eq!(parse_insights(&to_lines(insights), 3).expect("insights"), vec![("I like trails".to_string(), 6)]);
        assert_eq!(to_lines("REACTION: plain\n"), "REACTION: plain\n", "line replies pass through");
        assert_eq!(schema(ChatPurpose::Reaction)["properties"]["intent"]["maximum"], 5);
    }

    /// Every purpose's free text asks for at least ten characters, and
    /// every list for at least one item.
    #[test]
    fn free_text_has_a_minimum_length_in_every_schema() {
        let reaction = schema(ChatPurpose::Reaction);
        assert_eq!(reaction["properties"]["reaction"]["minLength"], 10);
        assert_eq!(schema(ChatPurpose::Probe)["properties"]["why"]["minLength"], 10);
        let reflection = schema(ChatPurpose::Reflection);
        assert_eq!(reflection["properties"]["insights"]["items"]["properties"]["insight"]["minLength"], 10);
        assert_eq!(reflection["properties"]["insights"]["minItems"], 1);
        assert_eq!(schema(ChatPurpose::Agent)["properties"]["points"]["items"]["minLength"], 10);
        assert_eq!(schema(ChatPurpose::Judge)["properties"]["justification"]["minLength"], 10);
        assert_eq!(schema(ChatPurpose::Survey)["properties"]["why"]["minLength"], 10);
        // A survey request's schema allows its own options only.
        let request = |options| super::super::ChatRequest::new("m", ChatPurpose::Survey, "q").with_options(options);
        assert_eq!(schema_for(&request(7))["properties"]["answer"]["maximum"], 7);
        assert_eq!(schema_for(&request(0))["properties"]["answer"]["maximum"], MAX_OPTIONS);
        assert!(instruction(&request(2)).contains("\"maximum\":2"));
    }
}
