//! What both sides share with an upstream, embedding or chat: how a
//! request failed ([`FailureKind`], [`ProviderError`]), the seeded backoff
//! before a retry ([`Backoff`]), the per-minute limits (`RateLimiter`),
//! and the modelled providers' seeded faults ([`fault`]).

use crate::clock::Sleeper;
use engine::digest::DigestWriter;
use engine::embed::upstream::ModelledSettings;
use engine::rng::Stream;
use parking_lot::Mutex;
use std::time::Duration;

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

/// Token buckets for requests and tokens per minute.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    rpm: f64,
    tpm: f64,
    /// Requests left, tokens left, and when they were last topped up.
    state: Mutex<(f64, f64, Option<Duration>)>,
}

impl RateLimiter {
    pub(crate) fn new(rpm: u32, tpm: u64) -> Self {
        RateLimiter { rpm: f64::from(rpm), tpm: tpm as f64, state: Mutex::new((f64::from(rpm), tpm as f64, None)) }
    }

    /// Waits until one request of `tokens` may go.
    pub(crate) async fn acquire(&self, tokens: u64, clock: &dyn Sleeper) {
        if self.rpm <= 0.0 && self.tpm <= 0.0 {
            return;
        }
        loop {
            let wait = {
                let mut s = self.state.lock();
                let now = clock.now();
                let elapsed = s.2.map_or(0.0, |t| now.saturating_sub(t).as_secs_f64());
                s.2 = Some(now);
                s.0 = (s.0 + elapsed * self.rpm / 60.0).min(self.rpm);
                // A request larger than a minute's tokens waits for a full bucket.
                let need = (tokens as f64).min(self.tpm);
                s.1 = (s.1 + elapsed * self.tpm / 60.0).min(self.tpm);
                let req_ok = self.rpm <= 0.0 || s.0 >= 1.0;
                let tok_ok = self.tpm <= 0.0 || s.1 >= need;
                if req_ok && tok_ok {
                    if self.rpm > 0.0 {
                        s.0 -= 1.0;
                    }
                    if self.tpm > 0.0 {
                        s.1 -= need;
                    }
                    return;
                }
                let req_wait = if req_ok { 0.0 } else { (1.0 - s.0) * 60.0 / self.rpm };
                let tok_wait = if tok_ok { 0.0 } else { (need - s.1) * 60.0 / self.tpm };
                req_wait.max(tok_wait)
            };
            clock.sleep(Duration::from_secs_f64(wait.max(0.001))).await;
        }
    }
}

/// The modelled fault (if any) of `attempt` of the request with `digest`:
/// drawn from (seed, attempt, digest), never from call order.
pub fn fault(st: &ModelledSettings, digest: &[u8; 32], attempt: u32) -> Option<FailureKind> {
    let key = DigestWriter::new("modelled provider fault v1").u64(st.seed).u32(attempt).bytes(digest).finish();
    let mut s = Stream::from_key(key.0);
    let x = s.unit();
    let mut edge = st.rate_limited;
    if x < edge {
        return Some(FailureKind::RateLimited { retry_after_ms: Some(st.retry_after_ms) });
    }
    edge += st.server_error;
    if x < edge {
        return Some(FailureKind::Server);
    }
    edge += st.timeout;
    if x < edge {
        return Some(FailureKind::Timeout);
    }
    edge += st.permanent;
    (x < edge).then_some(FailureKind::Permanent)
}
