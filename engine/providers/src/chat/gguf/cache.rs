//! The prefix cache: the model's key/value state after a prompt's stable
//! prefix (the chat template's opening, the persona's header, a reaction's
//! instructions), kept so that a persona's next call starts from it.
//!
//! Entries live in a `DashMap` shared by every request decoding, keyed by
//! the digest of the prefix's tokens, and are bounded in bytes: a persona's
//! prefix is a few hundred tokens, and each token holds a key and a value
//! per layer (46 KB a token for SmolLM2-135M, about 8 MB a persona's prefix). When
//! an insertion would pass the bound, the oldest entries go first.
//!
//! A reply never depends on the cache: a prompt is always run as its prefix
//! and then the rest, in two forward passes, whether the prefix's state
//! comes from here or is computed afresh, so the arithmetic is the same
//! (the tests check the bytes).

use super::transformer::Sequence;
use dashmap::DashMap;
use engine::digest::Digest;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// One cached prefix: its key/value cache.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key/value cache after the prefix.
    pub state: Sequence,
    /// The bytes its key/value tensors take.
    pub bytes: u64,
}

/// The bounded cache.
#[derive(Debug)]
pub struct PrefixCache {
    entries: DashMap<Digest, Arc<Entry>>,
    /// Insertion order, for eviction, and the bytes held.
    order: Mutex<(VecDeque<Digest>, u64)>,
    limit: u64,
}

impl PrefixCache {
    /// A cache holding at most `limit_bytes` of key/value state (0: none).
    pub fn new(limit_bytes: u64) -> PrefixCache {
        PrefixCache { entries: DashMap::new(), order: Mutex::new((VecDeque::new(), 0)), limit: limit_bytes }
    }

    /// Whether it keeps anything.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// The state after the prefix `key` of `tokens` tokens, if kept (a hit
    /// is counted in [`super::throughput`]).
    pub fn get(&self, key: &Digest, tokens: usize) -> Option<Arc<Entry>> {
        if !self.enabled() {
            return None;
        }
        let found = self.entries.get(key).map(|e| e.value().clone());
        if found.is_some() {
            super::throughput::count_cache_hit(tokens);
        }
        found
    }

    /// Keeps `entry` under `key`, evicting the oldest entries to stay
    /// within the bound; an entry larger than the bound is not kept.
    pub fn put(&self, key: Digest, entry: Entry) {
        if !self.enabled() || entry.bytes > self.limit {
            return;
        }
        let mut order = self.order.lock();
        if self.entries.contains_key(&key) {
            return;
        }
        while order.1 + entry.bytes > self.limit {
            let Some(old) = order.0.pop_front() else { break };
            if let Some((_, gone)) = self.entries.remove(&old) {
                order.1 -= gone.bytes;
            }
        }
        order.1 += entry.bytes;
        order.0.push_back(key);
        self.entries.insert(key, Arc::new(entry));
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.order.lock().1
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
