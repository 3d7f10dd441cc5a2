//! Upstream embedding providers: one physical request at a time. The
//! inference client ([`crate::client`]) batches, retries, caches and bills
//! around them.

use engine::BoxFuture;

/// One physical request.
#[derive(Debug, Clone, Copy)]
pub struct ProviderRequest<'a> {
    /// Model name.
    pub model: &'a str,
    /// Vector dimension asked for.
    pub dim: usize,
    /// The texts, in order.
    pub texts: &'a [String],
    /// Attempt number, from 0.
    pub attempt: u32,
    /// Digest of the request's content (model, dim, texts), for seeded
    /// fault injection and jitter that never depend on call order.
    pub digest: [u8; 32],
}

/// A provider's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderReply {
    /// One vector per text.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens the provider reports having billed; `None` means the
    /// client's estimate is billed.
    pub billed_tokens: Option<u64>,
}

/// How a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// 429: retry after the given delay, if the provider said.
    RateLimited {
        /// The provider's retry-after, in milliseconds.
        retry_after_ms: Option<u64>,
    },
    /// 5xx: retry.
    Server,
    /// No answer in time: retry.
    Timeout,
    /// Bad request, bad key, unknown model: never retried.
    Permanent,
}

impl FailureKind {
    /// The kind an HTTP error status means; `retry_after` (ms) is kept for a
    /// 429.
    pub fn from_status(status: u16, retry_after: Option<u64>) -> FailureKind {
        match status {
            429 => FailureKind::RateLimited { retry_after_ms: retry_after },
            408 => FailureKind::Timeout,
            500..=599 => FailureKind::Server,
            _ => FailureKind::Permanent,
        }
    }

    /// Its class, as traces record it.
    pub fn class(self) -> engine::chat::FailureClass {
        use engine::chat::FailureClass;
        match self {
            FailureKind::RateLimited { .. } => FailureClass::RateLimited,
            FailureKind::Server => FailureClass::Server,
            FailureKind::Timeout => FailureClass::Timeout,
            FailureKind::Permanent => FailureClass::Permanent,
        }
    }

    /// Whether a retry can help.
    pub fn transient(self) -> bool {
        match self {
            FailureKind::RateLimited { .. } | FailureKind::Server | FailureKind::Timeout => true,
            FailureKind::Permanent => false,
        }
    }
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    /// Kind.
    pub kind: FailureKind,
    /// Message.
    pub message: String,
    /// Tokens the failed attempt was billed for, if the provider said.
    pub billed_tokens: Option<u64>,
}

/// How the retry layer backs off: up to `max_retries` retries of a
/// transient failure, waiting `base_ms` doubled per retry, at most `max_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First wait, ms.
    pub base_ms: u64,
    /// Longest wait, ms.
    pub max_ms: u64,
}

/// Why a failed request is not tried again: its provider's message, the
/// attempts made, and whether it was retried until the retries ran out or
/// not retried at all (a permanent failure). Its text is what the call's
/// failure records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} after {attempts} attempt(s), {}", if *.exhausted { "retries exhausted" } else { "not retried" })]
pub struct GiveUp {
    /// The provider's message for the last attempt.
    pub message: String,
    /// Attempts made, the first included.
    pub attempts: u32,
    /// True when a transient failure used up the retries; false for a
    /// permanent failure, which is never retried.
    pub exhausted: bool,
}

impl ProviderError {
    /// The retry decision once attempt `attempt` (from 0) failed with this
    /// error: the wait before the next attempt (a 429's retry-after, else
    /// the backoff with `jitter` in [0, 1)), or, for a permanent failure or
    /// when the retries are used up, why the request is given up.
    pub fn retry_wait(&self, attempt: u32, b: Backoff, jitter: f64) -> Result<std::time::Duration, GiveUp> {
        if !self.kind.transient() || attempt >= b.max_retries {
            return Err(GiveUp {
                message: self.message.clone(),
                attempts: attempt + 1,
                exhausted: self.kind.transient(),
            });
        }
        let retry_after = match self.kind {
            FailureKind::RateLimited { retry_after_ms } => retry_after_ms,
            FailureKind::Server | FailureKind::Timeout | FailureKind::Permanent => None,
        };
        let ms = engine::embed::upstream::backoff_ms(attempt, b.base_ms, b.max_ms, retry_after, jitter);
        Ok(std::time::Duration::from_millis(ms))
    }
}

/// An upstream embedding service.
pub trait EmbedProvider: Send + Sync {
    /// Embeds one physical request.
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>>;

    /// Texts this provider truncated at its model's limit so far (0 for a
    /// provider that never truncates, or cannot tell).
    fn truncated_texts(&self) -> u64 {
        0
    }
}
