//! What the chat model sees.
//!
//! Prompts are plain text with labelled lines, so a real model can answer
//! them and the scripted model can read the same facts back out of them
//! (it sees nothing a real model would not).
//!
//! They are laid out for the prompt caches of the servers (vLLM, SGLang,
//! llama.cpp's server, OpenAI): what repeats comes first and is
//! byte-identical wherever it repeats. Every prompt opens with the
//! persona's header (the same for the persona in every prompt). A
//! reaction's reply format follows it (the same in every reaction), then
//! what varies: the recalled memories in the order they were formed (so
//! that memories recalled again keep their place and their bytes), then the
//! stimulus. Probes and reflections keep their question and format last,
//! after the memories they are about.

use super::memory::MemoryRecord;
use super::profile::Profile;
use crate::scan::{push_fixed2, push_uint};
use crate::scenario::Stimulus;
use std::fmt::Write;

/// Where the stable part of a persona prompt ends, in bytes: the persona's
/// header and, for a reaction, its reply format; everything a persona's
/// every prompt of that kind repeats byte for byte. It ends where the
/// recalled memories (reactions, probes, survey questions) or the recent
/// experiences (reflections) begin, or where a `validate` question follows
/// its respondent's description (the respondent's every question repeats
/// what comes before); a prompt with none of these (an agent's) has no
/// stable prefix here, 0. A local model keeps the key/value state of
/// this prefix for the persona's next call.
pub fn stable_prefix_len(prompt: &str) -> usize {
    ["\nMemories you recall:\n", "\nRecent experiences:\n", "\nQuestion: "]
        .iter()
        .filter_map(|m| prompt.find(m))
        .min()
        .unwrap_or(0)
}

/// The memories of `recalled` in the order they were formed.
fn in_order<'a>(recalled: &[&'a MemoryRecord]) -> Vec<&'a MemoryRecord> {
    let mut v = recalled.to_vec();
    v.sort_by_key(|m| m.id.seq);
    v
}

/// The persona block that opens every prompt. A persona given by data
/// states its name and its row's traits, and nothing else.
pub fn persona_header(p: &Profile) -> String {
    if let Some(given) = &p.given {
        let mut s = String::with_capacity(64 + 32 * given.traits.len());
        let _ = writeln!(s, "You are {}.", p.name);
        s.push_str("About you:\n");
        s.push_str(&given.describe());
        return s;
    }
    let mut s = String::with_capacity(400);
    let _ = writeln!(s, "You are {}, {}, a {} in {}. {}", p.name, p.age, p.occupation, p.city, p.bio);
    s.push_str("Interests: ");
    for (i, interest) in p.interests.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(interest);
    }
    s.push_str("\nHousehold income: ");
    s.push_str(&p.income);
    s.push_str("\nPrice sensitivity: ");
    push_fixed2(&mut s, f64::from(p.price_sensitivity), false);
    s.push_str("\nBrand attitudes:");
    for (i, (brand, att)) in p.brand_attitudes.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { ", " });
        s.push_str(brand);
        s.push(' ');
        push_fixed2(&mut s, f64::from(*att), true);
    }
    s.push('\n');
    s
}

/// An upper bound on the bytes [`memories_block`] writes, so that a
/// prompt is allocated once at its size.
fn memories_room(memories: &[&MemoryRecord]) -> usize {
    32 + memories.iter().map(|m| m.description.len() + 48).sum::<usize>()
}

/// The recalled-memories block, oldest first (whatever order retrieval
/// ranked them in).
pub fn memories_block(out: &mut String, memories: &[&MemoryRecord]) {
    out.push_str("\nMemories you recall:\n");
    if memories.is_empty() {
        out.push_str("(none)\n");
    }
    for m in in_order(memories) {
        out.push_str("- [tick ");
        push_uint(out, u64::from(m.tick));
        out.push_str("] (sentiment ");
        push_fixed2(out, f64::from(m.sentiment), true);
        out.push_str(") ");
        out.push_str(&m.description);
        out.push('\n');
    }
}

