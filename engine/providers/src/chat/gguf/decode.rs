//! One reply: the prompt through the model (its stable prefix, then the
//! rest), then token by token, each step masked by llguidance to the tokens
//! the reply's JSON Schema allows there, and sampled with a seeded stream.
//! A reply under a grammar always closes ([`super::close`]).
//!
//! Tokens the model needs not choose (text put in place, a string's
//! close, and each token where the grammar allows only one) are taken as
//! they come and run together, in one pass, when the next choice needs
//! the logits after them: a sampled choice reads the same logits as if
//! each had run alone, since a sequence's rows are the same bits in any
//! pass.

use super::batcher::{Member, Rows};
use super::cache::{Entry, PrefixCache};
use super::close::{Closer, Track, HORIZON};
use super::transformer::{Sequence, Transformer};
use super::vocab::Vocab;
use engine::chat::schema::{instruction, schema_for};
use engine::chat::ChatRequest;
use engine::config::GgufLayout;
use engine::digest::{Digest, DigestWriter};
use engine::rng::Stream;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use toktrie::{SimpleVob, TokenId};

/// The longest free text a schema lets the model write in one field
/// (characters): a reaction is a sentence or two, and a model that never
/// closes its string would otherwise run to the token limit.
pub const MAX_TEXT_CHARS: u64 = 240;

/// The most items a schema lets the model write in a list (insights,
/// points): a small model otherwise repeats itself to the token limit.
pub const MAX_ITEMS: u64 = 3;

/// What decoding needs besides the request: the model, its vocabulary, the
/// grammar compiler, the prefix cache and the settings.
pub struct Decoder<'a> {
    /// The model.
    pub model: &'a Transformer,
    /// Its vocabulary.
    pub vocab: &'a Vocab,
    /// llguidance's grammar compiler over the vocabulary.
    pub factory: &'a ParserFactory,
    /// The prefix cache.
    pub cache: &'a PrefixCache,
    /// The model file's SHA-256 (keys the cache).
    pub model_sha256: &'a str,
    /// Bytes of key/value state per token.
    pub kv_bytes_per_token: u64,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Most tokens generated per phase.
    pub max_tokens: usize,
    /// The reply's layout.
    pub layout: GgufLayout,
    /// [`free_mask`] of the vocabulary.
    pub free: &'a SimpleVob,
    /// The close of a constrained reply.
    pub closer: &'a Closer,
    /// The request's place in the shared forward passes; `None` runs
    /// every pass alone.
    pub member: Option<&'a Member<'a>>,
}

/// A reply and its real token counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decoded {
    /// The reply (a JSON object unless the token limit cut it).
    pub text: String,
    /// Tokens run through the model as prompt.
    pub prompt_tokens: u64,
    /// Of those, tokens whose state came from the prefix cache.
    pub cached_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
}

/// The JSON Schema as decoded: the request's own schema, with free text
/// bounded (at most [`MAX_TEXT_CHARS`], less when the reply's fields must
/// share `max_tokens`), lists at [`MAX_ITEMS`], and llguidance told to allow no
/// whitespace between tokens beyond `", "` and `": "`.
pub fn grammar_schema(request: &ChatRequest, max_tokens: usize) -> Value {
    let mut schema = bounded_schema(request, max_tokens);
    // The free-text field first, so that a written answer can be put in
    // place before the numbers are chosen.
    if let (Some(field), Some(Value::Object(props))) = (free_field(&schema), schema.get("properties").cloned()) {
        let mut ordered = serde_json::Map::new();
        if let Some(v) = props.get(&field) {
            ordered.insert(field.clone(), v.clone());
        }
        for (k, v) in props {
            if k != field {
                ordered.insert(k, v);
            }
        }
        schema["properties"] = Value::Object(ordered);
    }
    schema
}

/// The reply's one free-text field at the top level (a reaction, a
/// probe's reason, a judge's justification), if it has exactly one.
pub fn free_field(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    let mut strings = props.iter().filter(|(_, v)| v.get("type") == Some(&json!("string")));
    let (name, _) = strings.next()?;
    strings.next().is_none().then(|| name.clone())
}

