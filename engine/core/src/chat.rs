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
use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::sync::Arc;

/// Why a chat request is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub enum ChatPurpose {
    /// A reaction to a stimulus.
    Reaction,
    /// A reflection over recent memories.
    Reflection,
    /// A survey probe.
    Probe,
    /// A research agent's step (researcher, analyst or writer).
    Agent,
    /// A judge scoring a report against a rubric.
    Judge,
    /// A survey question with 2 to 11 numbered options (`sim-cli validate`).
    Survey,
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
            ChatPurpose::Judge => 4,
            ChatPurpose::Survey => 5,
        }
    }
}

/// One chat request. The prompt is shared and hashed once, when the
/// request is built; retries reuse both. The request digest is taken then
/// too (and again for each attempt number): build a new request to change
/// the model, the purpose or the prompt.
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
    /// A survey question's number of options (2 to
    /// [`schema::MAX_OPTIONS`]), which bounds the answer its schema allows;
    /// 0 for other purposes. Not in a reply's digest: the prompt lists the
    /// options.
    pub options: u8,
    /// For a weighing (the options' probabilities, no reply generated):
    /// what the model's turn says before the answer, [`ANSWER_SLOT`] for a
    /// survey question or a probe, a reaction's lines up to `INTENT:` for
    /// purchase intent. `None` for a reply. See [`ChatRequest::weighing`].
    pub slot: Option<Arc<str>>,
    /// The reply gives the share of people like the persona who would
    /// choose each of its `options` (`verbalized` mode): `{"shares": [...]}`
    /// under a schema, `SHARES: a, b, ...` in lines. See
    /// [`ChatRequest::verbalized`].
    pub shares: bool,
    prompt_digest: Digest,
    /// The request digest, and the attempt it was taken for.
    digest: (u32, Digest),
}

impl ChatRequest {
    /// A first attempt.
    pub fn new(model: &str, purpose: ChatPurpose, prompt: impl Into<Arc<str>>) -> ChatRequest {
        let prompt = prompt.into();
        let prompt_digest = crate::digest::of_text("prompt v1", &prompt);
        let mut request = ChatRequest {
            model: model.to_string(),
            purpose,
            prompt,
            attempt: 0,
            options: 0,
            slot: None,
            shares: false,
            prompt_digest,
            digest: (0, Digest::default()),
        };
        request.digest = (0, request.compute_digest());
        request
    }

    /// The same request for a survey question of `options` options (see
    /// [`ChatRequest::options`]).
    pub fn with_options(mut self, options: u8) -> ChatRequest {
        self.options = options;
        self
    }

    /// The same request as a weighing of its `options` at `slot`: what
    /// [`ChatPort::option_probabilities`] answers. Its digest is a
    /// weighing's (it covers the options and the slot), never a reply's,
    /// so a trace keeps the two apart.
    pub fn weighing(mut self, slot: &str) -> ChatRequest {
        self.slot = Some(slot.into());
        self.digest = (self.attempt, self.compute_digest());
        self
    }

    /// The same request asking for the shares of its `options`
    /// ([`ChatRequest::shares`]); in the digest.
    pub fn verbalized(mut self) -> ChatRequest {
        self.shares = true;
        self.digest = (self.attempt, self.compute_digest());
        self
    }

    /// The same request, as attempt `attempt`.
    pub fn attempt(&self, attempt: u32) -> ChatRequest {
        let mut request = ChatRequest { attempt, ..self.clone() };
        if request.digest.0 != attempt {
            request.digest = (attempt, request.compute_digest());
        }
        request
    }

    /// Digest of the prompt alone.
    pub fn prompt_digest(&self) -> Digest {
        self.prompt_digest
    }

    /// The request digest: what a replay cassette and the scripted model's
    /// seed are keyed by. Covers model, purpose, prompt and attempt.
    pub fn digest(&self) -> Digest {
        match self.digest {
            (attempt, digest) if attempt == self.attempt => digest,
            _ => self.compute_digest(),
        }
    }

