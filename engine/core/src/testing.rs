//! Test builders, behind the `testing` feature: ports with fixed answers
//! and a tiny executor for ports that never wait.

use crate::chat::{ChatPort, ChatPurpose, ChatReply, ChatRequest};
use crate::cost::Spend;
use crate::BoxFuture;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::future::Future;

/// A chat port that answers from fixed queues, one per purpose, in order;
/// when a queue runs dry it fails. Each reply bills one input and one output
/// token at 1 nano-USD each, so tests can count calls by cost.
#[derive(Debug, Default)]
pub struct FixedChat {
    queues: Mutex<BTreeMap<u8, Vec<String>>>,
    /// Every request seen, in order.
    pub seen: Mutex<Vec<ChatRequest>>,
}

impl FixedChat {
    /// Queues `replies` for `purpose`, first reply first.
    pub fn with(self, purpose: ChatPurpose, replies: &[&str]) -> Self {
        let mut q: Vec<String> = replies.iter().rev().map(|s| s.to_string()).collect();
        {
            let mut queues = self.queues.lock();
            q.extend(queues.remove(&purpose.digest_code()).unwrap_or_default());
            queues.insert(purpose.digest_code(), q);
        }
        self
    }
}

impl ChatPort for FixedChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, crate::chat::ChatResult<ChatReply>> {
        {
            let mut seen = self.seen.lock();
            seen.push(request.clone());
        }
        let next = self.queues.lock().get_mut(&request.purpose.digest_code()).and_then(Vec::pop);
        let out = match next {
            Some(text) => Ok(ChatReply {
                text,
                spend: Spend { input_tokens: 1, output_tokens: 1, nano_usd: 2 },
                estimated: false,
                attempts: Vec::new(),
            }),
            None => Err(crate::chat::ChatError::Provider {
                cause: format!("no fixed reply left for {:?}", request.purpose),
                spend: Spend::default(),
                attempts: Vec::new(),
            }),
        };
        Box::pin(std::future::ready(out))
    }
}

/// An embedding port that answers at once with the local embedder's
/// vectors: it splits each invocation into physical requests of at most
/// `batch_size` texts and bills each by estimated tokens at `price`. No
/// cache, no limits, no retries: the `providers` crate tests those.
#[derive(Debug, Clone)]
pub struct LocalPort {
    /// Texts per physical request.
    pub batch_size: usize,
    /// Price of embedding input tokens.
    pub price: crate::cost::Price,
}

impl crate::embed::EmbeddingPort for LocalPort {
    fn embed<'a>(
        &'a self,
        key: &'a crate::embed::EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, crate::embed::EmbedResult<crate::embed::EmbedBatch>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let calls = crate::embed::upstream::split_requests(&refs, self.batch_size, u64::MAX)
            .into_iter()
            .map(|members| {
                let tokens = members.iter().map(|i| crate::cost::estimate_tokens(refs[*i])).sum();
                let texts = members.iter().map(|i| *i as u32).collect();
                crate::embed::EmbedCall { texts, attempts: 1, spend: self.price.bill(tokens, 0) }
            })
            .collect();
        let vectors = texts.iter().map(|t| crate::embed::local::embed_text(t, key.dim).into()).collect();
        Box::pin(std::future::ready(Ok(crate::embed::EmbedBatch { vectors, calls, cache_hits: 0 })))
    }
}

/// Runs a future that never waits (the embedded ports complete at once).
pub fn block_on_ready<F: Future>(f: F) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("block_on_ready: the future waited; use a real runtime"),
    }
}
