//! How texts go upstream, as plain data and plain functions: the settings
//! of the providers (the inference client's are the config's
//! [`crate::config::EmbeddingSection`]), the split of a stage's
//! texts into physical requests, the backoff before a retry and the cache
//! key of a text. The adapters that send requests live in the `providers`
//! crate; every decision they take is made here, so it is tested without a
//! runtime.

use crate::cost::estimate_tokens;
use crate::digest::{Digest, DigestWriter};
use serde::{Deserialize, Serialize};

/// Settings of the modelled provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelledSettings {
    /// Latency of every request, in milliseconds. Default 40.
    pub latency_ms: f64,
    /// Extra latency per input token, in microseconds. Default 2.
    pub latency_per_token_us: f64,
    /// Requests the provider serves at once; more wait. Default 4.
    pub concurrency: usize,
    /// Probability that an attempt gets a 429. Default 0.
    pub rate_limited: f64,
    /// Probability of a 5xx. Default 0.
    pub server_error: f64,
    /// Probability of a timeout. Default 0.
    pub timeout: f64,
    /// Probability of a permanent error (never retried). Default 0.
    pub permanent: f64,
    /// Retry-after sent with a 429, in milliseconds. Default 50.
    pub retry_after_ms: u64,
    /// Seed of the fault draws. Default 0.
    pub seed: u64,
    /// Where the latency, the backoffs and the retry-afters are spent:
    /// `real` time (default), or a `simulated` clock that moves forward at
    /// once, so that a run with many modelled waits is bound by CPU (soaks,
    /// tests). Costs, faults and every digest are the same on either; only
    /// the recorded latencies differ. Left out of the file when `real`.
    #[serde(skip_serializing_if = "LatencyClock::is_real")]
    pub clock: LatencyClock,
}

/// The clock a modelled provider spends its waits on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyClock {
    /// Real time: a modelled 40 ms takes 40 ms.
    #[default]
    Real,
    /// A virtual clock: waits move it forward and return at once.
    Simulated,
}

impl LatencyClock {
    /// True for [`LatencyClock::Real`].
    pub fn is_real(&self) -> bool {
        *self == LatencyClock::Real
    }
}

impl Default for ModelledSettings {
    fn default() -> Self {
        ModelledSettings {
            latency_ms: 40.0,
            latency_per_token_us: 2.0,
            concurrency: 4,
            rate_limited: 0.0,
            server_error: 0.0,
            timeout: 0.0,
            permanent: 0.0,
            retry_after_ms: 50,
            seed: 0,
            clock: LatencyClock::Real,
        }
    }
}

/// Settings of the HTTP provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// Base URL, e.g. `https://api.openai.com/v1`; `/embeddings` or
    /// `/chat/completions` is appended. No default: a hosted provider is
    /// never implied.
    pub base_url: String,
    /// A fleet of base URLs instead of one (chat only): each request goes
    /// to the endpoint with the fewest requests in flight. Default empty.
    pub base_urls: Vec<String>,
    /// Name of the environment variable holding the API key. Default
    /// `OPENAI_API_KEY`. Empty: send no key (a local server).
    pub api_key_env: String,
    /// Connect timeout in milliseconds. Default 5000.
    pub connect_timeout_ms: u64,
    /// Longest wait between bytes of a reply, in milliseconds. Default 30000.
    pub read_timeout_ms: u64,
    /// Whole-request timeout in milliseconds. Default 60000.
    pub request_timeout_ms: u64,
    /// Send `dimensions` with each request (models that can shorten their
    /// vectors; embeddings only). Default false.
    pub send_dimensions: bool,
}

/// An HTTP section as written: what is left out is `None`, so that it can
/// take the defaults of the section it belongs to.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpWritten {
    base_url: Option<String>,
    base_urls: Option<Vec<String>>,
    api_key_env: Option<String>,
    connect_timeout_ms: Option<u64>,
    read_timeout_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
    send_dimensions: Option<bool>,
}

impl HttpSettings {
    /// The defaults for chat: the same, except longer read and request
    /// timeouts (60 s and 120 s), because a chat completion is generated
    /// token by token and a long reply from a loaded server can take a
    /// minute where an embedding takes a second.
    pub fn chat() -> HttpSettings {
        HttpSettings { read_timeout_ms: 60_000, request_timeout_ms: 120_000, ..HttpSettings::default() }
    }

