//! What the chat model sees.
//!
//! Prompts are plain text with labelled lines, so a real model can answer
//! them and the scripted model can read the same facts back out of them
//! (it sees nothing a real model would not).

use super::memory::MemoryRecord;
use super::profile::Profile;
use crate::scan::{push_fixed2, push_uint};
use crate::scenario::Stimulus;
use std::fmt::Write;

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

/// The recalled-memories block.
pub fn memories_block(out: &mut String, memories: &[&MemoryRecord]) {
    out.push_str("\nMemories you recall:\n");
    if memories.is_empty() {
        out.push_str("(none)\n");
    }
    for m in memories {
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

/// The reaction prompt of one job.
pub fn reaction_prompt(header: &str, memories: &[&MemoryRecord], stimulus: &Stimulus, exposure: u32) -> String {
    let room = header.len() + memories_room(memories) + stimulus.prompt_lines().len() + 320;
    let mut s = String::with_capacity(room);
    s.push_str(header);
    memories_block(&mut s, memories);
    stimulus_block(&mut s, stimulus, exposure);
    s.push_str(
        "\nReact in character. Reply exactly in this format:\n\
         REACTION: <one or two sentences in your own voice>\n\
         SENTIMENT: <number from -1 to 1>\n\
         INTENT: <integer 1-5, how likely you are to buy>\n\
         IMPORTANCE: <integer 1-10, how memorable this is to you>\n",
    );
    s
}

/// The reflection prompt: the persona's recent memories plus what it just
/// experienced.
pub fn reflection_prompt(header: &str, recent: &[String], latest: &str, max_insights: usize) -> String {
    let mut s = String::with_capacity(header.len() + 200 + recent.iter().map(|r| r.len() + 3).sum::<usize>());
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
    let room = options.iter().map(|o| o.len() + 6).sum::<usize>();
    let mut s = String::with_capacity(header.len() + memories_room(memories) + question.len() + room + 128);
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
    s.push_str("Reply exactly in this format:\nANSWER: <the number of your option, 1 to ");
    push_uint(&mut s, options.len() as u64);
    s.push_str(">\nWHY: <one sentence>\n");
    s
}
