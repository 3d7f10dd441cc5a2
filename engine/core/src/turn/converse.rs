//! Stage 4 for one job: the reaction with guardrail retries, then a
//! reflection and the probes where due.

use super::stage::{observation_description, Conversed, Prepared, ReflectionResult};
use crate::chat::schema::to_lines;
use crate::chat::{probabilities_text, rounded_mean, ChatPort, ChatPurpose, ChatRequest, ANSWER_SLOT};
use crate::config::{AnswerMode, Config};
use crate::cost::Spend;
use crate::digest::Digest;
use crate::persona::prompt::reflection_prompt;
use crate::persona::reply::{parse_insights, parse_reaction, parse_shares, parse_survey, ProbeReply};
use crate::scenario::Scenario;
use serde::{Deserialize, Serialize};

/// One chat call, as made and billed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct ChatCallRecord {
    /// Why.
    pub purpose: ChatPurpose,
    /// Guardrail attempt, from 0.
    pub attempt: u32,
    /// The request digest.
    pub request: Digest,
    /// The reply text (empty when the provider failed).
    pub reply: String,
    /// What it was billed.
    pub spend: Spend,
    /// The provider's error, when the call failed after its transport
    /// retries (replay serves it again, so a faulty run replays exactly).
    pub failed: Option<String>,
    /// The tokens were estimated, not reported by the provider.
    pub estimated: bool,
    /// The transport attempts (empty for the scripted models): their
    /// outcomes and costs reach `full_digest`, so a call that succeeded
    /// only on a retry changes `full_digest` but not `digest`.
    pub attempts: Vec<crate::chat::ChatAttempt>,
}

impl ChatCallRecord {
    /// The answer as a port gave it: the reply, or the failure with what it
    /// billed and its transport attempts (how the chat log and a cassette
    /// keep it).
    pub fn answer(&self) -> Result<crate::chat::ChatReply, (String, Spend, Vec<crate::chat::ChatAttempt>)> {
        match &self.failed {
            None => Ok(crate::chat::ChatReply {
                text: self.reply.clone(),
                spend: self.spend,
                estimated: self.estimated,
                attempts: self.attempts.clone(),
            }),
            Some(why) => Err((why.clone(), self.spend, self.attempts.clone())),
        }
    }
}

/// Why a job's chat stage failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatFailure {
    /// The chat port returned an error (after its own retries).
    #[error("chat provider failed: {0}")]
    Provider(String),
    /// Every guardrail attempt returned a reply that does not parse.
    #[error("no valid reply after {attempts} attempts: {last}")]
    NoValidReply {
        /// Attempts made.
        attempts: u32,
        /// Why the last reply was refused.
        last: String,
    },
}

/// Stage 4's result for one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Every call made, in order.
    pub calls: Vec<ChatCallRecord>,
    /// The result, or why the job failed.
    pub result: Result<Conversed, ChatFailure>,
}

async fn call(port: &dyn ChatPort, request: &ChatRequest, calls: &mut Vec<ChatCallRecord>) -> crate::Result<String> {
    match port.complete(request).await {
        Ok(reply) => {
            calls.push(ChatCallRecord {
                purpose: request.purpose,
                attempt: request.attempt,
                request: request.digest(),
                reply: reply.text.clone(),
                spend: reply.spend,
                failed: None,
                estimated: reply.estimated,
                attempts: reply.attempts,
            });
            Ok(reply.text)
        }
        Err(e) => Err(failed(request, e, calls)),
    }
}

/// A failed call's error. What it was billed stays with its job: the
/// failure is recorded as a call, for replay.
fn failed(request: &ChatRequest, e: crate::chat::ChatError, calls: &mut Vec<ChatCallRecord>) -> crate::Error {
    if let crate::chat::ChatError::Provider { cause, spend, attempts } = &e {
        calls.push(ChatCallRecord {
            purpose: request.purpose,
            attempt: request.attempt,
            request: request.digest(),
            reply: String::new(),
            spend: *spend,
            failed: Some(cause.clone()),
            estimated: false,
            attempts: attempts.clone(),
        });
    }
    e.into()
}

/// A weighing (the options' probabilities at the request's slot), recorded
/// as a call whose reply is their text, so that a trace replays it and the
/// digests cover it. Returns the probabilities and the options' mass.
async fn weigh(
    port: &dyn ChatPort,
    request: &ChatRequest,
    calls: &mut Vec<ChatCallRecord>,
) -> crate::Result<(Vec<f64>, f64)> {
    match port.option_probabilities(request).await {
        Ok(p) if p.probabilities.len() == usize::from(request.options) => {
            calls.push(ChatCallRecord {
                purpose: request.purpose,
                attempt: request.attempt,
                request: request.digest(),
                reply: p.to_text(),
                spend: p.spend,
                failed: None,
                estimated: p.estimated,
                attempts: Vec::new(),
            });
            Ok((p.probabilities, p.mass))
        }
        Ok(p) => Err(crate::Error::Chat {
            cause: format!(
                "the chat model weighed {} options of a question with {}",
                p.probabilities.len(),
                request.options
            ),
        }),
        Err(e) => Err(failed(request, e, calls)),
    }
}