/// The stimulus block: the stimulus's lines (rendered once per run), then
/// the exposure.
pub fn stimulus_block(out: &mut String, s: &Stimulus, exposure: u32) {
    out.push_str(s.prompt_lines());
    out.push_str("Exposure: ");
    push_uint(out, u64::from(exposure) + 1);
    out.push_str(" of this stimulus this tick\n");
}

/// What a reaction asks for: after the header, before what varies, so that
/// a server caches it with the header for the persona's every reaction.
const REACTION_FORMAT: &str = "\nReact in character to the stimulus below. Reply exactly in this format:\n\
     REACTION: <one or two sentences in your own voice>\n\
     SENTIMENT: <number from -1 to 1>\n\
     INTENT: <integer 1-5, how likely you are to buy>\n\
     IMPORTANCE: <integer 1-10, how memorable this is to you>\n";

/// The reaction prompt of one job: the header, what a reaction asks for,
/// the recalled memories, then the stimulus.
pub fn reaction_prompt(header: &str, memories: &[&MemoryRecord], stimulus: &Stimulus, exposure: u32) -> String {
    let room = header.len() + memories_room(memories) + stimulus.prompt_lines().len() + 320;
    let mut s = String::with_capacity(room);
    s.push_str(header);
    s.push_str(REACTION_FORMAT);
    memories_block(&mut s, memories);
    stimulus_block(&mut s, stimulus, exposure);
    s
}

/// The reflection prompt: the persona's recent memories plus what it just
/// experienced.
pub fn reflection_prompt(header: &str, recent: &[String], latest: &str, max_insights: usize) -> String {
    let room = header.len() + 200 + recent.iter().map(|r| r.len() + 3).sum::<usize>();
    let mut s = String::with_capacity(room);
    s.push_str(header);
    s.push_str("\nRecent experiences:\n");
    for r in recent {
        let _ = writeln!(s, "- {r}");
    }
    let _ = writeln!(s, "- {latest}");
    let _ = write!(
        s,
        "\nWhat are up to {max_insights} high-level insights about yourself that these experiences suggest?\n\
         Reply with one line per insight:\n\
         INSIGHT: <insight> (importance <1-10>)\n"
    );
    s
}

/// A survey probe's prompt.
pub fn probe_prompt(header: &str, memories: &[&MemoryRecord], question: &str) -> String {
    let mut s = String::with_capacity(header.len() + memories_room(memories) + question.len() + 96);
    s.push_str(header);
    memories_block(&mut s, memories);
    s.push_str("\nSurvey question: ");
    s.push_str(question);
    s.push_str("\nReply exactly in this format:\nANSWER: <integer 1-5>\nWHY: <one sentence>\n");
    s
}

/// A survey question on its own scale: the recalled memories, the
/// question, its numbered options (`2. Weak Democrat`: what the scripted
/// model reads) and the reply format.
pub fn choice_prompt(header: &str, memories: &[&MemoryRecord], question: &str, options: &[String]) -> String {
    let mut s = question_with_options(header, memories, question, options, 128);
    s.push_str("Reply exactly in this format:\nANSWER: <the number of your option, 1 to ");
    push_uint(&mut s, options.len() as u64);
    s.push_str(">\nWHY: <one sentence>\n");
    s
}

/// What a `verbalized` question asks after its options: the shares of
/// people like the persona, one per option.
pub fn shares_format(out: &mut String, options: usize) {
    out.push_str(
        "Think of people like you. What share of them, in percent, would choose each option? Reply exactly in this \
         format:\nSHARES: <",
    );
    push_uint(out, options as u64);
    out.push_str(" numbers, one per option in order, separated by commas, summing to 100>\n");
}

/// A survey question asked for the shares of its options (`verbalized`
/// mode): the recalled memories, the question, its numbered options and
/// [`shares_format`].
pub fn shares_prompt(header: &str, memories: &[&MemoryRecord], question: &str, options: &[String]) -> String {
    let mut s = question_with_options(header, memories, question, options, 200);
    shares_format(&mut s, options.len());
    s
}

