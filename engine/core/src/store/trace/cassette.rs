//! Serving model answers from a trace, and recording them in the first
//! place.
//!
//! [`EmbedRecorder`] wraps the embedding port of a live run and keeps every
//! invocation for the tick's frame (chat calls are already in the outcomes).
//! [`CassetteChat`] and [`CassetteEmbedder`] answer from recorded frames by
//! request digest. Without a live fallback a miss is an error, never a
//! model call; with one (resume), misses go to the live port and are
//! counted.

use super::record::{embed_request_digest, EmbedAnswer, EmbedExchange, TickFrame, Vectors};
use crate::chat::{ChatError, ChatPort, ChatReply, ChatRequest};
use crate::cost::Spend;
use crate::digest::Digest;
use crate::embed::{EmbedBatch, EmbedKey, EmbeddingPort};
use crate::error::{Error, Result};
use crate::turn::ChatCallRecord;
use crate::BoxFuture;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Records every embedding invocation that passes through it.
pub struct EmbedRecorder {
    inner: Arc<dyn EmbeddingPort>,
    log: Mutex<Vec<EmbedExchange>>,
}

impl EmbedRecorder {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn EmbeddingPort>) -> Self {
        EmbedRecorder { inner, log: Mutex::new(Vec::new()) }
    }

    /// Takes the invocations recorded since the last call, in call order.
    pub fn take(&self) -> Vec<EmbedExchange> {
        std::mem::take(&mut *self.log.lock())
    }
}

impl EmbedRecorder {
    /// Logs one invocation as answered.
    fn log(&self, key: &EmbedKey, texts: &[String], result: &crate::embed::EmbedResult<EmbedBatch>) {
        let recorded = match result {
            Ok(b) => Ok((Vectors(b.vectors.clone()), b.calls.clone(), b.cache_hits)),
            Err(crate::embed::EmbedError::Provider { cause, calls }) => Err((cause.clone(), calls.clone())),
            Err(other @ crate::embed::EmbedError::Engine(_)) => Err((other.to_string(), Vec::new())),
        };
        let exchange = EmbedExchange {
            role: key.role,
            request: embed_request_digest(key, texts),
            texts: texts.len() as u32,
            result: recorded,
        };
        self.log.lock().push(exchange);
    }
}

impl EmbeddingPort for EmbedRecorder {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, crate::embed::EmbedResult<EmbedBatch>> {
        Box::pin(async move {
            let result = self.inner.embed(key, texts).await;
            self.log(key, texts, &result);
            result
        })
    }

    /// The inner port's (concurrent) invocations, logged in list order.
    fn embed_each<'a>(
        &'a self,
        key: &'a EmbedKey,
        lists: &'a [Vec<String>],
    ) -> BoxFuture<'a, Vec<crate::embed::EmbedResult<EmbedBatch>>> {
        Box::pin(async move {
            let results = self.inner.embed_each(key, lists).await;
            for (texts, result) in lists.iter().zip(&results) {
                self.log(key, texts, result);
            }
            results
        })
    }

    fn finish(&self) -> Result<()> {
        self.inner.finish()
    }

    fn truncated_texts(&self) -> u64 {
        self.inner.truncated_texts()
    }

    fn warm(&self, key: &EmbedKey, texts: &[String], vectors: &[Arc<[f32]>]) {
        self.inner.warm(key, texts, vectors);
    }
}

/// Counters of a cassette.
#[derive(Debug, Default)]
pub struct CassetteStats {
    /// Answers served from the trace.
    pub hits: AtomicU64,
    /// Requests the trace did not hold.
    pub misses: AtomicU64,
    /// Requests passed to the live fallback.
    pub live_calls: AtomicU64,
    first_miss: Mutex<Option<String>>,
}

impl CassetteStats {
    fn miss(&self, what: &str, digest: &Digest) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        {
            let mut m = self.first_miss.lock();
            m.get_or_insert_with(|| format!("{what} request {digest}"));
        }
    }

    /// The first request that missed, if any.
    pub fn first_miss(&self) -> Option<String> {
        self.first_miss.lock().clone()
    }
}

/// A recorded failure: the cause, what it billed, its transport attempts.
type Failed = (String, Spend, Vec<crate::chat::ChatAttempt>);

/// Chat answers from a trace.
pub struct CassetteChat {
    /// Each recorded request's answer: the reply, or the failure with what
    /// it was billed.
    replies: BTreeMap<Digest, std::result::Result<ChatReply, Failed>>,
    live: Option<Arc<dyn ChatPort>>,
    /// Counters.
    pub stats: CassetteStats,
}

impl CassetteChat {
    /// A cassette of every chat call in `ticks`, with an optional live
    /// fallback for requests it does not hold.
    pub fn new(ticks: &[TickFrame], live: Option<Arc<dyn ChatPort>>) -> Self {
        let cassette = CassetteChat { replies: BTreeMap::new(), live, stats: CassetteStats::default() };
        cassette.with_calls(ticks.iter().flat_map(|t| &t.outcomes).flat_map(|o| &o.chat_calls), true)
    }

    /// The cassette with `calls` added (where it holds no answer to the
    /// same request yet): their replies, and their failures when
    /// `failures` is set (otherwise a failed call is asked again).
    pub fn with_calls<'c>(mut self, calls: impl IntoIterator<Item = &'c ChatCallRecord>, failures: bool) -> Self {
        for c in calls.into_iter().filter(|c| failures || c.failed.is_none()) {
            self.replies.entry(c.request).or_insert_with(|| c.answer());
        }
        self
    }

    /// The same cassette, also serving the answers of a chat write-ahead
    /// log (calls paid for in a tick that never committed); answers the
    /// trace holds come first.
    pub fn with_wal(mut self, entries: Vec<super::wal::WalEntry>) -> Self {
        for e in entries {
            self.replies.entry(e.request).or_insert(e.answer);
        }
        self
    }
}

