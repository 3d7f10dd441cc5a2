//! The scripted persona model: a deterministic stand-in for an LLM that
//! answers in character from what the prompt says.

use super::{ChatPort, ChatPurpose, ChatReply, ChatRequest};
use crate::cost::Price;
use crate::digest::DigestWriter;
use crate::rng::Stream;
use crate::scan::{self, mentions};
use crate::BoxFuture;
use std::fmt::Write;

/// The scripted model.
#[derive(Debug, Clone)]
pub struct ScriptedPersonaModel {
    /// Run seed; mixed into every request's stream.
    pub seed: u64,
    /// Probability of an unparseable reply.
    pub malformed_rate: f64,
    /// Nominal price billed per call.
    pub price: Price,
}

/// The facts the model reads back out of a prompt.
#[derive(Debug, Default)]
struct Read<'a> {
    interests: Vec<&'a str>,
    price_sensitivity: f64,
    brands: Vec<(&'a str, f64)>,
    memories: Vec<(f64, &'a str)>,
    kind: &'a str,
    category: &'a str,
    brand: Option<&'a str>,
    price: Option<f64>,
    title: &'a str,
    exposure: u32,
    recent: Vec<&'a str>,
}

fn read(prompt: &str) -> Read<'_> {
    let mut r = Read {
        price_sensitivity: 0.5,
        exposure: 1,
        interests: Vec::with_capacity(4),
        brands: Vec::with_capacity(8),
        memories: Vec::with_capacity(8),
        ..Default::default()
    };
    for line in scan::lines(prompt) {
        // The labels start with distinct bytes (but for the two kinds of
        // list item), so the first byte picks the one label to try.
        match line.as_bytes().first() {
            Some(b'I') => {
                if let Some(v) = line.strip_prefix("Interests: ") {
                    r.interests.extend(scan::split(v, ", "));
                }
            }
            Some(b'P') => {
                if let Some(v) = line.strip_prefix("Price sensitivity: ") {
                    r.price_sensitivity = scan::parse_f64(v.trim()).unwrap_or(0.5);
                }
            }
            Some(b'B') => {
                if let Some(v) = line.strip_prefix("Brand attitudes: ") {
                    r.brands.extend(scan::split(v, ", ").filter_map(|b| {
                        let space = memchr::memrchr(b' ', b.as_bytes())?;
                        Some((&b[..space], scan::parse_f64(&b[space + 1..]).unwrap_or(0.0)))
                    }));
                }
            }
            Some(b'-') => {
                if let Some(v) = line.strip_prefix("- [tick ") {
                    if let Some((_, rest)) = scan::split_once(v, "(sentiment ") {
                        if let Some((s, text)) = scan::split_once(rest, ") ") {
                            r.memories.push((scan::parse_f64(s).unwrap_or(0.0), text));
                        }
                    } else {
                        r.recent.push(v);
                    }
                } else if let Some(v) = line.strip_prefix("- ") {
                    r.recent.push(v);
                }
            }
            Some(b'S') => {
                if let Some(v) = line.strip_prefix("Stimulus: ") {
                    for (i, part) in scan::split(v, " | ").enumerate() {
                        if i == 0 {
                            r.kind = part;
                        } else if let Some(c) = part.strip_prefix("category: ") {
                            r.category = c;
                        } else if let Some(b) = part.strip_prefix("brand: ") {
                            r.brand = Some(b);
                        } else if let Some(p) = part.strip_prefix("price: ") {
                            r.price = scan::parse_f64(p);
                        }
                    }
                }
            }
            Some(b'T') => {
                if let Some(v) = line.strip_prefix("Title: ") {
                    r.title = v;
                }
            }
            Some(b'E') => {
                if let Some(v) = line.strip_prefix("Exposure: ") {
                    r.exposure = v.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(1);
                }
            }
            _ => {}
        }
    }
    r
}

/// A reaction's appeal, before its noise.
struct Appeal {
    base: f64,
    interested: bool,
    attitude: f64,
    recall: f64,
    remembered: bool,
}

/// The scale of the normal noise on a reaction's appeal.
const APPEAL_NOISE: f64 = 0.35;
/// The scale of the normal noise on a 1-5 probe's answer.
const PROBE_NOISE: f64 = 0.6;