/// A `verbalized` question: `request` (asking for shares) with guardrail
/// retries until a reply parses. The shares, normalised, or why none did.
async fn ask_shares(
    port: &dyn ChatPort,
    request: &ChatRequest,
    retries: u32,
    calls: &mut Vec<ChatCallRecord>,
) -> Result<Vec<f64>, ChatFailure> {
    let mut last = String::new();
    for attempt in 0..=retries {
        let request = match attempt {
            0 => std::borrow::Cow::Borrowed(request),
            n => std::borrow::Cow::Owned(request.attempt(n)),
        };
        match call(port, &request, calls).await {
            Ok(text) => match parse_shares(&to_lines(&text), request.options) {
                Ok(shares) => return Ok(shares),
                Err(e) => last = e.to_string(),
            },
            Err(e) => return Err(ChatFailure::Provider(e.to_string())),
        }
    }
    Err(ChatFailure::NoValidReply { attempts: retries + 1, last })
}

/// A probe's distribution with the run's calibration for it applied
/// (`[answers] calibrated`), when it has one; the model's own stays in the
/// call's record.
fn calibrated(cfg: &Config, probe: &str, p: Vec<f64>) -> Vec<f64> {
    match cfg.raw.answers.calibrated.iter().find(|c| c.probe == probe) {
        Some(c) if c.marginal.len() == p.len() => c.apply(&p),
        Some(_) | None => p,
    }
}

/// A reaction's reply up to and including its `INTENT:` label: the slot at
/// which its purchase intent is weighed. `None` when no line has the label.
pub fn intent_slot(reply: &str) -> Option<&str> {
    let mut start = 0;
    for line in reply.split_inclusive('\n') {
        if let Some(colon) = line.find(':') {
            if line[..colon].trim().eq_ignore_ascii_case("INTENT") {
                return Some(&reply[..start + colon + 1]);
            }
        }
        start += line.len();
    }
    None
}

/// In `probabilities` and `verbalized` mode, the persona's purchase intent
/// becomes the rounded mean of the model's distribution over 1 to 5: weighed
/// at the reaction's `INTENT:` line, or given as shares after it.
async fn intent_as_answered(
    port: &dyn ChatPort,
    prepared: &Prepared,
    cfg: &Config,
    reply: &str,
    reaction: &mut crate::persona::reply::Reaction,
    calls: &mut Vec<ChatCallRecord>,
) -> Result<(), ChatFailure> {
    let chat = &cfg.raw.chat;
    match cfg.raw.answers.mode {
        AnswerMode::Sample => Ok(()),
        AnswerMode::Probabilities => {
            let slot = intent_slot(reply).unwrap_or("INTENT:");
            let request =
                ChatRequest::new(&chat.model, ChatPurpose::Reaction, std::sync::Arc::clone(&prepared.reaction.prompt))
                    .with_options(5)
                    .weighing(slot);
            let (p, _) = weigh(port, &request, calls).await.map_err(|e| ChatFailure::Provider(e.to_string()))?;
            reaction.intent = rounded_mean(&p);
            Ok(())
        }
        AnswerMode::Verbalized => {
            let prompt = crate::persona::prompt::intent_shares_prompt(&prepared.reaction.prompt, reply);
            let request = ChatRequest::new(&chat.model, ChatPurpose::Reaction, prompt).with_options(5).verbalized();
            let shares = ask_shares(port, &request, chat.max_guardrail_retries, calls).await?;
            reaction.intent = rounded_mean(&shares);
            Ok(())
        }
    }
}

