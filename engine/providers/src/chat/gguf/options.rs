//! A closed question's options as the model weighs them: the exact
//! probability of each option at the answer slot, with no reply generated
//! (`--answer-mode probabilities`).
//!
//! The slot is where the survey prompt's own format puts the answer: the
//! assistant's turn opened with `ANSWER:`. What follows is an option's
//! number, written ` 4` (or `4`), and then anything that is not a digit (a
//! newline, a full stop, the end of the turn), which ends it. An option's
//! probability is the product, along its tokens, of each token's
//! probability among the tokens that can continue or end a valid option
//! there (the model's softmax at temperature 1, renormalised over them),
//! the ending token included: option 1 is not credited with the mass that
//! goes on to 10 or 11. Every path the tokenizer allows is walked (` 1`
//! then `0`, or ` 10`, or ` ` then `10`), each on a copy of the slot's
//! key/value state; the prompt is run once.

use super::batcher::Rows;
use super::decode::{Decoder, Sampler};
use engine::chat::ChatRequest;
use engine::digest::DigestWriter;
use engine::rng::Stream;
use toktrie::{SimpleVob, TokenId};

/// What the assistant's turn opens with unless the request names its own
/// slot ([`ChatRequest::slot`]): the survey prompt's answer label.
pub const SLOT: &str = engine::chat::ANSWER_SLOT;

/// The options' probabilities at the slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighed {
    /// One per option, summing to 1.
    pub probabilities: Vec<f64>,
    /// The share of the model's whole distribution that the tokens able to
    /// begin an option had at the slot.
    pub mass: f64,
    /// Tokens run as prompt (the slot's prompt, and each path's tokens).
    pub prompt_tokens: u64,
    /// Of the prompt's, those whose state came from the prefix cache.
    pub cached_tokens: u64,
}

/// What a token does to the text after the slot: `text` is what the
/// number has so far (an optional space, then digits).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Not allowed here.
    No,
    /// The number goes on: the text becomes this.
    Continue(Vec<u8>),
    /// The number ends, as this option (from 1).
    End(u8),
}

/// What `token` (its bytes) does after `text`, for options 1 to `k`.
fn step(text: &[u8], token: &[u8], special: bool, k: u8) -> Step {
    let is_option = |digits: &[u8]| -> Option<u8> {
        let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        (digits[0] != b'0' && (1..=u32::from(k)).contains(&n)).then_some(n as u8)
    };
    let could_become = |digits: &[u8]| (1..=k).any(|o| o.to_string().as_bytes().starts_with(digits));
    let digits_of = |t: &[u8]| t.strip_prefix(b" ").unwrap_or(t).to_vec();
    if special {
        // The end of the turn (or any special token) ends a number begun.
        return match is_option(&digits_of(text)) {
            Some(o) if !digits_of(text).is_empty() => Step::End(o),
            _ => Step::No,
        };
    }
    let mut all = text.to_vec();
    all.extend_from_slice(token);
    let spaced = all.first() == Some(&b' ');
    let body = if spaced { &all[1..] } else { &all[..] };
    let lead = body.iter().take_while(|b| b.is_ascii_digit()).count();
    let (digits, rest) = body.split_at(lead);
    match (digits.is_empty(), rest.is_empty()) {
        // A lone space: the number may follow.
        (true, true) => match spaced && all.len() == 1 {
            true => Step::Continue(all),
            false => Step::No,
        },
        (true, false) => Step::No,
        (false, true) => match could_become(digits) {
            true => Step::Continue(all),
            false => Step::No,
        },
        (false, false) => is_option(digits).map_or(Step::No, Step::End),
    }
}

/// The allowed tokens after `text`, each with what it does.
fn moves(d: &Decoder<'_>, text: &[u8], k: u8) -> Vec<(TokenId, Step)> {
    let trie = d.vocab.env().tok_trie();
    (0..d.vocab.size as TokenId)
        .filter_map(|t| {
            let special = trie.is_special_token(t);
            if special && t != d.vocab.eos {
                return None;
            }
            match step(text, trie.token(t), special, k) {
                Step::No => None,
                s @ (Step::Continue(_) | Step::End(_)) => Some((t, s)),
            }
        })
        .collect()
}

/// The softmax of `logits` over `allowed` (f64, in token order), and the
/// share of the whole distribution they hold.
fn softmax(logits: &[f32], allowed: &[(TokenId, Step)]) -> (Vec<f64>, f64) {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let all: f64 = logits.iter().map(|&l| (f64::from(l) - f64::from(top)).exp()).sum();
    let weights: Vec<f64> =
        allowed.iter().map(|(t, _)| (f64::from(logits[*t as usize]) - f64::from(top)).exp()).collect();
    let total: f64 = weights.iter().sum();
    let shares = weights.iter().map(|w| if total > 0.0 { w / total } else { 0.0 }).collect();
    (shares, if all > 0.0 { total / all } else { 0.0 })
}