/// The header, the recalled memories, the survey question and its numbered
/// options, with room for `format` more bytes (the reply format).
fn question_with_options(
    header: &str,
    memories: &[&MemoryRecord],
    question: &str,
    options: &[String],
    format: usize,
) -> String {
    let room = options.iter().map(|o| o.len() + 6).sum::<usize>();
    let mut s = String::with_capacity(header.len() + memories_room(memories) + question.len() + room + format);
    s.push_str(header);
    memories_block(&mut s, memories);
    s.push_str("\nSurvey question: ");
    s.push_str(question);
    s.push_str("\nOptions:\n");
    for (i, o) in options.iter().enumerate() {
        push_uint(&mut s, i as u64 + 1);
        s.push_str(". ");
        s.push_str(o);
        s.push('\n');
    }
    s
}

/// The options of the 1-5 scale (a probe without options of its own, and
/// purchase intent) when they are asked for shares.
pub fn five_points(low: &str, high: &str) -> Vec<String> {
    vec![format!("1 ({low})"), "2".into(), "3".into(), "4".into(), format!("5 ({high})")]
}

/// Purchase intent asked for shares after a reaction (`verbalized` mode):
/// the reaction's prompt, the reply it got, and the five points of "how
/// likely to buy" with [`shares_format`].
pub fn intent_shares_prompt(reaction_prompt: &str, reply: &str) -> String {
    let mut s = String::with_capacity(reaction_prompt.len() + reply.len() + 320);
    s.push_str(reaction_prompt);
    s.push_str("\nYour reaction:\n");
    s.push_str(reply.trim_end());
    s.push_str("\n\nHow likely are you to buy it?\nOptions:\n");
    for (i, o) in five_points("very unlikely", "very likely").iter().enumerate() {
        push_uint(&mut s, i as u64 + 1);
        s.push_str(". ");
        s.push_str(o);
        s.push('\n');
    }
    shares_format(&mut s, 5);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimTime;
    use crate::persona::memory::{MemoryId, MemoryKind};

    fn memory(seq: u32, text: &str) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId { persona: 3, seq },
            kind: MemoryKind::Observation,
            description: text.into(),
            importance: 5,
            sentiment: 0.25,
            tick: seq + 1,
            created: SimTime(u64::from(seq) * 3600),
            last_access: SimTime(u64::from(seq) * 3600),
            sources: Vec::new(),
            vector: None,
        }
    }

    fn common_prefix(a: &str, b: &str) -> usize {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    }

    /// What repeats comes first: two reactions of a persona share their
    /// header and reply format whatever the stimulus, and memories recalled
    /// again keep their place (oldest first) whatever retrieval ranked
    /// them, so the next tick's prompt repeats the last one up to its newest
    /// memory.
    #[test]
    fn a_persona_s_prompts_repeat_their_stable_part_first() {
        let scenario = crate::scenario::Scenario::builtin("default").expect("built in");
        let (a, b) = (&scenario.stimuli[0], &scenario.stimuli[1 % scenario.stimuli.len()]);
        let header = "You are Ann Lee, 41, a nurse in Leeds. Likes walks.\n";
        let (m0, m1, m2) = (memory(0, "saw a kettle ad"), memory(1, "bought tea"), memory(2, "liked the mug"));
        let tick2 = reaction_prompt(header, &[&m1, &m0], a, 0);
        let tick3 = reaction_prompt(header, &[&m2, &m0, &m1], b, 0);
        let stable = header.len() + REACTION_FORMAT.len();
        assert!(tick2.starts_with(header) && tick2[header.len()..].starts_with(REACTION_FORMAT));
        let shared = common_prefix(&tick2, &tick3);
        assert!(shared > stable, "the header, the format and the memories recalled again are shared");
        assert!(tick3[..shared].contains("bought tea") && !tick3[..shared].contains("liked the mug"), "{tick3}");
        assert!(tick2.find("saw a kettle").expect("m0") < tick2.find("bought tea").expect("m1"), "oldest first");
        // A probe's question stays after the memories it is about.
        let probe = probe_prompt(header, &[&m0], "Would you buy it?");
        assert!(probe.starts_with(header) && probe.find("saw a kettle") < probe.find("Would you buy it?"));
    }
}