/// The probabilities of `round(centre + scale x Z)` clamped to 1 to 5, Z a
/// standard normal: the distribution the model draws a 1-5 answer from.
fn rounded_normal(centre: f64, scale: f64) -> Vec<f64> {
    let below = |edge: f64| 0.5 * libm::erfc(-(edge - centre) / (scale * std::f64::consts::SQRT_2));
    let cuts = [1.5, 2.5, 3.5, 4.5].map(below);
    (0..5)
        .map(|i| {
            let lo = if i == 0 { 0.0 } else { cuts[i - 1] };
            let hi = if i == 4 { 1.0 } else { cuts[i] };
            (hi - lo).max(0.0)
        })
        .collect()
}

const MALFORMED: &[&str] = &[
    "Sure! Honestly, it looks fine to me.",
    "REACTION: Hmm, not sure.\nINTENT: maybe\n",
    "I'd rather not say.",
    "REACTION: It's okay I guess.\nSENTIMENT: 0.1\nINTENT: 7\nIMPORTANCE: 4\n",
];

impl ScriptedPersonaModel {
    /// A reaction's appeal before its noise (`0.35` times a standard
    /// normal draw is added to it), with what the reply's words follow.
    fn appeal(r: &Read<'_>) -> Appeal {
        let interested = r.interests.contains(&r.category);
        let attitude = r.brand.and_then(|b| r.brands.iter().find(|(n, _)| *n == b)).map_or(0.0, |(_, a)| *a);
        let brand_memories: Vec<f64> = r
            .memories
            .iter()
            .filter(|(_, t)| r.brand.is_some_and(|b| mentions(t, b)) || mentions(t, r.category))
            .map(|(s, _)| *s)
            .collect();
        let recall = if brand_memories.is_empty() {
            0.0
        } else {
            brand_memories.iter().sum::<f64>() / brand_memories.len() as f64
        };
        let mood = if r.memories.is_empty() {
            0.0
        } else {
            r.memories.iter().map(|(s, _)| s).sum::<f64>() / r.memories.len() as f64
        };
        let price_term =
            r.price.map_or(0.0, |p| 0.3 - 0.9 * r.price_sensitivity * ((1.0 + p).ln() / 2000f64.ln()).min(1.0));
        let repeat_term = match r.exposure {
            1 => 0.0,
            2 => 0.1,
            _ => -0.15,
        };
        let news_damp = if r.kind == "news" { 0.5 } else { 1.0 };
        let base = news_damp * (if interested { 0.55 } else { -0.25 } + 0.6 * attitude + price_term + repeat_term)
            + 0.5 * recall
            + 0.15 * mood;
        Appeal { base, interested, attitude, recall, remembered: !brand_memories.is_empty() }
    }

    fn react(&self, r: &Read<'_>, s: &mut Stream) -> String {
        let Appeal { base, interested, attitude, recall, remembered } = Self::appeal(r);
        let appeal = base + APPEAL_NOISE * s.normal();
        let intent = (3.0 + 2.2 * appeal).round().clamp(1.0, 5.0) as u8;
        let sentiment = ((1.3 * appeal).tanh() * 100.0).round() / 100.0;
        let importance = (3.0 + 5.0 * appeal.abs() + if r.kind == "news" { 1.0 } else { 0.0 } + s.normal())
            .round()
            .clamp(1.0, 10.0) as u8;

        let openers: &[&str] = match appeal {
            a if a > 0.6 => &["I love this", "This is exactly what I want", "Honestly, I'm sold"],
            a if a > 0.2 => &["This looks promising", "I'm interested", "Not bad at all"],
            a if a > -0.2 => &["I'm on the fence", "It's fine, I suppose", "Hard to say"],
            a if a > -0.6 => &["I'm not convinced", "This doesn't do much for me", "I'm skeptical"],
            _ => &["Hard pass", "This is not for me at all", "No thanks"],
        };
        let mut out = String::with_capacity(256);
        out.push_str("REACTION: ");
        out.push_str(s.pick::<&str>(openers));
        out.push_str(" - ");
        out.push_str(r.title);
        out.push('.');
        if interested {
            out.push_str(" I'm into ");
            out.push_str(r.category);
        } else {
            let mut cat = r.category.chars();
            out.push(' ');
            if let Some(c) = cat.next() {
                out.extend(c.to_uppercase());
            }
            out.push_str(cat.as_str());
            out.push_str(" isn't really my thing");
        }
        match r.price {
            Some(p) => {
                out.push_str(", and $");
                scan::push_fixed0(&mut out, p);
                out.push_str(if r.price_sensitivity > 0.6 { " is a lot for my budget." } else { " seems reasonable." });
            }
            None => out.push('.'),
        }
        if let Some(b) = r.brand {
            if attitude > 0.3 {
                out.push_str(" I've had good experiences with ");
                out.push_str(b);
                out.push('.');
            } else if attitude < -0.3 {
                out.push_str(" I don't really trust ");
                out.push_str(b);
                out.push('.');
            }
        }
        if remembered {
            out.push_str(if recall >= 0.0 {
                " It reminds me of something I liked before."
            } else {
                " It reminds me of something that disappointed me."
            });
        }
        if r.exposure > 2 {
            out.push_str(" I keep seeing this everywhere.");
        }
        out.push_str("\nSENTIMENT: ");
        scan::push_fixed2(&mut out, sentiment, false);
        out.push_str("\nINTENT: ");
        scan::push_uint(&mut out, u64::from(intent));
        out.push_str("\nIMPORTANCE: ");
        scan::push_uint(&mut out, u64::from(importance));
        out.push('\n');
        out
    }