/// The reply's one field when it is a list of free texts (a research
/// agent's points), if the schema has no other field.
pub fn list_field(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    let (name, v) = props.iter().next().filter(|_| props.len() == 1)?;
    let strings = v.get("type") == Some(&json!("array")) && v["items"].get("type") == Some(&json!("string"));
    strings.then(|| name.clone())
}

/// The free-text fields a reply can hold (lists at their longest), and the
/// room each gets.
fn text_slots(schema: &Value, max_tokens: usize) -> (u64, u64) {
    fn slots(v: &Value) -> u64 {
        match v.get("type").and_then(Value::as_str) {
            Some("string") => 1,
            Some("array") => MAX_ITEMS * v.get("items").map_or(0, slots),
            Some("object") => v.get("properties").and_then(Value::as_object).map_or(0, |p| p.values().map(slots).sum()),
            Some(_) | None => 0,
        }
    }
    let n = slots(schema).max(1);
    let room = (max_tokens as u64).saturating_sub(24 * n) / n;
    let min = engine::chat::schema::MIN_TEXT_CHARS as u64;
    (n, room.clamp(min, MAX_TEXT_CHARS))
}

fn bounded_schema(request: &ChatRequest, max_tokens: usize) -> Value {
    fn bound(v: &mut Value, chars: u64) {
        match v {
            Value::Object(map) => {
                if map.get("type") == Some(&json!("string")) && !map.contains_key("maxLength") {
                    map.insert("maxLength".into(), json!(chars));
                }
                if map.get("type") == Some(&json!("array")) && !map.contains_key("maxItems") {
                    map.insert("maxItems".into(), json!(MAX_ITEMS));
                }
                map.values_mut().for_each(|v| bound(v, chars));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| bound(v, chars)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    let mut schema = schema_for(request);
    // Each field gets this many characters, and as many tokens (a string
    // that takes them is closed): with 24 tokens a field for its key and
    // number, the fields share the token limit.
    let (_, room) = text_slots(&schema, max_tokens);
    bound(&mut schema, room);
    schema["x-guidance"] = json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "});
    schema
}

/// Most tokens of the free-text layout's first turn: about
/// [`MAX_TEXT_CHARS`] characters of English.
const FREE_TOKENS: usize = 48;

/// Most tokens of the first turn when the reply is a list of free texts:
/// room for [`MAX_ITEMS`] of them.
const FREE_LIST_TOKENS: usize = FREE_TOKENS * MAX_ITEMS as usize;

/// The points of a list written in the model's own words: one per line,
/// list markers (`-`, `*`, `1.`, `12)`, each followed by a space) taken off, control characters
/// dropped, each cut to `max_chars` characters; lines shorter than the
/// schema's minimum, and lines that only announce what follows (ending in
/// `:`, such as "Here are the findings:"), are skipped; at most
/// `max_items`.
fn own_points(free: &str, max_chars: usize, max_items: usize) -> Vec<String> {
    free.lines()
        .map(|line| {
            let line = line.trim();
            // A marker is followed by a space: "3.5 million" and "-5%" are
            // figures, not markers.
            let marker = |rest: &str| rest.starts_with(char::is_whitespace);
            let unnumbered = line.trim_start_matches(|c: char| c.is_ascii_digit());
            // A list number has one or two digits: "2020. Costs fell" is a year.
            let digits = line.len() - unnumbered.len();
            let line = match unnumbered.strip_prefix(['.', ')']) {
                Some(rest) if (1..=2).contains(&digits) && marker(rest) => rest,
                _ => line.strip_prefix(['-', '*', '\u{2022}']).filter(|rest| marker(rest)).unwrap_or(line),
            };
            let text: String = line.trim().chars().filter(|c| !c.is_control()).take(max_chars).collect();
            text.trim().to_string()
        })
        .filter(|p| p.chars().count() >= engine::chat::schema::MIN_TEXT_CHARS && !p.ends_with(':'))
        .take(max_items)
        .collect()
}

/// The second turn of the free-text layout.
const AS_JSON: &str = "Now give that same answer as one JSON object.";

/// The model's answer for `field` in its own words: the rest of the line
/// after the field's label (`REACTION:`, `Why:`, in any case) when it wrote
/// one, else its first line; at most `max_chars` characters (the field's
/// `maxLength`). `None` when that is shorter than the schema's minimum.
fn own_words(free: &str, field: &str, max_chars: usize) -> Option<String> {
    fn after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
        let line = line.trim_start();
        line.get(..label.len()).filter(|p| p.eq_ignore_ascii_case(label)).map(|_| &line[label.len()..])
    }
    let label = format!("{field}:");
    let labelled = free.lines().find_map(|l| after(l, &label));
    let line = labelled.or_else(|| free.lines().map(str::trim).find(|l| !l.is_empty()))?;
    let text: String = line.trim().chars().filter(|c| !c.is_control()).take(max_chars).collect();
    let text = text.trim().to_string();
    (text.chars().count() >= engine::chat::schema::MIN_TEXT_CHARS).then_some(text)
}

/// Tokens a draw considers at most: the nucleus is taken from the most
/// likely 64 allowed tokens (llama.cpp's default is 40).
const TOP_K: usize = 64;

/// Seeded sampling over the allowed tokens.
pub(super) struct Sampler {
    pub(super) temperature: f64,
    pub(super) top_p: f64,
    pub(super) stream: Stream,
}

impl Sampler {
    /// The next token: the most likely allowed one when greedy (the lowest
    /// id on a tie), else a draw from the nucleus of the allowed tokens'
    /// tempered distribution, ordered by probability then id.
    pub(super) fn pick(&mut self, logits: &[f32], allowed: &SimpleVob) -> Option<TokenId> {
        let mut best: Option<(TokenId, f32)> = None;
        let mut candidates: Vec<(TokenId, f32)> = Vec::new();
        allowed.iter_set_entries(|i| {
            if let Some(&l) = logits.get(i) {
                if l.is_finite() {
                    candidates.push((i as TokenId, l));
                    if best.is_none_or(|(_, b)| l > b) {
                        best = Some((i as TokenId, l));
                    }
                }
            }
        });
        let (top, max) = best?;
        if self.temperature <= 0.0 || candidates.len() == 1 {
            return Some(top);
        }
        // The most likely TOP_K first (by logit, then id); the nucleus is
        // taken from them.
        let by_logit = |a: &(TokenId, f32), b: &(TokenId, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if candidates.len() > TOP_K {
            candidates.select_nth_unstable_by(TOP_K - 1, by_logit);
            candidates.truncate(TOP_K);
        }
        candidates.sort_unstable_by(by_logit);
        let weighted: Vec<(TokenId, f64)> =
            candidates.iter().map(|&(t, l)| (t, ((f64::from(l) - f64::from(max)) / self.temperature).exp())).collect();
        let mut weighted = weighted;
        let total: f64 = weighted.iter().map(|w| w.1).sum();
        let mut mass = 0.0;
        let mut keep = weighted.len();
        for (i, w) in weighted.iter().enumerate() {
            mass += w.1;
            if mass >= self.top_p * total {
                keep = i + 1;
                break;
            }
        }
        weighted.truncate(keep);
        let kept: f64 = weighted.iter().map(|w| w.1).sum();
        let mut draw = self.stream.unit() * kept;
        for (t, w) in &weighted {
            if draw < *w {
                return Some(*t);
            }
            draw -= w;
        }
        weighted.last().map(|w| w.0)
    }
}

impl Decoder<'_> {
    /// The next-token logits after running `tokens` on `seq`: in a pass
    /// shared with the other requests decoding ([`super::batcher`]) when the
    /// decoder is a member, else alone. Counted in [`super::throughput`] as
    /// `rows`.
    pub(super) fn forward(&self, seq: &mut Sequence, tokens: &[TokenId], rows: Rows) -> Result<Vec<f32>, String> {
        if let Some(member) = self.member {
            return member.forward(self.model, seq, tokens, rows).map_err(|e| e.to_string());
        }
        let started = std::time::Instant::now();
        let logits = self.model.forward_one(seq, tokens).map_err(|e| format!("the model failed: {e}"));
        let (prompt, generated) = rows.split(tokens.len());
        super::throughput::count_pass(prompt, generated, 1, true, started.elapsed());
        logits
    }
}

/// A conversation being decoded: its key/value cache, the next-token
/// logits, and the counts so far.
pub(super) struct Session {
    pub(super) seq: Sequence,
    pub(super) logits: Vec<f32>,
    pub(super) counts: Decoded,
}

impl Decoder<'_> {
    /// The reply to `request`, sampled with `seed`.
    pub fn reply(&self, request: &ChatRequest, seed: u64) -> Result<Decoded, super::error::GgufError> {
        self.decode(request, seed).map_err(super::error::GgufError::Decode)
    }

    fn decode(&self, request: &ChatRequest, seed: u64) -> Result<Decoded, String> {
        let key = DigestWriter::new("gguf sampling v1").u64(seed).finish();
        let mut sampler = Sampler { temperature: self.temperature, top_p: self.top_p, stream: Stream::from_key(key.0) };
        let schema = grammar_schema(request, self.max_tokens);
        let (field, list) = match self.layout {
            GgufLayout::FreeText => (free_field(&schema), list_field(&schema)),
            GgufLayout::Schema => (None, None),
        };
        let asked = match (&field, &list) {
            // The prompt as it is: it asks for its answer in its own words.
            (Some(_), _) | (_, Some(_)) => request.prompt.to_string(),
            (None, None) => format!("{}\n{}", request.prompt, instruction(request)),
        };
        let prompt: &str = &asked;
        let rendered = self.vocab.chat(&[("user", prompt)]).map_err(|e| e.to_string())?;
        let stable = engine::persona::prompt::stable_prefix_len(prompt);
        let prefix_end = rendered.find(prompt).map_or(0, |at| at + stable);
        let mut session = self.start(&rendered, &rendered[..prefix_end])?;
        if let Some(list) = list {
            // A list of points in the model's own words, one per line; the
            // JSON object is built around them. With no usable line, the
            // object is decoded under the schema after them, as below.
            let free = self.generate(&mut session, &mut sampler, None, "", FREE_LIST_TOKENS)?;
            let free_text = self.vocab.decode(&free);
            let items = &schema["properties"][&list];
            let max_chars = items["items"]["maxLength"].as_u64().unwrap_or(MAX_TEXT_CHARS) as usize;
            let max_items = items["maxItems"].as_u64().unwrap_or(MAX_ITEMS) as usize;
            let points = own_points(&free_text, max_chars, max_items);
            if !points.is_empty() {
                session.counts.text = json!({ list: points }).to_string();
                return Ok(session.counts);
            }
            let out = self.generate(&mut session, &mut sampler, Some(&schema), "", FREE_TOKENS)?;
            session.counts.text = self.vocab.decode(&out);
            return Ok(session.counts);
        }
        let Some(field) = field else {
            let out = self.generate(&mut session, &mut sampler, Some(&schema), "", FREE_TOKENS)?;
            session.counts.text = self.vocab.decode(&out);
            return Ok(session.counts);
        };
        // The answer in the model's own words, then a second turn asking
        // for it as JSON, its text put in place and only the rest decoded
        // under the schema.
        let free = self.generate(&mut session, &mut sampler, None, "", FREE_TOKENS)?;
        let free_text = self.vocab.decode(&free);
        let both = self
            .vocab
            .chat(&[("user", prompt), ("assistant", &free_text), ("user", AS_JSON)])
            .map_err(|e| e.to_string())?;
        let said = format!("{rendered}{free_text}");
        match both.strip_prefix(&said) {
            Some(rest) => {
                // The state holds the prompt and the answer: only the new
                // turn is run.
                let tokens = self.vocab.encode(rest);
                session.logits = self.forward(&mut session.seq, &tokens, Rows::Prompt)?;
                session.counts.prompt_tokens += tokens.len() as u64;
            }
            None => {
                let counts = session.counts.clone();
                session = self.start(&both, &both[..prefix_end])?;
                session.counts.prompt_tokens += counts.prompt_tokens;
                session.counts.cached_tokens += counts.cached_tokens;
                session.counts.completion_tokens += counts.completion_tokens;
            }
        }
        let max_chars = schema["properties"][&field]["maxLength"].as_u64().unwrap_or(MAX_TEXT_CHARS) as usize;
        let forced = match own_words(&free_text, &field, max_chars) {
            Some(text) => format!("{{{}: {}, ", json!(field), json!(text)),
            None => String::new(),
        };
        let out = self.generate(&mut session, &mut sampler, Some(&schema), &forced, FREE_TOKENS)?;
        session.counts.text = format!("{forced}{}", self.vocab.decode(&out));
        Ok(session.counts)
    }

    /// The model's state after `text`, run as `prefix` (from the cache when
    /// kept) and then the rest, always in those two passes.
    pub(super) fn start(&self, text: &str, prefix: &str) -> Result<Session, String> {
        let tokens = self.vocab.encode(text);
        let head = self.vocab.encode(prefix);
        // The prefix ends where its own tokens stop matching the whole
        // text's (a token may straddle the boundary), and leaves at least
        // one token for the second pass.
        let n = head.iter().zip(&tokens).take_while(|(a, b)| a == b).count().min(tokens.len().saturating_sub(1));
        let mut counts = Decoded { prompt_tokens: tokens.len() as u64, ..Decoded::default() };
        let mut seq = match n {
            0 => self.model.sequence(),
            _ => {
                let key = self.prefix_key(&tokens[..n]);
                match self.cache.get(&key, n) {
                    Some(entry) => {
                        counts.cached_tokens = n as u64;
                        entry.state.clone()
                    }
                    None => {
                        let mut fresh = self.model.sequence();
                        self.forward(&mut fresh, &tokens[..n], Rows::Prompt)?;
                        let bytes = n as u64 * self.kv_bytes_per_token;
                        self.cache.put(key, Entry { state: fresh.clone(), bytes });
                        fresh
                    }
                }
            }
        };
        seq.reserve(tokens.len() - n + self.max_tokens + 64, self.model.hp.kv_width());
        let logits = self.forward(&mut seq, &tokens[n..], Rows::Prompt)?;
        Ok(Session { seq, logits, counts })
    }

    fn prefix_key(&self, tokens: &[TokenId]) -> Digest {
        let mut w = DigestWriter::new("gguf prefix v1");
        w.str(self.model_sha256).u64(tokens.len() as u64);
        for t in tokens {
            w.u32(*t);
        }
        w.finish()
    }

    /// Tokens generated until the end of the turn or the token limit: under
    /// the JSON Schema of `constrained` when given, else any text, at most
    /// `free_tokens` of it (the special tokens other than the end of turn
    /// are never sampled). A
    /// constrained reply always closes: its strings are held to their room
    /// in tokens, and the budget keeps room for the close
    /// ([`super::close`]).
    fn generate(
        &self,
        session: &mut Session,
        sampler: &mut Sampler,
        constrained: Option<&Value>,
        forced: &str,
        free_tokens: usize,
    ) -> Result<Vec<TokenId>, String> {
        let trie = self.vocab.env().tok_trie();
        let mut matcher = match constrained {
            Some(schema) => {
                let grammar = TopLevelGrammar::from_json_schema(schema.clone());
                let parser = self.factory.create_parser(grammar).map_err(|e| format!("the reply's schema: {e}"))?;
                Some(Matcher::new(Ok(parser)))
            }
            None => None,
        };
        let mut track = Track::default();
        // Tokens taken but not yet run through the model: they run together,
        // in one pass, when the next choice needs the logits after them.
        let mut unread = Unread::default();
        if !forced.is_empty() {
            // Text put in place: the grammar checks it, the model reads it.
            let tokens = self.vocab.encode(forced);
            if let Some(m) = &mut matcher {
                m.consume_tokens(&tokens).map_err(|e| format!("constrained decoding of {forced:?}: {e}"))?;
            }
            tokens.iter().for_each(|t| track.push(trie.token(*t)));
            unread.push(&tokens, Rows::Prompt);
            session.counts.prompt_tokens += tokens.len() as u64;
        }
        let room = constrained.map_or(usize::MAX, string_room);
        let limit = if matcher.is_some() { self.max_tokens } else { self.max_tokens.min(free_tokens) };
        let mut out = Vec::new();
        loop {
            let mut near_end = None;
            if let Some(m) = &mut matcher {
                if track.in_string && track.string_tokens >= room {
                    // A string at its room in tokens is closed here, and
                    // decoding goes on after it.
                    let closing = self.closer.close_string(m, track, trie).map_err(|e| e.to_string())?;
                    closing.iter().for_each(|t| track.push(trie.token(*t)));
                    session.counts.completion_tokens += closing.len() as u64;
                    super::throughput::count_close(false);
                    out.extend_from_slice(&closing);
                    if m.is_stopped() {
                        break;
                    }
                    // The close is the grammar's, not sampled: prompt rows.
                    unread.push(&closing, Rows::Prompt);
                    continue;
                }
                let left = limit.saturating_sub(out.len());
                if left <= HORIZON {
                    let closing = self.closer.close(m, track, trie).map_err(|e| e.to_string())?;
                    if closing.len() >= left {
                        // No room for a sampled token and its close (or,
                        // from the first token, the limit is below the
                        // shortest reply the schema allows).
                        self.finish_with(m, session, &mut out, closing)?;
                        break;
                    }
                    near_end = Some(closing);
                }
            }
            let computed;
            let mask = match &mut matcher {
                Some(m) => {
                    computed = m.compute_mask().map_err(|e| format!("constrained decoding: {e}"))?;
                    &computed
                }
                None => self.free,
            };
            // A token the grammar forces is taken as it is (a draw with one
            // candidate is that candidate, and draws nothing from the
            // stream); any other choice needs the logits after every token
            // taken so far.
            let only = self.only_token(mask);
            if only.is_none() {
                if let Some((tokens, rows)) = unread.take() {
                    session.logits = self.forward(&mut session.seq, &tokens, rows)?;
                }
            }
            let Some(token) = only.or_else(|| sampler.pick(&session.logits, mask)) else {
                return Err("constrained decoding left no token to choose".into());
            };
            if let (Some(m), Some(closing)) = (&mut matcher, near_end.take()) {
                // Near the limit, a token is taken only if the reply can
                // still close after it within the limit; else it closes now.
                let mut after = m.deep_clone();
                after.consume_token(token).map_err(|e| format!("constrained decoding: {e}"))?;
                let mut then = track;
                then.push(trie.token(token));
                let left = limit.saturating_sub(out.len());
                if token != self.vocab.eos
                    && 1 + self.closer.close(&after, then, trie).map_err(|e| e.to_string())?.len() > left
                {
                    self.finish_with(m, session, &mut out, closing)?;
                    break;
                }
            }
            if let Some(m) = &mut matcher {
                m.consume_token(token).map_err(|e| format!("constrained decoding: {e}"))?;
            }
            session.counts.completion_tokens += 1;
            if token == self.vocab.eos {
                break;
            }
            out.push(token);
            track.push(trie.token(token));
            if matcher.as_ref().is_some_and(Matcher::is_stopped) || (matcher.is_none() && out.len() >= limit) {
                break;
            }
            // Free text ends with its first line that says something: the
            // answer's own words (the rest would be its numbers in words).
            if matcher.is_none() && trie.token(token).contains(&b'\n') {
                let text = self.vocab.decode(&out);
                if text.lines().any(|l| l.trim().chars().count() >= engine::chat::schema::MIN_TEXT_CHARS) {
                    break;
                }
            }
            unread.push(&[token], if only.is_some() { Rows::Prompt } else { Rows::Generated });
        }
        // What is left unread when a reply ends is never run: a constrained
        // reply is the conversation's last turn, and free text ends right
        // after a choice that ran everything before it.
        debug_assert!(constrained.is_some() || unread.tokens.is_empty(), "free text left tokens unread");
        Ok(out)
    }

    /// The one token `mask` allows, when it allows exactly one the model
    /// knows.
    fn only_token(&self, mask: &SimpleVob) -> Option<TokenId> {
        if mask.num_set() != 1 {
            return None;
        }
        let token = mask.first_bit_set()?;
        (token < self.model.hp.vocab).then_some(token as TokenId)
    }
}

/// Tokens taken and not yet run, and what their rows are: a sampled token
/// can only come first (sampling runs everything before it).
#[derive(Default)]
struct Unread {
    tokens: Vec<TokenId>,
    rows: Option<Rows>,
}

impl Unread {
    fn push(&mut self, tokens: &[TokenId], rows: Rows) {
        if tokens.is_empty() {
            return;
        }
        debug_assert!(
            rows == Rows::Prompt || self.tokens.is_empty(),
            "a sampled token after unread ones; this is a bug"
        );
        self.rows.get_or_insert(rows);
        self.tokens.extend_from_slice(tokens);
    }

    /// The tokens to run now, if any, and their rows.
    fn take(&mut self) -> Option<(Vec<TokenId>, Rows)> {
        let rows = self.rows.take()?;
        Some((std::mem::take(&mut self.tokens), rows))
    }
}

impl Decoder<'_> {
    /// Ends a constrained reply with `closing` (the grammar's close from
    /// `m`'s state), counted as generated tokens.
    fn finish_with(
        &self,
        m: &mut Matcher,
        session: &mut Session,
        out: &mut Vec<TokenId>,
        closing: Vec<TokenId>,
    ) -> Result<(), String> {
        m.consume_tokens(&closing).map_err(|e| format!("closing the reply: {e}"))?;
        session.counts.completion_tokens += closing.len() as u64;
        super::throughput::count_close(true);
        out.extend(closing);
        Ok(())
    }
}

