//! Chat: the port and the embedded scripted persona model.
//!
//! [`ChatPort`] answers one [`ChatRequest`] at a time. The scripted model
//! ([`ScriptedPersonaModel`]) reads the persona's traits, the stimulus and
//! the recalled memories back out of the prompt text and answers in the
//! reply format, seeded by the request digest so that the same request
//! always gets the same reply whatever order requests arrive in.

pub mod schema;
pub mod scripted;

pub use scripted::ScriptedPersonaModel;

use crate::cost::Spend;
use crate::digest::{Digest, DigestWriter};
use crate::error::Result;
use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Why a chat request is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatPurpose {
    /// A reaction to a stimulus.
    Reaction,
    /// A reflection over recent memories.
    Reflection,
    /// A survey probe.
    Probe,
    /// A research agent's step (researcher, analyst or writer).
    Agent,
}

impl ChatPurpose {
    /// The code this value has in a digest. Explicit, so that reordering or
    /// adding variants never moves an existing digest.
    pub fn digest_code(self) -> u8 {
        match self {
            ChatPurpose::Reaction => 0,
            ChatPurpose::Reflection => 1,
            ChatPurpose::Probe => 2,
            ChatPurpose::Agent => 3,
        }
    }
}

/// One chat request. The prompt is shared and hashed once, when the
/// request is built; retries reuse both.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// Model name.
    pub model: String,
    /// Why it is made.
    pub purpose: ChatPurpose,
    /// The prompt.
    pub prompt: Arc<str>,
    /// 0 for the first try, then 1, 2... for guardrail retries.
    pub attempt: u32,
    prompt_digest: Digest,
}

impl ChatRequest {
    /// A first attempt.
    pub fn new(model: &str, purpose: ChatPurpose, prompt: impl Into<Arc<str>>) -> ChatRequest {
        let prompt = prompt.into();
        let prompt_digest = DigestWriter::new("prompt v1").str(&prompt).finish();
        ChatRequest { model: model.to_string(), purpose, prompt, attempt: 0, prompt_digest }
    }

    /// The same request, as attempt `attempt`.
    pub fn attempt(&self, attempt: u32) -> ChatRequest {
        ChatRequest { attempt, ..self.clone() }
    }

    /// Digest of the prompt alone.
    pub fn prompt_digest(&self) -> Digest {
        self.prompt_digest
    }

    /// The request digest: what a replay cassette and the scripted model's
    /// seed are keyed by. Covers model, purpose, prompt and attempt.
    pub fn digest(&self) -> Digest {
        DigestWriter::new("chat request v1")
            .str(&self.model)
            .u8(self.purpose.digest_code())
            .digest(&self.prompt_digest)
            .u32(self.attempt)
            .finish()
    }
}

/// A chat reply as billed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatReply {
    /// The reply text.
    pub text: String,
    /// Tokens and cost billed.
    pub spend: Spend,
    /// The tokens are estimated (the scripted models; a server that sent
    /// no `usage`), not reported by a provider.
    pub estimated: bool,
}

/// A scripted model's answer: `text`, billed at `price` for the prompt and
/// the reply (estimated tokens), ready at once.
pub fn scripted_reply<'a>(
    price: &crate::cost::Price,
    request: &ChatRequest,
    text: String,
) -> BoxFuture<'a, Result<ChatReply>> {
    let spend = price.bill(crate::cost::estimate_tokens(&request.prompt), crate::cost::estimate_tokens(&text));
    Box::pin(std::future::ready(Ok(ChatReply { text, spend, estimated: true })))
}

/// Answers chat requests.
pub trait ChatPort: Send + Sync {
    /// Completes one request.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatReply>>;

    /// What the transport did so far, per endpoint: requests sent (retries
    /// included) and failed. Empty for ports without a transport (the
    /// scripted models, a replay's cassette).
    fn endpoints(&self) -> Vec<crate::report::EndpointCount> {
        Vec::new()
    }
}