    fn reflect(&self, r: &Read<'_>, s: &mut Stream) -> String {
        let mut candidates: Vec<(String, u8)> = Vec::new();
        let pricey = r.recent.iter().filter(|t| scan::contains(t, "a lot for my budget")).count();
        if pricey > 0 {
            candidates.push(("Price weighs heavily on what I buy".into(), 7));
        }
        for interest in &r.interests {
            let n = r.recent.iter().filter(|t| mentions(t, interest)).count();
            if n > 0 {
                candidates.push((format!("I keep paying attention to {interest} products"), 6));
            }
        }
        let has = |t: &str, a: &str, b: &str| scan::contains(t, a) || scan::contains(t, b);
        let positive = r.recent.iter().filter(|t| has(t, "I love", "promising")).count();
        let negative = r.recent.iter().filter(|t| has(t, "skeptical", "not for me")).count();
        if negative > positive {
            candidates.push(("I am skeptical of most advertising I see".into(), 6));
        } else if positive > 0 {
            candidates.push(("I am open to trying new products when they fit my life".into(), 5));
        }
        candidates.push(("I want proof that a product delivers on its claims".into(), 5));
        // Shuffle deterministically, then keep the first few.
        s.shuffle(&mut candidates);
        let mut out = String::new();
        for (text, imp) in candidates.into_iter().take(3) {
            let _ = writeln!(out, "INSIGHT: {text} (importance {imp})");
        }
        out
    }

    /// The mean sentiment of the recalled memories, 0 for none.
    fn mood(r: &Read<'_>) -> f64 {
        if r.memories.is_empty() {
            0.0
        } else {
            r.memories.iter().map(|(s, _)| s).sum::<f64>() / r.memories.len() as f64
        }
    }

    fn answer(&self, r: &Read<'_>, s: &mut Stream) -> String {
        let answer = (3.0 + 2.0 * Self::mood(r) + PROBE_NOISE * s.normal()).round().clamp(1.0, 5.0) as u8;
        let why = match answer {
            4 | 5 => "Some of what I saw fits my life well.",
            3 => "Some things were interesting, but nothing stood out.",
            _ => "Nothing I saw felt worth the money.",
        };
        let mut out = String::with_capacity(16 + why.len());
        out.push_str("ANSWER: ");
        scan::push_uint(&mut out, u64::from(answer));
        out.push_str("\nWHY: ");
        out.push_str(why);
        out.push('\n');
        out
    }