/// The room of a bounded schema's free-text fields: their `maxLength`.
fn string_room(schema: &Value) -> usize {
    fn least(v: &Value) -> Option<u64> {
        match v {
            Value::Object(map) => {
                let here = map.get("maxLength").and_then(Value::as_u64);
                map.values().filter_map(least).chain(here).min()
            }
            Value::Array(items) => items.iter().filter_map(least).min(),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
        }
    }
    least(schema).unwrap_or(MAX_TEXT_CHARS) as usize
}

/// Every ordinary token and the end of turn: what free text may use.
pub fn free_mask(vocab: &Vocab) -> SimpleVob {
    let trie = vocab.env().tok_trie();
    let mut mask = trie.alloc_token_set();
    for t in 0..vocab.size as TokenId {
        if t == vocab.eos || !trie.is_special_token(t) {
            mask.allow_token(t);
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::{list_field, own_points, own_words};
    use engine::chat::{schema::schema, ChatPurpose};

    #[test]
    fn the_own_words_are_the_labelled_line_or_the_first_one() {
        let free = "Sure!\nReaction: I like the grip, but $129 is steep.\nSENTIMENT: 0.2\n";
        assert_eq!(own_words(free, "reaction", 240).as_deref(), Some("I like the grip, but $129 is steep."));
        assert_eq!(
            own_words("  Too pricey for a mug, honestly.\nINTENT: 2", "why", 240).as_deref(),
            Some("Too pricey for a mug, honestly.")
        );
        assert_eq!(own_words("REACTION: meh", "reaction", 240), None, "shorter than 10 characters");
        assert_eq!(
            own_words("WHY: a very long reason indeed", "why", 12).as_deref(),
            Some("a very long"),
            "held to maxLength"
        );
        assert_eq!(own_words("", "why", 240), None);
    }

    /// An agent's points in its own words: one per line, markers off,
    /// short lines skipped, each held to maxLength, at most maxItems.
    #[test]
    fn own_points_are_the_lines_without_their_markers() {
        let free =
            "Here are the findings:\n- Solar costs fell 89% since 2010.\n2. Storage doubles every year.\n\n* ok\n\
                    3) Grid batteries store 4 hours.\n\u{2022} A fourth point past the limit.";
        assert_eq!(
            own_points(free, 240, 3),
            ["Solar costs fell 89% since 2010.", "Storage doubles every year.", "Grid batteries store 4 hours."]
        );
        assert_eq!(
            own_points("1990 was a year of change.", 240, 3),
            ["1990 was a year of change."],
            "a number that is no marker"
        );
        assert_eq!(
            own_points("3.5 million homes have panels.\n-5% is the yearly cost fall.\n2) Storage doubles.", 240, 3),
            ["3.5 million homes have panels.", "-5% is the yearly cost fall.", "Storage doubles."],
            "figures keep their digits and signs"
        );
        assert_eq!(
            own_points("2020. Costs fell by half.", 240, 3),
            ["2020. Costs fell by half."],
            "a year is no marker"
        );
        assert_eq!(own_points("- a very long point indeed", 12, 3), ["a very long"]);
        assert!(own_points("ok\n-\n\n", 240, 3).is_empty());
    }

    /// Only a reply whose one field is a list of strings is written as
    /// lines: the agents' points, not a reflection's insights (objects).
    #[test]
    fn a_list_field_is_an_agents_points_only() {
        assert_eq!(list_field(&schema(ChatPurpose::Agent)).as_deref(), Some("points"));
        for purpose in [ChatPurpose::Reflection, ChatPurpose::Reaction, ChatPurpose::Probe, ChatPurpose::Judge] {
            assert_eq!(list_field(&schema(purpose)), None, "{purpose:?}");
        }
    }
}
