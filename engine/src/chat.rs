//! Chat: the port and the embedded scripted persona model.
//!
//! [`ChatPort`] answers one [`ChatRequest`] at a time. The scripted model
//! ([`ScriptedPersonaModel`]) reads the persona's traits, the stimulus and
//! the recalled memories back out of the prompt text and answers in the
//! reply format, seeded by the request digest so that the same request
//! always gets the same reply whatever order requests arrive in.

pub mod scripted;

pub use scripted::ScriptedPersonaModel;

use crate::cost::Spend;
use crate::digest::{Digest, DigestWriter};
use crate::error::Result;
use crate::BoxFuture;
use serde::{Deserialize, Serialize};

/// Why a chat request is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatPurpose {
    /// A reaction to a stimulus.
    Reaction,
    /// A reflection over recent memories.
    Reflection,
    /// A survey probe.
    Probe,
}

/// One chat request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name.
    pub model: String,
    /// Why it is made.
    pub purpose: ChatPurpose,
    /// The prompt.
    pub prompt: String,
    /// 0 for the first try, then 1, 2... for guardrail retries.
    pub attempt: u32,
}

impl ChatRequest {
    /// The request digest: what a replay cassette and the scripted model's
    /// seed are keyed by.
    pub fn digest(&self) -> Digest {
        DigestWriter::new("chat request v1")
            .str(&self.model)
            .u8(self.purpose as u8)
            .str(&self.prompt)
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
}

/// Answers chat requests.
pub trait ChatPort: Send + Sync {
    /// Completes one request.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatReply>>;
}
