//! What the chat client asks of an upstream (one call, one reply, and
//! the options' probabilities where it can weigh them): the
//! [`ChatUpstream`] trait the HTTP, modelled and GGUF upstreams implement.

use crate::upstream::ProviderError;
use engine::chat::ChatRequest;
use engine::BoxFuture;

/// One upstream call.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamCall<'a> {
    /// The engine's request.
    pub request: &'a ChatRequest,
    /// Transport attempt, from 0.
    pub attempt: u32,
    /// A seed for servers that honour one: from (run seed, request digest),
    /// so a guardrail retry (another request) never resends the seed that
    /// produced the invalid reply.
    pub seed: u64,
}

/// What an upstream answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamReply {
    /// The reply text.
    pub text: String,
    /// Tokens from the reply's `usage`, if it had one.
    pub usage: Option<TokenUsage>,
    /// The model id the server reported, if it did.
    pub model: Option<String>,
}

/// What a reply's `usage` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Prompt tokens, cached ones included.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// The prompt tokens served from the server's prefix cache
    /// (`prompt_tokens_details.cached_tokens`; 0 when not reported).
    pub cached: u64,
}

/// An upstream chat service with one or more endpoints.
pub trait ChatUpstream: Send + Sync {
    /// How many endpoints it has.
    fn endpoints(&self) -> usize;
    /// Endpoint `e`'s name for reports, without credentials.
    fn label(&self, e: usize) -> String;
    /// Sends one call to endpoint `endpoint`.
    fn call<'a>(
        &'a self,
        endpoint: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>>;

    /// The probability of each of `request`'s options at its answer slot,
    /// their mass before renormalising, and the prompt tokens run; `None`
    /// for an upstream that cannot give them.
    fn option_probabilities<'a>(&'a self, _request: &'a ChatRequest) -> BoxFuture<'a, Option<UpstreamWeighed>> {
        Box::pin(std::future::ready(None))
    }
}

/// What an upstream gives for [`ChatUpstream::option_probabilities`].
#[derive(Debug, Clone, PartialEq)]
pub struct Weighing {
    /// One per option, summing to 1.
    pub probabilities: Vec<f64>,
    /// The mass the options had before renormalising.
    pub mass: f64,
    /// Their mass when weighed again with their tokens raised (the
    /// probabilities are then that reading's); `None` when weighed once.
    pub raised: Option<f64>,
    /// Tokens run as prompt.
    pub prompt_tokens: u64,
    /// Tokens generated (the answer token, for a server).
    pub completion_tokens: u64,
}

/// Why an upstream gave no probabilities.
#[derive(Debug, Clone)]
pub enum WeighError {
    /// This server cannot give them (its replies carry no `logprobs`): a
    /// setting to change, not an answer that failed.
    Unsupported(String),
    /// The call failed.
    Failed(ProviderError),
}

/// [`ChatUpstream::option_probabilities`]'s result.
pub type UpstreamWeighed = std::result::Result<Weighing, WeighError>;