impl Decoder<'_> {
    /// The slot's session: the request's prompt in the chat template, the
    /// assistant's turn opened with the request's slot ([`SLOT`] unless it
    /// names another, such as a reaction's lines up to `INTENT:`).
    fn slot(&self, request: &ChatRequest) -> Result<super::decode::Session, String> {
        let prompt: &str = &request.prompt;
        let rendered = self.vocab.chat(&[("user", prompt)]).map_err(|e| e.to_string())?;
        let stable = engine::persona::prompt::stable_prefix_len(prompt);
        let prefix_end = rendered.find(prompt).map_or(0, |at| at + stable);
        let slot = request.slot.as_deref().unwrap_or(SLOT);
        self.start(&format!("{rendered}{slot}"), &rendered[..prefix_end])
    }

    /// The probability of each of `request`'s options (`options`, from 1)
    /// at the answer slot.
    pub fn option_probabilities(&self, request: &ChatRequest) -> Result<Weighed, super::error::GgufError> {
        self.weigh(request).map_err(super::error::GgufError::Decode)
    }

    fn weigh(&self, request: &ChatRequest) -> Result<Weighed, String> {
        let k = request.options;
        if k < 2 {
            return Err(format!("option probabilities need 2 or more options, the request has {k}"));
        }
        let session = self.slot(request)?;
        let mut counts = session.counts.clone();
        let mut probabilities = vec![0.0; usize::from(k)];
        let mut mass = None;
        // Depth first, in token order: (text so far, its probability, the
        // state after it, the next-token logits).
        let mut stack = vec![(Vec::new(), 1.0f64, session.seq, session.logits)];
        while let Some((text, p, seq, logits)) = stack.pop() {
            let allowed = moves(self, &text, k);
            let (shares, held) = softmax(&logits, &allowed);
            mass.get_or_insert(held);
            for ((t, s), share) in allowed.iter().zip(shares) {
                match s {
                    Step::End(o) => probabilities[usize::from(*o) - 1] += p * share,
                    Step::Continue(next) if share > 0.0 => {
                        let mut seq = seq.clone();
                        let logits = self.forward(&mut seq, &[*t], Rows::Prompt)?;
                        counts.prompt_tokens += 1;
                        stack.push((next.clone(), p * share, seq, logits));
                    }
                    Step::Continue(_) | Step::No => {}
                }
            }
        }
        let total: f64 = probabilities.iter().sum();
        if total <= 0.0 {
            return Err("no option had any probability at the answer".into());
        }
        probabilities.iter_mut().for_each(|p| *p /= total);
        Ok(Weighed {
            probabilities,
            mass: mass.unwrap_or(0.0),
            prompt_tokens: counts.prompt_tokens,
            cached_tokens: counts.cached_tokens,
        })
    }

    /// `draws` answers sampled at the same slot, at temperature 1 and top-p
    /// 1, token by token among the same allowed tokens, seeded by `seed`:
    /// the options chosen, for checking [`Decoder::option_probabilities`]
    /// against sampling.
    pub fn option_draws(
        &self,
        request: &ChatRequest,
        draws: usize,
        seed: u64,
    ) -> Result<Vec<u8>, super::error::GgufError> {
        self.sample_slot(request, draws, seed).map_err(super::error::GgufError::Decode)
    }

    fn sample_slot(&self, request: &ChatRequest, draws: usize, seed: u64) -> Result<Vec<u8>, String> {
        let k = request.options;
        let session = self.slot(request)?;
        let key = DigestWriter::new("gguf option draws v1").u64(seed).finish();
        let mut sampler = Sampler { temperature: 1.0, top_p: 1.0, stream: Stream::from_key(key.0) };
        let trie = self.vocab.env().tok_trie();
        // Each text's state and allowed tokens, computed once.
        type Node = (super::transformer::Sequence, Vec<f32>, Vec<(TokenId, Step)>, SimpleVob);
        let mut nodes: std::collections::BTreeMap<Vec<u8>, Node> = Default::default();
        let node = |seq: super::transformer::Sequence, logits: Vec<f32>, text: &[u8]| {
            let allowed = moves(self, text, k);
            let mut mask = trie.alloc_token_set();
            allowed.iter().for_each(|(t, _)| mask.allow_token(*t));
            (seq, logits, allowed, mask)
        };
        nodes.insert(Vec::new(), node(session.seq, session.logits, &[]));
        let mut out = Vec::with_capacity(draws);
        for _ in 0..draws {
            let mut text = Vec::new();
            loop {
                let (seq, logits, allowed, mask) = &nodes[&text];
                let t = sampler.pick(logits, mask).ok_or("no token can begin an option at the answer")?;
                let s = allowed.iter().find(|(a, _)| *a == t).map(|(_, s)| s.clone()).ok_or("a masked token")?;
                match s {
                    Step::End(o) => {
                        out.push(o);
                        break;
                    }
                    Step::Continue(next) => {
                        if !nodes.contains_key(&next) {
                            let mut seq = seq.clone();
                            let logits = self.forward(&mut seq, &[t], Rows::Prompt)?;
                            let made = node(seq, logits, &next);
                            nodes.insert(next.clone(), made);
                        }
                        text = next;
                    }
                    Step::No => return Err("a token the mask refuses".into()),
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{step, Step};

    #[test]
    fn a_number_ends_at_its_first_other_character_and_must_be_an_option() {
        let k = 11;
        assert_eq!(step(b"", b" 4", false, k), Step::Continue(b" 4".to_vec()));
        assert_eq!(step(b" 4", b"\n", false, k), Step::End(4));
        assert_eq!(step(b"", b" 4.", false, k), Step::End(4));
        assert_eq!(step(b"", b" ", false, k), Step::Continue(b" ".to_vec()));
        assert_eq!(step(b" ", b" ", false, k), Step::No, "one space at most");
        assert_eq!(step(b" 1", b"0", false, k), Step::Continue(b" 10".to_vec()), "10 and 11 go on from 1");
        assert_eq!(step(b" 1", b"2", false, k), Step::No, "12 is no option");
        assert_eq!(step(b" 10", b",", false, k), Step::End(10));
        assert_eq!(step(b"", b" 0", false, k), Step::No);
        assert_eq!(step(b"", b"7", false, 5), Step::No, "7 of 5");
        assert_eq!(step(b"", b"abc", false, k), Step::No);
        assert_eq!(step(b" 3", b"<|im_end|>", true, k), Step::End(3), "the end of the turn ends it");
        assert_eq!(step(b"", b"<|im_end|>", true, k), Step::No);
    }
}
