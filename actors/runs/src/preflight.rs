//! Before a live run: what it will cost, and one probe request that
//! checks the endpoint, the key, the model and `response_format` before
//! any persona is charged.

use crate::error::{Error, Result};
use actors::progress::Progress;
use engine::chat::{ChatPort, ChatPurpose, ChatRequest};
use engine::clock::Clock;
use engine::config::{ChatProvider, Config};
use engine::cost::{estimate_tokens, NANO_PER_USD};
use engine::persona::{PersonaState, Traits};
use engine::scenario::Scenario;
use engine::turn::{prepare, TickContext};

/// The marker of the probe request's prompt (tests tell it from real calls).
pub const PROBE_MARKER: &str = "[connection check]";

/// An upper estimate of a live run: every job's reaction, every probe
/// question, with the first job's prompt as the typical prompt and
/// `max_output_tokens` per reply. Reflections and guardrail retries come on
/// top, so it says "at least" for calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Chat calls at least.
    pub calls: u64,
    /// Their cost at the configured prices, in USD, output at its cap.
    pub usd: f64,
}

/// The estimate for a panel of `personas` over `ticks`.
pub fn estimate(cfg: &Config, scenario: &Scenario, traits: &Traits, seed: u64, personas: u32, ticks: u32) -> Estimate {
    let profiles: Vec<_> =
        (0..personas).filter_map(|id| engine::persona::profile::draw(cfg, traits, seed, id)).collect();
    let mut calls = 0u64;
    let mut first = None;
    for tick in 1..=ticks {
        let jobs = scenario.jobs(seed, tick, profiles.len() as u32, |p| &profiles[p as usize].interests);
        first = first.or_else(|| jobs.first().copied());
        let probes = scenario.probes_at(tick).count() as u64;
        let persons: std::collections::BTreeSet<u32> = jobs.iter().map(|j| j.persona).collect();
        calls += jobs.len() as u64 + probes * persons.len() as u64;
    }
    let prompt_tokens = first
        .and_then(|job| {
            let state = PersonaState::new(profiles[job.persona as usize].clone());
            let now = Clock::with_hours_per_tick(cfg.raw.run.hours_per_tick).at(1);
            let ctx = TickContext { cfg, scenario, tick: 1, now };
            prepare(&state, &job, None, &ctx).ok()
        })
        .map_or(500, |p| estimate_tokens(&p.reaction.prompt));
    let price = match cfg.raw.chat.mode {
        engine::config::ChatMode::Online => cfg.chat_price,
        engine::config::ChatMode::Batch => cfg.chat_batch_price,
    };
    let per_call = price.bill(prompt_tokens, cfg.raw.chat.max_output_tokens).nano_usd;
    Estimate { calls, usd: (calls * per_call) as f64 / NANO_PER_USD as f64 }
}

/// One request through the live chat port: a failure stops the run before
/// any persona is charged, with the server's message.
pub async fn probe(cfg: &Config, chat: &dyn ChatPort, progress: &dyn Progress) -> Result<()> {
    if cfg.raw.chat.provider != ChatProvider::Openai {
        return Ok(());
    }
    let prompt = format!(
        "{PROBE_MARKER} Reply to this test in the requested format: a short reaction to a plain white mug, \
         sentiment 0, intent 3, importance 1."
    );
    let request = ChatRequest::new(&cfg.raw.chat.model, ChatPurpose::Reaction, prompt);
    let reply = chat.complete(&request).await.map_err(|e| {
        Error::context(format!("the live chat model {} failed its check before the run", cfg.raw.chat.model), e)
    })?;
    // The check is paid for but belongs to no persona: it is reported here
    // and stays out of the run's ledger.
    let model = reply.attempts.last().and_then(|a| a.model.clone()).unwrap_or_else(|| cfg.raw.chat.model.clone());
    progress.note(&format!(
        "connection check: {model} answered ({} tokens, ${:.6}{}, outside the run's ledger)",
        reply.spend.input_tokens + reply.spend.output_tokens,
        reply.spend.nano_usd as f64 / engine::cost::NANO_PER_USD as f64,
        if reply.estimated { " estimated" } else { "" }
    ));
    Ok(())
}