/// Runs the chat stage of one prepared job.
pub async fn converse(
    port: &dyn ChatPort,
    prepared: &Prepared,
    cfg: &Config,
    scenario: &Scenario,
    tick: u32,
) -> Conversation {
    let chat = &cfg.raw.chat;
    let mut calls = Vec::new();
    let weighed = cfg.raw.answers.mode == AnswerMode::Probabilities;
    let verbalized = cfg.raw.answers.mode == AnswerMode::Verbalized;
    let mut reaction = None;
    let mut last_error = String::new();
    for attempt in 0..=chat.max_guardrail_retries {
        // The first attempt is the prepared request itself, not a copy.
        let request = match attempt {
            0 => std::borrow::Cow::Borrowed(&prepared.reaction),
            n => std::borrow::Cow::Owned(prepared.reaction.attempt(n)),
        };
        match call(port, &request, &mut calls).await {
            Ok(text) => match parse_reaction(&to_lines(&text)) {
                Ok(r) => {
                    reaction = Some((r, to_lines(&text).into_owned()));
                    break;
                }
                Err(e) => last_error = e.to_string(),
            },
            Err(e) => return Conversation { calls, result: Err(ChatFailure::Provider(e.to_string())) },
        }
    }
    let Some((mut reaction, reply)) = reaction else {
        let attempts = chat.max_guardrail_retries + 1;
        return Conversation { calls, result: Err(ChatFailure::NoValidReply { attempts, last: last_error }) };
    };
    if let Err(e) = intent_as_answered(port, prepared, cfg, &reply, &mut reaction, &mut calls).await {
        return Conversation { calls, result: Err(e) };
    }

    let mut reflection = None;
    if let Some(plan) = prepared.reflect.as_ref().filter(|p| u32::from(reaction.importance) >= p.remaining) {
        let stimulus = &scenario.stimuli[prepared.job.stimulus as usize];
        let latest = observation_description(tick, stimulus, &reaction.text);
        let prompt = reflection_prompt(&plan.header, &plan.recent, &latest, cfg.raw.reflection.max_insights);
        // Reflections get no guardrail retry: an unparseable reply falls back
        // to a plain description, so the persona still records that it
        // reflected.
        let request = ChatRequest::new(&chat.model, ChatPurpose::Reflection, prompt);
        reflection = Some(match call(port, &request, &mut calls).await {
            Ok(text) => match parse_insights(&to_lines(&text), cfg.raw.reflection.max_insights) {
                Ok(insights) => ReflectionResult { insights, fallback: false },
                Err(_) => ReflectionResult { insights: Vec::new(), fallback: true },
            },
            Err(_) => ReflectionResult { insights: Vec::new(), fallback: true },
        });
    }

    let mut probes = Vec::with_capacity(prepared.probes.len());
    for probe in &prepared.probes {
        let mut answer = None;
        // The 1-5 probe keeps its purpose (and so its request digests); a
        // question on its own scale is a survey question.
        let (purpose, points) = match probe.options {
            None => (ChatPurpose::Probe, 5),
            Some(k) => (ChatPurpose::Survey, k),
        };
        let request =
            ChatRequest::new(&chat.model, purpose, probe.prompt.as_str()).with_options(probe.options.unwrap_or(0));
        if weighed {
            // No reason is generated: the answer is the distribution's
            // rounded mean, and `why` carries the distribution itself.
            let request = request.with_options(points).weighing(ANSWER_SLOT);
            if let Ok((p, mass)) = weigh(port, &request, &mut calls).await {
                let p = calibrated(cfg, &probe.id, p);
                answer = Some(ProbeReply { answer: rounded_mean(&p), why: probabilities_text(&p, mass) });
            }
            probes.push((probe.id.clone(), answer));
            continue;
        }
        if verbalized {
            let request = request.with_options(points).verbalized();
            if let Ok(shares) = ask_shares(port, &request, chat.max_guardrail_retries, &mut calls).await {
                let p = calibrated(cfg, &probe.id, shares);
                answer = Some(ProbeReply { answer: rounded_mean(&p), why: probabilities_text(&p, 1.0) });
            }
            probes.push((probe.id.clone(), answer));
            continue;
        }
        for attempt in 0..=chat.max_guardrail_retries {
            let request = match attempt {
                0 => std::borrow::Cow::Borrowed(&request),
                n => std::borrow::Cow::Owned(request.attempt(n)),
            };
            match call(port, &request, &mut calls).await {
                Ok(text) => {
                    if let Ok(p) = parse_survey(&to_lines(&text), points) {
                        answer = Some(p);
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        probes.push((probe.id.clone(), answer));
    }
    Conversation { calls, result: Ok(Conversed { reaction, reflection, probes }) }
}

#[cfg(test)]
mod tests {
    use super::intent_slot;

    #[test]
    fn intent_is_weighed_where_the_reply_puts_it() {
        let reply = "REACTION: Fine - a mug.\nSENTIMENT: 0.20\nintent : 4\nIMPORTANCE: 5\n";
        assert_eq!(intent_slot(reply), Some("REACTION: Fine - a mug.\nSENTIMENT: 0.20\nintent :"));
        assert_eq!(intent_slot("REACTION: no intent here\n"), None);
    }
}