    fn compute_digest(&self) -> Digest {
        if let Some(slot) = &self.slot {
            return DigestWriter::new("chat weighing v1")
                .str(&self.model)
                .u8(self.purpose.digest_code())
                .digest(&self.prompt_digest)
                .u8(self.options)
                .str(slot)
                .u32(self.attempt)
                .finish();
        }
        if self.shares {
            return DigestWriter::new("chat shares v1")
                .str(&self.model)
                .u8(self.purpose.digest_code())
                .digest(&self.prompt_digest)
                .u8(self.options)
                .u32(self.attempt)
                .finish();
        }
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
    /// The transport attempts behind the reply, oldest first (empty for the
    /// scripted models).
    pub attempts: Vec<ChatAttempt>,
}

/// One transport attempt of a chat call: where it went, what came back,
/// what it was billed and how long it took. `attempt`, `error` and `spend`
/// reach `full_digest`; the endpoint, the model id and the latency depend on
/// routing and the wall clock, so they are recorded but never digested.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode)]
pub struct ChatAttempt {
    /// Transport attempt, from 0.
    pub attempt: u32,
    /// The endpoint's URL without user-info or query string.
    pub endpoint: String,
    /// The model id the server reported, if it did.
    pub model: Option<String>,
    /// `None` when the attempt answered; otherwise its failure class and
    /// the provider's message with the status, e.g. `https://host/v1/chat/completions
    /// answered 429 Too Many Requests: ...`.
    pub error: Option<(FailureClass, String)>,
    /// What the attempt was billed.
    pub spend: Spend,
    /// Wall-clock latency in milliseconds (simulated time on a simulated
    /// clock).
    pub latency_ms: u64,
}

/// What kind of failure a transport attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, bincode::Encode)]
pub enum FailureClass {
    /// 429: retried after the provider's wait.
    RateLimited,
    /// 5xx or a broken connection: retried.
    Server,
    /// No answer in time: retried.
    Timeout,
    /// Bad request, bad key, unknown model, unreadable reply: never retried.
    Permanent,
}

impl FailureClass {
    /// The class's code in digests.
    pub fn digest_code(self) -> u8 {
        match self {
            FailureClass::RateLimited => 1,
            FailureClass::Server => 2,
            FailureClass::Timeout => 3,
            FailureClass::Permanent => 4,
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailureClass::RateLimited => "rate limited",
            FailureClass::Server => "server error",
            FailureClass::Timeout => "timeout",
            FailureClass::Permanent => "permanent error",
        })
    }
}

/// A scripted model's answer: `text`, billed at `price` for the prompt and
/// the reply (estimated tokens), ready at once.
pub fn scripted_reply<'a>(
    price: &crate::cost::Price,
    request: &ChatRequest,
    text: String,
) -> BoxFuture<'a, ChatResult<ChatReply>> {
    let spend = price.bill(crate::cost::estimate_tokens(&request.prompt), crate::cost::estimate_tokens(&text));
    Box::pin(std::future::ready(Ok(ChatReply { text, spend, estimated: true, attempts: Vec::new() })))
}

/// Why a chat request failed. The port owns it, so that what a failure
/// was billed stays with the port's own types; [`crate::Error`] takes only
/// its cause.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The provider failed after its transport retries; `spend` is what its
    /// attempts were billed.
    #[error("chat provider failed: {cause}")]
    Provider {
        /// The provider's message.
        cause: String,
        /// What the failed call was billed.
        spend: Spend,
        /// Its transport attempts, oldest first (empty when none was sent).
        attempts: Vec<ChatAttempt>,
    },
    /// Any other failure, as the engine names it (a replay's cassette
    /// miss, a file that could not be read).
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

impl ChatError {
    /// What the failed call was billed (zero for an engine failure).
    pub fn spend(&self) -> Spend {
        match self {
            ChatError::Provider { spend, .. } => *spend,
            ChatError::Engine(_) => Spend::default(),
        }
    }

    /// Its transport attempts (none for an engine failure).
    pub fn attempts(&self) -> &[ChatAttempt] {
        match self {
            ChatError::Provider { attempts, .. } => attempts,
            ChatError::Engine(_) => &[],
        }
    }
}

impl From<ChatError> for crate::Error {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Provider { cause, .. } => crate::Error::Chat { cause },
            ChatError::Engine(e) => e,
        }
    }
}

/// A chat port's result.
pub type ChatResult<T> = std::result::Result<T, ChatError>;

