//! Test builders, behind the `testing` feature: ports with fixed answers
//! and a tiny executor for ports that never wait.

use crate::chat::{ChatPort, ChatPurpose, ChatReply, ChatRequest};
use crate::cost::Spend;
use crate::error::{Error, Result};
use crate::BoxFuture;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

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
        if let Ok(mut queues) = self.queues.lock() {
            q.extend(queues.remove(&(purpose as u8)).unwrap_or_default());
            queues.insert(purpose as u8, q);
        }
        self
    }
}

impl ChatPort for FixedChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatReply>> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(request.clone());
        }
        let next = self.queues.lock().ok().and_then(|mut q| q.get_mut(&(request.purpose as u8)).and_then(Vec::pop));
        let out = match next {
            Some(text) => Ok(ChatReply { text, spend: Spend { input_tokens: 1, output_tokens: 1, nano_usd: 2 } }),
            None => Err(Error::Chat { cause: format!("no fixed reply left for {:?}", request.purpose) }),
        };
        Box::pin(std::future::ready(out))
    }
}

/// The inference client over the local provider, with no limits, no
/// retries' waiting and an in-memory cache when `cache` is set.
pub fn local_client(batch_size: usize, price: crate::cost::Price, cache: bool) -> crate::embed::InferenceClient {
    let section = crate::config::EmbeddingSection {
        batch_size,
        max_tokens_per_request: u64::MAX,
        max_retries: 0,
        ..Default::default()
    };
    let settings = section.client_settings();
    let cache = cache.then(crate::embed::TextCache::in_memory);
    crate::embed::InferenceClient::new(std::sync::Arc::new(crate::embed::LocalProvider), settings, price, cache, 0)
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
