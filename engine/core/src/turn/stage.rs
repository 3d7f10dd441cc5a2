//! Persona-side stage functions: retrieval need, preparation, drafting;
//! and what stage 4 hands on to drafting ([`Conversed`]).

use crate::chat::{ChatPurpose, ChatRequest};
use crate::clock::SimTime;
use crate::config::Config;
use crate::cost::estimate_tokens;
use crate::persona::memory::{MemoryId, MemoryKind, MemoryRecord};
use crate::persona::prompt::{choice_prompt, five_points, probe_prompt, reaction_prompt, shares_prompt};
use crate::persona::reply::{ProbeReply, Reaction};
use crate::persona::state::NewMemory;
use crate::persona::PersonaState;
use crate::scenario::{Job, Scenario, Stimulus};
use serde::{Deserialize, Serialize};

/// A reflection's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct ReflectionResult {
    /// Parsed insights with importance.
    pub insights: Vec<(String, u8)>,
    /// True when the reply did not parse and the fallback description is
    /// used instead.
    pub fallback: bool,
}

/// What a successful conversation produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversed {
    /// The parsed reaction.
    pub reaction: Reaction,
    /// The reflection, if one was due.
    pub reflection: Option<ReflectionResult>,
    /// Probe answers: (probe id, parsed reply or `None` when every attempt
    /// was unparseable).
    pub probes: Vec<(String, Option<ProbeReply>)>,
}

/// What every stage of one tick needs to know.
#[derive(Debug, Clone, Copy)]
pub struct TickContext<'a> {
    /// Resolved configuration.
    pub cfg: &'a Config,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Tick number, from 1.
    pub tick: u32,
    /// Its simulated time.
    pub now: SimTime,
}

/// The retrieval text of an exposure: the stimulus as seen, marked when it
/// is a repeat within the tick.
pub fn retrieval_text(s: &Stimulus, exposure: u32) -> String {
    // Written piece by piece, not with `format!`: one of these per job.
    let mut out = String::with_capacity(s.title.len() + s.text.len() + 32);
    if exposure > 0 {
        out.push_str("Seen again (");
        crate::scan::push_uint(&mut out, u64::from(exposure) + 1);
        out.push_str("x): ");
    }
    out.push_str(&s.title);
    out.push_str(". ");
    out.push_str(&s.text);
    out
}

/// Stage 2: the text this job needs embedded for retrieval, or `None` when
/// the embedding could not change the ranking: no memories (expired ones
/// do not count), `k <= 0`, or no memory with a vector.
pub fn retrieval_need(state: &PersonaState, job: &Job, ctx: &TickContext<'_>) -> Option<String> {
    if ctx.cfg.raw.retrieval.k <= 0 || !state.has_visible_vector() {
        return None;
    }
    Some(retrieval_text(&ctx.scenario.stimuli[job.stimulus as usize], job.exposure))
}

/// What a reflection needs if this job turns out to cross the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct ReflectPlan {
    /// Importance still needed before a reflection.
    pub remaining: u32,
    /// Descriptions of the persona's most recent memories.
    pub recent: Vec<String>,
    /// The persona header.
    pub header: std::sync::Arc<str>,
}

/// A job ready for chat.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The job.
    pub job: Job,
    /// Retrieved memories, best first.
    pub retrieved: Vec<MemoryId>,
    /// The reaction request (first attempt), with its prompt.
    pub reaction: ChatRequest,
    /// Estimated tokens of the prompt.
    pub prompt_tokens: u64,
    /// Present when a strong enough reaction would trigger a reflection.
    pub reflect: Option<ReflectPlan>,
    /// Probe prompts due this tick.
    pub probes: Vec<ProbePrompt>,
}

/// A probe due this tick, asked of one persona.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbePrompt {
    /// The probe's id.
    pub id: String,
    /// Its prompt.
    pub prompt: String,
    /// Its options' count for a question on its own scale (asked as a
    /// survey question); `None` for the 1-5 probe.
    pub options: Option<u8>,
}

impl Prepared {
    /// Drops the prompt texts once the conversation is over: the job, its
    /// retrieved memories and the prompt's digest are all that later
    /// stages read, and a tick of a million jobs holds a gigabyte of
    /// prompts.
    pub fn release_prompts(&mut self) {
        self.reaction.prompt = std::sync::Arc::from("");
        self.reflect = None;
        self.probes = Vec::new();
    }
}

/// Why a job is refused before any model call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The reaction prompt does not fit the chat model's context budget.
    #[error("prompt needs {needed} tokens, over the context budget of {budget}")]
    ContextBudget {
        /// Estimated tokens of the prompt.
        needed: u64,
        /// `chat.context_budget_tokens`.
        budget: u64,
    },
}