/// The probability a chat model gives each option of a closed question at
/// its answer slot, renormalised over the options (`--answer-mode
/// probabilities`).
#[derive(Debug, Clone, PartialEq)]
pub struct OptionProbabilities {
    /// One per option, in order, summing to 1.
    pub probabilities: Vec<f64>,
    /// The mass the options had before renormalising (1 where the model
    /// can answer nothing else).
    pub mass: f64,
    /// Where `mass` was below `[answers] min_option_mass` and the options
    /// were weighed again with their label tokens raised by `logit_bias`:
    /// the mass they held then (the probabilities are that second
    /// reading's). `None` when they were weighed once.
    pub raised: Option<f64>,
    /// What the call was billed (both weighings, when raised).
    pub spend: Spend,
    /// The tokens were estimated, not reported.
    pub estimated: bool,
}

/// What the model's turn opens with before a survey question's or a
/// probe's answer: the label of their reply format.
pub const ANSWER_SLOT: &str = "ANSWER:";

impl OptionProbabilities {
    /// The probabilities as a trace records them: one line,
    /// `probabilities 0.25 0.75; mass 0.5`, then `; raised 0.99` when the
    /// options were weighed again with their tokens raised, each number in
    /// the shortest form that reads back to the same bits.
    pub fn to_text(&self) -> String {
        let mut s = probabilities_text(&self.probabilities, self.mass);
        if let Some(r) = self.raised {
            let _ = write!(s, "; raised {r}");
        }
        s
    }

    /// What [`OptionProbabilities::to_text`] wrote: the probabilities and
    /// the mass, to the bit; `None` for any other text.
    pub fn parse_text(text: &str) -> Option<(Vec<f64>, f64)> {
        Self::read_text(text).map(|(p, mass, _)| (p, mass))
    }

    /// The weighing [`OptionProbabilities::to_text`] wrote, billed `spend`;
    /// `None` for any other text.
    pub fn from_text(text: &str, spend: Spend, estimated: bool) -> Option<OptionProbabilities> {
        let (probabilities, mass, raised) = Self::read_text(text)?;
        Some(OptionProbabilities { probabilities, mass, raised, spend, estimated })
    }

    fn read_text(text: &str) -> Option<(Vec<f64>, f64, Option<f64>)> {
        let rest = text.trim_end().strip_prefix("probabilities ")?;
        let (list, mass) = rest.split_once("; mass ")?;
        let (mass, raised) = match mass.split_once("; raised ") {
            Some((mass, raised)) => (mass, Some(raised.parse::<f64>().ok()?)),
            None => (mass, None),
        };
        let probabilities: Vec<f64> = list.split(' ').map(str::parse).collect::<std::result::Result<_, _>>().ok()?;
        let mass: f64 = mass.parse().ok()?;
        let valid = |p: &f64| p.is_finite() && (0.0..=1.0).contains(p);
        // A mass is the sum of the shares a server listed, which its own
        // rounding (or a server's error) can carry past 1: any finite
        // non-negative mass is kept as it was measured.
        let measured = |m: &f64| m.is_finite() && *m >= 0.0;
        (probabilities.len() >= 2 && probabilities.iter().all(valid) && measured(&mass) && raised.iter().all(measured))
            .then_some((probabilities, mass, raised))
    }
}

/// [`OptionProbabilities::to_text`] of `probabilities` and `mass`.
pub fn probabilities_text(probabilities: &[f64], mass: f64) -> String {
    let mut s = String::with_capacity(16 + 20 * probabilities.len());
    s.push_str("probabilities");
    for p in probabilities {
        let _ = write!(s, " {p}");
    }
    let _ = write!(s, "; mass {mass}");
    s
}

/// The point answer of a distribution over options 1 to k in scale order:
/// its mean, rounded (half away from zero), within 1 to k.
pub fn rounded_mean(probabilities: &[f64]) -> u8 {
    let mean: f64 = probabilities.iter().enumerate().map(|(i, p)| (i + 1) as f64 * p).sum();
    mean.round().clamp(1.0, probabilities.len().max(1) as f64) as u8
}

/// The error of a port that cannot give option probabilities.
pub fn no_probabilities(provider: &str) -> ChatError {
    ChatError::Engine(crate::Error::Config {
        source_name: "[answers]".into(),
        field: "mode".into(),
        cause: format!(
            "the chat provider {provider} cannot give its probabilities over the options; use mode \"verbalized\" \
             or \"sample\" (--answer-mode verbalized|sample)"
        ),
    })
}