    /// Reads a `[chat.http]` section: what it leaves out takes the chat
    /// defaults of [`HttpSettings::chat`]. (A derived reader would fill it
    /// from [`HttpSettings::default`], the embedding timeouts, as soon as
    /// the section is written at all, e.g. for its `base_url`.)
    pub fn deserialize_chat<'de, D: serde::Deserializer<'de>>(d: D) -> Result<HttpSettings, D::Error> {
        let w = HttpWritten::deserialize(d)?;
        let c = HttpSettings::chat();
        Ok(HttpSettings {
            base_url: w.base_url.unwrap_or(c.base_url),
            base_urls: w.base_urls.unwrap_or(c.base_urls),
            api_key_env: w.api_key_env.unwrap_or(c.api_key_env),
            connect_timeout_ms: w.connect_timeout_ms.unwrap_or(c.connect_timeout_ms),
            read_timeout_ms: w.read_timeout_ms.unwrap_or(c.read_timeout_ms),
            request_timeout_ms: w.request_timeout_ms.unwrap_or(c.request_timeout_ms),
            send_dimensions: w.send_dimensions.unwrap_or(c.send_dimensions),
        })
    }

    /// The endpoints to use: `base_urls` when set, else `base_url`.
    pub fn endpoints(&self) -> Vec<String> {
        if self.base_urls.is_empty() {
            vec![self.base_url.clone()]
        } else {
            self.base_urls.clone()
        }
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            base_url: String::new(),
            base_urls: Vec::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            connect_timeout_ms: 5_000,
            read_timeout_ms: 30_000,
            request_timeout_ms: 60_000,
            send_dimensions: false,
        }
    }
}

/// The cache key of a text.
pub fn cache_key(model: &str, dim: usize, text: &str) -> Digest {
    DigestWriter::new("embed cache v1").str(model).u64(dim as u64).str(text).finish()
}

/// The wait before retry `attempt + 1`: exponential in `attempt`, capped,
/// with "equal jitter" (half fixed, half drawn from `jitter` in [0, 1)), and
/// never shorter than the provider's retry-after.
pub fn backoff_ms(attempt: u32, base_ms: u64, max_ms: u64, retry_after_ms: Option<u64>, jitter: f64) -> u64 {
    let exp = base_ms.saturating_mul(1u64 << attempt.min(30)).min(max_ms);
    let jittered = exp / 2 + (jitter.clamp(0.0, 1.0) * (exp - exp / 2) as f64) as u64;
    jittered.max(retry_after_ms.unwrap_or(0))
}

/// Splits texts (by index, in order) into physical requests of at most
/// `batch` texts and `max_tokens` estimated tokens.
pub fn split_requests(texts: &[&str], batch: usize, max_tokens: u64) -> Vec<Vec<usize>> {
    let sizes: Vec<u64> = texts.iter().map(|t| estimate_tokens(t).max(1)).collect();
    split_greedy(&sizes, batch, max_tokens)
}

/// Splits items (by index, in order) into groups of at most `count` items
/// whose sizes sum to at most `max_size`; an item larger than `max_size`
/// goes alone. Embedding requests and Batch API files are cut this way.
pub fn split_greedy(sizes: &[u64], count: usize, max_size: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut total = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        let start_new = match out.last() {
            None => true,
            Some(cur) => cur.len() >= count.max(1) || total + size > max_size,
        };
        if start_new {
            out.push(Vec::new());
            total = 0;
        }
        total += size;
        if let Some(cur) = out.last_mut() {
            cur.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_honours_retry_after() {
        assert_eq!(backoff_ms(0, 100, 10_000, None, 0.0), 50);
        assert_eq!(backoff_ms(0, 100, 10_000, None, 0.999_999), 99);
        assert_eq!(backoff_ms(3, 100, 10_000, None, 0.0), 400);
        assert_eq!(backoff_ms(20, 100, 1_000, None, 0.0), 500);
        assert_eq!(backoff_ms(0, 100, 10_000, Some(2_000), 0.5), 2_000);
    }

    #[test]
    fn requests_split_by_count_and_tokens() {
        let t = ["aaaa"; 5];
        assert_eq!(split_requests(&t, 2, 1_000), vec![vec![0, 1], vec![2, 3], vec![4]]);
        let uneven = ["a".repeat(40), "b".repeat(8), "c".repeat(40), "d".repeat(400)];
        let refs: Vec<&str> = uneven.iter().map(String::as_str).collect();
        // 10 + 2 tokens fit under 15; 10 more would not; the 100-token text goes alone.
        assert_eq!(split_requests(&refs, 64, 15), vec![vec![0, 1], vec![2], vec![3]]);
        assert!(split_requests(&[], 4, 10).is_empty());
    }
}