/// Stage 3: ranks the persona's own memories with `query` and builds the
/// prompts. Refuses when the prompt exceeds the context budget.
pub fn prepare(
    state: &PersonaState,
    job: &Job,
    query: Option<&[f32]>,
    ctx: &TickContext<'_>,
) -> Result<Prepared, Refusal> {
    let cfg = &ctx.cfg.raw;
    let scored = state.memory.retrieve(query, ctx.now, &cfg.retrieval, &state.visible);
    let recalled: Vec<&MemoryRecord> = scored.iter().filter_map(|s| state.memory.get(s.id)).collect();
    let stimulus = &ctx.scenario.stimuli[job.stimulus as usize];
    let prompt = reaction_prompt(&state.header, &recalled, stimulus, job.exposure);
    let prompt_tokens = estimate_tokens(&prompt);
    if prompt_tokens > cfg.chat.context_budget_tokens {
        return Err(Refusal::ContextBudget { needed: prompt_tokens, budget: cfg.chat.context_budget_tokens });
    }
    let remaining = cfg.reflection.importance_threshold.saturating_sub(state.importance_since_reflection);
    // A single reaction adds at most 10 importance.
    let reflect = (remaining <= 10).then(|| ReflectPlan {
        remaining,
        recent: state.recent_visible(cfg.reflection.recent_memories),
        header: std::sync::Arc::clone(&state.header),
    });
    let verbalized = cfg.answers.mode == crate::config::AnswerMode::Verbalized;
    let probes = ctx
        .scenario
        .probes_at(ctx.tick)
        .filter(|_| job.exposure == 0)
        .map(|p| match (p.options.is_empty(), verbalized) {
            // Asked for the shares of its options (or of the 1-5 scale).
            (true, true) => ProbePrompt {
                id: p.id.clone(),
                prompt: shares_prompt(&state.header, &recalled, &p.question, &five_points("lowest", "highest")),
                options: None,
            },
            (false, true) => ProbePrompt {
                id: p.id.clone(),
                prompt: shares_prompt(&state.header, &recalled, &p.question, &p.options),
                options: Some(p.points()),
            },
            (true, false) => ProbePrompt {
                id: p.id.clone(),
                prompt: probe_prompt(&state.header, &recalled, &p.question),
                options: None,
            },
            (false, false) => ProbePrompt {
                id: p.id.clone(),
                prompt: choice_prompt(&state.header, &recalled, &p.question, &p.options),
                options: Some(p.points()),
            },
        })
        .collect();
    Ok(Prepared {
        job: *job,
        retrieved: scored.iter().map(|s| s.id).collect(),
        reaction: ChatRequest::new(&cfg.chat.model, ChatPurpose::Reaction, prompt),
        prompt_tokens,
        reflect,
        probes,
    })
}

/// The description of the memory a reaction leaves.
pub fn observation_description(tick: u32, s: &Stimulus, reaction_text: &str) -> String {
    // `Tick {tick}: saw the {kind} "{title}". {reaction}`, written piece by
    // piece: one of these per reacting job.
    let kind = s.kind.as_str();
    let mut out = String::with_capacity(32 + kind.len() + s.title.len() + reaction_text.len());
    out.push_str("Tick ");
    crate::scan::push_uint(&mut out, u64::from(tick));
    out.push_str(": saw the ");
    out.push_str(kind);
    out.push_str(" \"");
    out.push_str(&s.title);
    out.push_str("\". ");
    out.push_str(reaction_text);
    out
}

/// Stage 5: the job's new memories, in order, without vectors.
pub fn drafts(job: &Job, ctx: &TickContext<'_>, conversed: &Conversed) -> Vec<NewMemory> {
    let s = &ctx.scenario.stimuli[job.stimulus as usize];
    let r = &conversed.reaction;
    let mut out = vec![NewMemory {
        kind: MemoryKind::Observation,
        description: observation_description(ctx.tick, s, &r.text).into(),
        importance: r.importance,
        sentiment: r.sentiment,
        sources: vec![s.id.as_str().into()],
        vector: None,
    }];
    if let Some(reflection) = &conversed.reflection {
        if reflection.fallback {
            out.push(NewMemory {
                kind: MemoryKind::Reflection,
                description: format!(
                    "Tick {}: I thought over my recent experiences, up to \"{}\", without reaching a clear conclusion.",
                    ctx.tick, s.title
                )
                .into(),
                importance: 3,
                sentiment: 0.0,
                sources: vec!["reflection-fallback".into()],
                vector: None,
            });
        } else {
            for (insight, importance) in &reflection.insights {
                out.push(NewMemory {
                    kind: MemoryKind::Reflection,
                    description: insight.as_str().into(),
                    importance: *importance,
                    sentiment: 0.0,
                    sources: vec!["reflection".into()],
                    vector: None,
                });
            }
        }
    }
    out
}