/// What one chat endpoint served (the run report lists them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCount {
    /// The endpoint's URL, with any user-info and query string removed.
    pub url: String,
    /// Requests sent to it, retries included.
    pub requests: u64,
    /// Requests that failed.
    pub failures: u64,
}

/// Answers chat requests.
pub trait ChatPort: Send + Sync {
    /// Completes one request.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, ChatResult<ChatReply>>;

    /// What the transport did so far, per endpoint: requests sent (retries
    /// included) and failed. Empty for ports without a transport (the
    /// scripted models, a replay's cassette).
    fn endpoints(&self) -> Vec<EndpointCount> {
        Vec::new()
    }

    /// What the transport is doing now, for progress lines; `None` for
    /// ports without one.
    fn activity(&self) -> Option<ChatActivity> {
        None
    }

    /// A conversation (a job's requests, one after another) begins. A
    /// batch port sends a round once every conversation under way waits on
    /// it; other ports ignore this. Ports that wrap another pass it on.
    fn conversation_started(&self) {}

    /// A conversation has ended (see [`ChatPort::conversation_started`]).
    fn conversation_ended(&self) {}

    /// Gives a batch port the log its submissions are recorded in, and
    /// the batches recorded there before (by a run being resumed), so that
    /// it polls them rather than submitting their requests again. Other
    /// ports ignore it; ports that wrap another pass it on.
    fn attach_journal(&self, _journal: Arc<dyn BatchJournal>, _earlier: Vec<SubmittedBatch>) {}

    /// The model's probability of each of `request`'s options (its
    /// `options`, numbered from 1) at the answer slot of the prompt, with
    /// no reply generated. Ports that cannot refuse ([`no_probabilities`]);
    /// ports that wrap another pass it on.
    fn option_probabilities<'a>(&'a self, _request: &'a ChatRequest) -> BoxFuture<'a, ChatResult<OptionProbabilities>> {
        Box::pin(std::future::ready(Err(no_probabilities("here"))))
    }

    /// What the response cache behind this port did; `None` without one.
    /// Ports that wrap another pass it on.
    fn cache_report(&self) -> Option<crate::chat::CacheReport> {
        None
    }
}

/// What the response cache did, for a summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheReport {
    /// The cache's directory.
    pub dir: String,
    /// Answers the cache served.
    pub cache_hits: u64,
    /// Requests sent to the provider (answers the cache did not have).
    pub provider_calls: u64,
    /// Entries ignored as corrupt or not this key's (each with a warning).
    pub ignored: u64,
    /// Answers bought but not kept (the directory could not be written).
    pub not_kept: u64,
    /// What the served answers had been billed when bought, nano-USD: what
    /// this command did not pay.
    pub saved_nano_usd: u64,
    /// What the command's answers would have been billed with no cache
    /// (what its ledger records, which the digests cover), USD.
    pub would_have_billed_usd: f64,
    /// What was billed: that, less what the cache saved, USD.
    pub billed_usd: f64,
}

impl CacheReport {
    /// In a sentence, for the text reports.
    pub fn line(&self) -> String {
        format!(
            "response cache {}: {} answers served, {} provider calls; billed ${:.6} of the ${:.6} the ledger records{}",
            self.dir,
            self.cache_hits,
            self.provider_calls,
            self.billed_usd,
            self.would_have_billed_usd,
            match self.ignored {
                0 => String::new(),
                n => format!("; {n} corrupt or foreign entries ignored"),
            }
        )
    }

    /// The report for a command whose ledger records `total_nano_usd`.
    pub fn with_bill(mut self, total_nano_usd: u64) -> CacheReport {
        let usd = |n: u64| n as f64 / crate::cost::NANO_PER_USD as f64;
        self.would_have_billed_usd = usd(total_nano_usd);
        self.billed_usd = usd(total_nano_usd.saturating_sub(self.saved_nano_usd));
        self
    }
}

/// A batch submitted to a provider's Batch API: its id, its input file and
/// the requests it carries (by digest, as its `custom_id`s name them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmittedBatch {
    /// The provider's batch id.
    pub batch_id: String,
    /// The uploaded input file's id.
    pub input_file_id: String,
    /// The requests in it.
    pub requests: Vec<Digest>,
}