    /// A survey answer by the model's own rule: one of the prompt's
    /// numbered options (lines `N. label`), uniformly at random from the
    /// request's stream. It reads nothing else of the prompt, traits
    /// included, so its figures are the floor a real model must beat.
    fn survey(prompt: &str, s: &mut Stream) -> String {
        let options: Vec<&str> = scan::lines(prompt)
            .filter_map(|line| {
                let (number, label) = line.trim_start().split_once(". ")?;
                (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some(label.trim())
            })
            .collect();
        if options.is_empty() {
            return String::from("The question lists no numbered options.\n");
        }
        let pick = s.below(options.len());
        format!("ANSWER: {}\nWHY: Of the options given, {:?} fits me best.\n", pick + 1, options[pick])
    }

    /// The distribution it draws an answer to `request` from (see
    /// [`ChatPort::option_probabilities`] of this model).
    fn distribution(request: &ChatRequest) -> Vec<f64> {
        let k = request.options.max(1) as usize;
        match (request.purpose, k) {
            (ChatPurpose::Reaction, 5) => {
                rounded_normal(3.0 + 2.2 * Self::appeal(&read(&request.prompt)).base, 2.2 * APPEAL_NOISE)
            }
            (ChatPurpose::Probe, 5) => rounded_normal(3.0 + 2.0 * Self::mood(&read(&request.prompt)), PROBE_NOISE),
            _ => vec![1.0 / k as f64; k],
        }
    }

    /// A `verbalized` reply: the distribution it draws from, in percent
    /// to two decimals.
    fn shares(request: &ChatRequest) -> String {
        let mut out = String::from("SHARES: ");
        for (i, p) in Self::distribution(request).iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            scan::push_fixed2(&mut out, 100.0 * p, false);
        }
        out.push('\n');
        out
    }

    /// The reply text for a request, without billing.
    pub fn reply_text(&self, request: &ChatRequest) -> String {
        let key = DigestWriter::new("scripted persona model v1").u64(self.seed).digest(&request.digest()).finish();
        let mut s = Stream::from_key(key.0);
        if s.unit() < self.malformed_rate {
            return s.pick(MALFORMED).to_string();
        }
        if request.shares {
            return Self::shares(request);
        }
        let r = read(&request.prompt);
        match request.purpose {
            ChatPurpose::Reaction => self.react(&r, &mut s),
            ChatPurpose::Reflection => self.reflect(&r, &mut s),
            ChatPurpose::Probe => self.answer(&r, &mut s),
            // Agents have their own model (`experiment::ScriptedAgentModel`).
            ChatPurpose::Agent => String::from("The persona model does not play research agents.\n"),
            // Judges too (`experiment::judge::ScriptedJudge`).
            ChatPurpose::Judge => String::from("The persona model does not judge reports.\n"),
            ChatPurpose::Survey => Self::survey(&request.prompt, &mut s),
        }
    }
}

impl ChatPort for ScriptedPersonaModel {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, crate::chat::ChatResult<ChatReply>> {
        crate::chat::scripted_reply(&self.price, request, self.reply_text(request))
    }