impl ChatPort for CassetteChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, crate::chat::ChatResult<ChatReply>> {
        let digest = request.digest();
        if let Some(answer) = self.replies.get(&digest) {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            let answer = match answer {
                Ok(reply) => Ok(reply.clone()),
                Err((cause, spend, attempts)) => {
                    Err(ChatError::Provider { cause: cause.clone(), spend: *spend, attempts: attempts.clone() })
                }
            };
            return Box::pin(std::future::ready(answer));
        }
        self.stats.miss("chat", &digest);
        match &self.live {
            Some(live) => {
                self.stats.live_calls.fetch_add(1, Ordering::Relaxed);
                live.complete(request)
            }
            None => {
                Box::pin(std::future::ready(Err(Error::CassetteMiss { what: "chat", digest: digest.hex() }.into())))
            }
        }
    }

    /// The recorded weighing (its reply is the probabilities' text, see
    /// [`crate::chat::OptionProbabilities::to_text`]); a miss goes to the
    /// live port when there is one, and is an error otherwise.
    fn option_probabilities<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, crate::chat::ChatResult<crate::chat::OptionProbabilities>> {
        let digest = request.digest();
        if let Some(answer) = self.replies.get(&digest) {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            let answer = match answer {
                Ok(reply) => {
                    match crate::chat::OptionProbabilities::from_text(&reply.text, reply.spend, reply.estimated) {
                        Some(p) => Ok(p),
                        None => Err(Error::Format {
                            file: "the trace".into(),
                            cause: format!("weighing {} recorded no probabilities: {:?}", digest.hex(), reply.text),
                        }
                        .into()),
                    }
                }
                Err((cause, spend, attempts)) => {
                    Err(ChatError::Provider { cause: cause.clone(), spend: *spend, attempts: attempts.clone() })
                }
            };
            return Box::pin(std::future::ready(answer));
        }
        self.stats.miss("chat", &digest);
        match &self.live {
            Some(live) => {
                self.stats.live_calls.fetch_add(1, Ordering::Relaxed);
                live.option_probabilities(request)
            }
            None => {
                Box::pin(std::future::ready(Err(Error::CassetteMiss { what: "chat", digest: digest.hex() }.into())))
            }
        }
    }

    /// The live fallback's transport (a resume); none for a replay.
    fn endpoints(&self) -> Vec<crate::chat::EndpointCount> {
        self.live.as_ref().map(|l| l.endpoints()).unwrap_or_default()
    }

    fn activity(&self) -> Option<crate::chat::ChatActivity> {
        self.live.as_ref().and_then(|l| l.activity())
    }

    fn cache_report(&self) -> Option<crate::chat::CacheReport> {
        self.live.as_ref().and_then(|l| l.cache_report())
    }

    fn conversation_started(&self) {
        if let Some(l) = &self.live {
            l.conversation_started();
        }
    }

    fn conversation_ended(&self) {
        if let Some(l) = &self.live {
            l.conversation_ended();
        }
    }
}

/// Embedding answers from a trace. The same request can be answered
/// differently over a run (a later one may be served from the cache), so
/// each request digest keeps its answers in recorded order and serves them
/// in turn; embedding invocations happen in a fixed order, so turn order
/// is the recorded order.
pub struct CassetteEmbedder {
    answers: Mutex<BTreeMap<Digest, VecDeque<EmbedAnswer>>>,
    live: Option<Arc<dyn EmbeddingPort>>,
    /// Counters.
    pub stats: CassetteStats,
}

impl CassetteEmbedder {
    /// A cassette of every embedding invocation in `ticks`, with an optional
    /// live fallback.
    pub fn new(ticks: &[TickFrame], live: Option<Arc<dyn EmbeddingPort>>) -> Self {
        let mut answers: BTreeMap<Digest, VecDeque<EmbedAnswer>> = BTreeMap::new();
        for t in ticks {
            for e in &t.embeddings {
                answers.entry(e.request).or_default().push_back(e.result.clone());
            }
        }
        CassetteEmbedder { answers: Mutex::new(answers), live, stats: CassetteStats::default() }
    }
}

impl EmbeddingPort for CassetteEmbedder {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, crate::embed::EmbedResult<EmbedBatch>> {
        let digest = embed_request_digest(key, texts);
        let next = self.answers.lock().get_mut(&digest).and_then(VecDeque::pop_front);
        if let Some(answer) = next {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            if let (Some(live), Ok((vectors, _, _))) = (&self.live, &answer) {
                live.warm(key, texts, &vectors.0);
            }
            let out = match answer {
                Ok((vectors, calls, cache_hits)) => Ok(EmbedBatch { vectors: vectors.0, calls, cache_hits }),
                Err((cause, calls)) => Err(crate::embed::EmbedError::Provider { cause, calls }),
            };
            return Box::pin(std::future::ready(out));
        }
        self.stats.miss("embedding", &digest);
        match &self.live {
            Some(live) => {
                self.stats.live_calls.fetch_add(1, Ordering::Relaxed);
                live.embed(key, texts)
            }
            None => Box::pin(std::future::ready(Err(
                Error::CassetteMiss { what: "embedding", digest: digest.hex() }.into()
            ))),
        }
    }

    fn finish(&self) -> Result<()> {
        self.live.as_ref().map_or(Ok(()), |l| l.finish())
    }

    fn truncated_texts(&self) -> u64 {
        self.live.as_ref().map_or(0, |l| l.truncated_texts())
    }
}