/// Where a batch port records each submission, durably, before it waits
/// for the batch: the run's chat log.
pub trait BatchJournal: Send + Sync {
    /// Records `batch`; an error means it may be lost on a crash.
    fn submitted(&self, batch: &SubmittedBatch) -> crate::Result<()>;
}

/// A chat transport's live counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChatActivity {
    /// Requests on the wire now.
    pub in_flight: u64,
    /// Transport retries so far.
    pub retries: u64,
    /// Billed so far, nano-USD.
    pub billed_nano_usd: u64,
    /// Batches submitted and not yet ended (batch mode).
    pub batches_waiting: u64,
    /// Their lines, and how many of them the provider says are done.
    pub batch_lines: (u64, u64),
}

/// `url` without user-info (`user:pass@`) and without a query string or
/// fragment: URLs can carry credentials.
pub fn redact_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            if path.is_empty() {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weighing's recorded text reads back to the same bits, and nothing
    /// else reads as one.
    #[test]
    fn probabilities_text_reads_back_to_the_bit() {
        let p = OptionProbabilities {
            probabilities: vec![0.1, 1.0 / 3.0, 2.0 / 3.0 - 0.1, 1e-300],
            mass: 0.123_456_789_012_345_67,
            raised: None,
            spend: Spend::default(),
            estimated: true,
        };
        let (back, mass) = OptionProbabilities::parse_text(&p.to_text()).expect("reads");
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            p.probabilities.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(mass.to_bits(), p.mass.to_bits());
        let raised = OptionProbabilities { raised: Some(0.987_654_321_987_654_3), ..p.clone() };
        let text = raised.to_text();
        assert!(text.ends_with("; raised 0.9876543219876543"), "{text}");
        let back = OptionProbabilities::from_text(&text, raised.spend, true).expect("reads");
        assert_eq!(back.raised.map(f64::to_bits), raised.raised.map(f64::to_bits));
        assert_eq!(OptionProbabilities::parse_text(&text).map(|(_, m)| m.to_bits()), Some(p.mass.to_bits()));
        let past_one = OptionProbabilities { mass: 2.51, raised: Some(1.000_000_000_6), ..p.clone() };
        let back = OptionProbabilities::from_text(&past_one.to_text(), p.spend, true).expect("a mass past 1 reads");
        assert_eq!((back.mass, back.raised), (2.51, Some(1.000_000_000_6)));
        for other in [
            "ANSWER: 3\nWHY: fine",
            "probabilities 0.5; mass 1",
            "probabilities 0.5 x; mass 1",
            "probabilities 0.5 1.5; mass 1",
            "probabilities 0.5 0.5; mass 1; raised -1",
            "probabilities 0.5 0.5; mass inf",
        ] {
            assert_eq!(OptionProbabilities::parse_text(other), None, "{other}");
        }
        assert_eq!(rounded_mean(&[0.0, 0.5, 0.5, 0.0, 0.0]), 3, "2.5 rounds away from zero");
        assert_eq!(rounded_mean(&[0.6, 0.4, 0.0]), 1);
    }

    /// A weighing and a reply of the same prompt never share a digest (a
    /// trace keeps both apart), and the slot and options are in it.
    #[test]
    fn a_weighing_has_a_digest_of_its_own() {
        let reply = ChatRequest::new("m", ChatPurpose::Probe, "Survey question: ok?").with_options(5);
        let weighing = reply.clone().weighing(ANSWER_SLOT);
        assert_ne!(reply.digest(), weighing.digest());
        assert_ne!(weighing.digest(), reply.clone().weighing("REACTION: ok\nINTENT:").digest());
        assert_ne!(weighing.digest(), reply.clone().with_options(4).weighing(ANSWER_SLOT).digest());
        assert_eq!(weighing.digest(), weighing.attempt(0).digest());
        assert_ne!(weighing.digest(), weighing.attempt(1).digest());
        assert_eq!(reply.digest(), ChatRequest::new("m", ChatPurpose::Probe, "Survey question: ok?").digest());
    }

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(redact_url("https://user:secret@api.example.com/v1?key=abc"), "https://api.example.com/v1");
        assert_eq!(
            redact_url("http://gpu-1.example.net:8000/v1/chat/completions#x"),
            "http://gpu-1.example.net:8000/v1/chat/completions"
        );
        assert_eq!(redact_url("http://tok@host"), "http://host");
    }
}