    /// The distribution it draws the answer from, before the draw: uniform
    /// over a survey question's options; for a 1-5 probe and a reaction's
    /// purchase intent, the rounded normal its answer is drawn from (so a
    /// weighed intent does not see the reaction's own draw). The prompt is
    /// billed, no reply.
    fn option_probabilities<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, crate::chat::ChatResult<crate::chat::OptionProbabilities>> {
        let spend = self.price.bill(crate::cost::estimate_tokens(&request.prompt), 0);
        let probabilities = Self::distribution(request);
        Box::pin(std::future::ready(Ok(crate::chat::OptionProbabilities {
            probabilities,
            mass: 1.0,
            raised: None,
            spend,
            estimated: true,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::reply::{parse_insights, parse_probe, parse_reaction};

    fn model(malformed_rate: f64) -> ScriptedPersonaModel {
        ScriptedPersonaModel { seed: 9, malformed_rate, price: Price::from_usd_per_mtok(0.15, 0.6) }
    }

    fn prompt(interests: &str, sensitivity: f64, price: f64) -> String {
        format!(
            "You are X.\nInterests: {interests}\nPrice sensitivity: {sensitivity:.2}\nBrand attitudes: Acme +0.50, Nimbus -0.40\n\
             \nMemories you recall:\n(none)\n\nStimulus: product | category: fitness | brand: Acme | price: {price:.2}\n\
             Title: Shoe\nText: A shoe.\nExposure: 1 of this stimulus this tick\n"
        )
    }

    fn req(purpose: ChatPurpose, prompt: String, attempt: u32) -> ChatRequest {
        ChatRequest::new("scripted", purpose, prompt).attempt(attempt)
    }

    #[test]
    fn replies_parse_and_follow_traits() {
        let m = model(0.0);
        let mean_intent = |interests: &str, sens: f64, price: f64| {
            (0..200)
                .map(|a| {
                    let text = m.reply_text(&req(ChatPurpose::Reaction, prompt(interests, sens, price), a));
                    f64::from(parse_reaction(&text).expect("well formed").intent)
                })
                .sum::<f64>()
                / 200.0
        };
        let fan = mean_intent("fitness, music", 0.1, 20.0);
        let indifferent = mean_intent("cooking, music", 0.9, 1500.0);
        assert!(fan > indifferent + 1.0, "fan {fan} vs indifferent {indifferent}");
    }

    #[test]
    fn same_request_same_reply_and_attempts_differ() {
        let m = model(0.5);
        let a = m.reply_text(&req(ChatPurpose::Reaction, prompt("fitness", 0.5, 50.0), 0));
        assert_eq!(a, m.reply_text(&req(ChatPurpose::Reaction, prompt("fitness", 0.5, 50.0), 0)));
        let distinct: std::collections::BTreeSet<String> =
            (0..20).map(|i| m.reply_text(&req(ChatPurpose::Reaction, prompt("fitness", 0.5, 50.0), i))).collect();
        assert!(distinct.len() > 2);
    }

    #[test]
    fn malformed_rate_is_respected() {
        let m = model(0.3);
        let bad = (0..2000)
            .filter(|i| parse_reaction(&m.reply_text(&req(ChatPurpose::Reaction, prompt("x", 0.5, 5.0), *i))).is_err())
            .count();
        assert!((450..750).contains(&bad), "{bad} of 2000 malformed");
    }

    /// Its probabilities are the distribution it draws from: intent over
    /// 4,000 attempts (each a fresh draw) against the weighed intent, and
    /// the same for a 1-5 probe. Chi-square with 4 degrees of freedom:
    /// 18.47 is the 0.001 critical value.
    #[test]
    fn weighed_answers_are_the_distribution_replies_are_drawn_from() {
        let m = model(0.0);
        let chi_square = |purpose: ChatPurpose, prompt: String, pick: &dyn Fn(&str) -> u8| {
            let weighed =
                block_on(m.option_probabilities(&req(purpose, prompt.clone(), 0).with_options(5))).expect("weighed");
            assert!((weighed.probabilities.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            let mut counts = [0.0; 5];
            let n = 4000;
            for a in 0..n {
                counts[usize::from(pick(&m.reply_text(&req(purpose, prompt.clone(), a)))) - 1] += 1.0;
            }
            let expected: Vec<f64> = weighed.probabilities.iter().map(|p| p * f64::from(n)).collect();
            let chi: f64 =
                counts.iter().zip(&expected).filter(|(_, e)| **e > 0.0).map(|(c, e)| (c - e).powi(2) / e).sum();
            (chi, weighed.probabilities)
        };
        let (chi, p) = chi_square(ChatPurpose::Reaction, prompt("fitness", 0.5, 80.0), &|t| {
            parse_reaction(t).expect("reaction").intent
        });
        assert!(chi < 18.47, "intent: chi-square {chi}, probabilities {p:?}");
        assert!(p.iter().filter(|x| **x > 0.05).count() >= 2, "not a point mass: {p:?}");
        let probe = "Memories you recall:\n- [tick 1] (sentiment +0.40) good\n\nSurvey question: ok?\n".to_string();
        let (chi, p) = chi_square(ChatPurpose::Probe, probe, &|t| parse_probe(t).expect("probe").answer);
        assert!(chi < 18.47, "probe: chi-square {chi}, probabilities {p:?}");
    }

    fn block_on<T>(f: crate::BoxFuture<'_, T>) -> T {
        crate::testing::block_on_ready(f)
    }

    #[test]
    fn reflections_and_probes_parse() {
        let m = model(0.0);
        let p = "Interests: fitness\n\nRecent experiences:\n- I love this - Shoe. I'm into fitness.\n";
        assert!(parse_insights(&m.reply_text(&req(ChatPurpose::Reflection, p.into(), 0)), 3).is_ok());
        let p = "Memories you recall:\n- [tick 1] (sentiment +0.80) good\n\nSurvey question: ok?\n";
        assert!(parse_probe(&m.reply_text(&req(ChatPurpose::Probe, p.into(), 0))).is_ok());
    }
}
