//! Closing a reply that the grammar constrains, so that it always parses.
//!
//! A reply runs under a token limit, and a string's bound is in characters
//! while an emoji is several tokens: without care a reply can end inside a
//! string. Two rules prevent it:
//!
//! - **The budget keeps room for the close.** Once the budget left is
//!   within [`HORIZON`], each step asks [`Closer::close`] for the tokens
//!   that finish the JSON from where it stands, and a sampled token is
//!   taken only if the close after it still fits in what is left; else the
//!   close from before it is appended and the reply ends there. So a reply
//!   stays within the limit whenever the shortest reply the schema allows
//!   does; a limit below that is passed by exactly that close, from the
//!   first token.
//! - **A string's bound is kept in tokens too.** [`Track`] follows the
//!   reply's bytes; a string that has taken as many tokens as its
//!   `maxLength` in characters is closed ([`Closer::close_string`]) and
//!   decoding goes on with the next field.
//!
//! A close is chosen without the model, by a fixed walk over what the
//! grammar allows at each step (llguidance's mask): the tokens the grammar
//! forces; else, inside a string, `"` (then `.` as filler while the string
//! is shorter than its `minLength`); outside, `}`, `]`, `,`, `"`, then the
//! digits from `0` up; else the allowed single-byte token with the lowest
//! id (the rest of a character cut by the budget, an escape's digits). Each
//! step is checked by the grammar, so a close is always valid, and the walk
//! is bounded ([`MAX_STEPS`]). The numbers a close writes are the smallest
//! the schema allows: a close is a repair, counted in
//! [`super::throughput::Throughput::closes`], not an answer.

use super::error::GgufError;
use llguidance::Matcher;
use toktrie::{SimpleVob, TokTrie, TokenId};

/// Budget (tokens left) below which each step checks the close.
pub const HORIZON: usize = 96;

/// The most tokens a close may take; a grammar that needs more is a bug.
pub const MAX_STEPS: usize = 512;

/// Where the reply's bytes stand: in a string or not, after a backslash,
/// and how many tokens the current string has taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Track {
    /// Inside a JSON string.
    pub in_string: bool,
    escaped: bool,
    /// Tokens that began inside the current string.
    pub string_tokens: usize,
}

impl Track {
    /// The state after `bytes` (one token's).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.in_string {
            self.string_tokens += 1;
        }
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else if b == b'"' {
                self.in_string = true;
                self.string_tokens = 0;
            }
        }
    }
}

/// The single-byte tokens a close is made of.
#[derive(Debug, Clone)]
pub struct Closer {
    quote: Option<TokenId>,
    filler: Option<TokenId>,
    outside: Vec<TokenId>,
    single: SimpleVob,
}

impl Closer {
    /// The closer over a vocabulary's trie.
    pub fn new(trie: &TokTrie) -> Closer {
        let id = |b: &[u8]| trie.token_id(b);
        let mut outside: Vec<TokenId> = [b"}", b"]", b",", b"\""].iter().filter_map(|b| id(*b)).collect();
        outside.extend((b'0'..=b'9').filter_map(|d| id(&[d])));
        let mut single = trie.alloc_token_set();
        for t in 0..trie.vocab_size() as TokenId {
            if trie.token_len(t) == 1 && !trie.is_special_token(t) {
                single.allow_token(t);
            }
        }
        Closer { quote: id(b"\""), filler: id(b"."), outside, single }
    }

    /// The tokens that end the reply from `matcher`'s state (`track` being
    /// where its bytes stand), walked on a copy of the matcher.
    pub fn close(&self, matcher: &Matcher, track: Track, trie: &TokTrie) -> Result<Vec<TokenId>, GgufError> {
        let mut m = matcher.deep_clone();
        self.walk(&mut m, track, trie, |_, _| false).map_err(GgufError::Decode)
    }

    /// The tokens that end the current string, consumed by `matcher`
    /// itself (decoding goes on after them).
    pub fn close_string(&self, matcher: &mut Matcher, track: Track, trie: &TokTrie) -> Result<Vec<TokenId>, GgufError> {
        self.walk(matcher, track, trie, |t, _| !t.in_string).map_err(GgufError::Decode)
    }

    fn walk(
        &self,
        m: &mut Matcher,
        mut track: Track,
        trie: &TokTrie,
        done: impl Fn(&Track, usize) -> bool,
    ) -> Result<Vec<TokenId>, String> {
        let mut out = Vec::new();
        while !done(&track, out.len()) {
            if m.is_stopped() {
                return Ok(out);
            }
            if out.len() >= MAX_STEPS {
                return Err(format!("the grammar did not close within {MAX_STEPS} tokens"));
            }
            let forced = m.compute_ff_tokens();
            let tokens = if forced.is_empty() {
                let mask = m.compute_mask().map_err(|e| format!("closing the reply: {e}"))?;
                if mask.is_allowed(trie.eos_token()) && m.is_accepting().unwrap_or(false) {
                    return Ok(out);
                }
                vec![self.pick(&mask, track).ok_or("closing the reply: the grammar allows no single-byte token")?]
            } else {
                forced
            };
            m.consume_tokens(&tokens).map_err(|e| format!("closing the reply: {e}"))?;
            for &t in &tokens {
                track.push(trie.token(t));
            }
            out.extend(tokens);
        }
        Ok(out)
    }

    fn pick(&self, mask: &SimpleVob, track: Track) -> Option<TokenId> {
        let preferred: &[Option<TokenId>] = if track.in_string { &[self.quote, self.filler] } else { &[] };
        let first = preferred.iter().flatten().find(|t| mask.is_allowed(**t)).copied();
        let first = first.or_else(|| {
            if track.in_string {
                None
            } else {
                self.outside.iter().find(|t| mask.is_allowed(**t)).copied()
            }
        });
        first.or_else(|| mask.first_bit_set_here_and_in(&self.single).map(|t| t as TokenId))
    }
}

#[cfg(test)]
mod tests {
    use super::Track;

    #[test]
    fn the_track_follows_strings_and_escapes() {
        let mut t = Track::default();
        t.push(b"{\"reaction\": \"");
        assert!(t.in_string);
        t.push(b"say \\\"hi");
        assert!(t.in_string, "an escaped quote stays inside");
        assert_eq!(t.string_tokens, 1);
        t.push(b"\\\\");
        t.push(b"\", ");
        assert!(!t.in_string, "a quote after an escaped backslash ends it");
        assert_eq!(t.string_tokens, 3);
        t.push(b"\"x");
        assert_eq!((t.in_string, t.string_tokens), (true, 0), "a new string counts afresh");
    }
}
