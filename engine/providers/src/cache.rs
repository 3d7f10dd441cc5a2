//! The response cache: the replies and weighings a live chat provider gave,
//! kept on disk under a key naming everything that decides them, so that a
//! later run or validation asking the same thing gets them with no call.
//!
//! One file per answer, `<dir>/<2 hex>/<62 hex>` (the key's hex), a
//! [`engine::store::frame`] container (magic `SIMRESPC`) holding one frame:
//! the key again and the reply as it was billed. A file is written beside
//! its place and renamed into it, so a reader never sees a part. A file
//! that does not read (a torn or altered frame, another format) or that
//! names another key is ignored with a warning and replaced by the live
//! answer: an entry is used only when it is exactly what was written for
//! this key.
//!
//! A reply served from the cache carries the spend it was billed when it
//! was bought, so a run served from the cache has the digests of the run
//! that filled it; [`CacheReport`] says what was not billed again.

use engine::chat::{CacheReport, ChatPort, ChatReply, ChatRequest, ChatResult, OptionProbabilities};
use engine::digest::{Digest, DigestWriter};
use engine::store::frame::Format;
use engine::BoxFuture;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The container format of one cache entry.
pub const RESPONSE_CACHE_FORMAT: Format = Format { magic: *b"SIMRESPC", version: 1, what: "response cache entry" };

/// What one entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    /// The key it was written under.
    key: Digest,
    /// The reply (a weighing's is its recorded text) and what it was billed.
    reply: ChatReply,
}

/// What the cache did for one command, counted by every port sharing it.
#[derive(Debug, Default)]
pub struct CacheCounters {
    hits: AtomicU64,
    calls: AtomicU64,
    ignored: AtomicU64,
    not_kept: AtomicU64,
    saved_nano_usd: AtomicU64,
}

impl CacheCounters {
    /// The counts so far, for the cache at `dir`.
    pub fn report(&self, dir: &Path) -> CacheReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheReport {
            dir: dir.display().to_string(),
            cache_hits: get(&self.hits),
            provider_calls: get(&self.calls),
            ignored: get(&self.ignored),
            not_kept: get(&self.not_kept),
            saved_nano_usd: get(&self.saved_nano_usd),
            ..CacheReport::default()
        }
    }
}

/// A chat port answering from the cache at `dir` where it can, and from
/// the port it wraps otherwise, keeping what that answers.
pub struct CachedChat {
    inner: Arc<dyn ChatPort>,
    dir: PathBuf,
    base: Digest,
    counters: Arc<CacheCounters>,
}

impl CachedChat {
    /// Wraps `inner`. `base` names everything besides the request that
    /// decides an answer (the seed, the settings, the provider's identity);
    /// `counters` may be shared by the ports of one command.
    pub fn new(inner: Arc<dyn ChatPort>, dir: &Path, base: Digest, counters: Arc<CacheCounters>) -> CachedChat {
        CachedChat { inner, dir: dir.to_path_buf(), base, counters }
    }

    /// The key of `request`'s reply (`what` = "reply") or weighing.
    fn key(&self, what: &str, request: &ChatRequest) -> Digest {
        DigestWriter::new("response cache key v1").digest(&self.base).str(what).digest(&request.digest()).finish()
    }

    fn path(&self, key: &Digest) -> PathBuf {
        let hex = key.hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    /// Counts and warns about an entry not used: `what` names it and why.
    fn ignore(&self, what: &str) {
        self.counters.ignored.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("response cache: ignoring {what}; asking the provider");
    }

    /// The answer kept for `key`, when there is one that reads and is
    /// this key's.
    fn get(&self, key: &Digest) -> Option<ChatReply> {
        let path = self.path(key);
        if !path.exists() {
            return None;
        }
        let read = engine::store::frame::read_all(&path, &RESPONSE_CACHE_FORMAT, |f| {
            engine::store::codec::decode::<Entry>(&f.payload)
        });
        match read {
            Ok(mut entries) if entries.len() == 1 && entries[0].key == *key => Some(entries.remove(0).reply),
            Ok(_) => {
                self.ignore(&format!("{}: it was written for another request", path.display()));
                None
            }
            Err(e) => {
                self.ignore(&format!("an entry that does not read ({e})"));
                None
            }
        }
    }

    /// Keeps `reply` under `key`; a failure to write is counted and warned
    /// about, never an error (the answer itself is good).
    fn put(&self, key: &Digest, reply: &ChatReply) {
        let path = self.path(key);
        let write = || -> std::result::Result<(), String> {
            let payload =
                engine::store::codec::encode(&Entry { key: *key, reply: reply.clone() }).map_err(|e| e.to_string())?;
            let mut bytes = RESPONSE_CACHE_FORMAT.preamble().to_vec();
            engine::store::frame::push_frame(&mut bytes, &payload).map_err(|e| e.to_string())?;
            let parent = path.parent().unwrap_or(&self.dir);
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            // A name of its own per writer, created only if new, so two
            // commands filling the same entry (shards, containers sharing
            // the directory) never write one file.
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let tmp = path.with_extension(format!("{}.{nanos}.{n}.partial", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| format!("{}: {e}", tmp.display()))?;
            if let Err(e) = std::io::Write::write_all(&mut file, &bytes) {
                let _ = std::fs::remove_file(&tmp);
                return Err(format!("{}: {e}", tmp.display()));
            }
            drop(file);
            std::fs::rename(&tmp, &path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("{}: {e}", path.display())
            })
        };
        if let Err(e) = write() {
            if self.counters.not_kept.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!("response cache: cannot keep answers ({e}); the run goes on without keeping them");
            }
        }
    }

    fn served(&self, reply: &ChatReply) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        self.counters.saved_nano_usd.fetch_add(reply.spend.nano_usd, Ordering::Relaxed);
    }
}

impl ChatPort for CachedChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, ChatResult<ChatReply>> {
        Box::pin(async move {
            let key = self.key("reply", request);
            if let Some(reply) = self.get(&key) {
                self.served(&reply);
                return Ok(reply);
            }
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            let result = self.inner.complete(request).await;
            if let Ok(reply) = &result {
                self.put(&key, reply);
            }
            result
        })
    }

    fn option_probabilities<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, ChatResult<OptionProbabilities>> {
        Box::pin(async move {
            let key = self.key("weighing", request);
            if let Some(reply) = self.get(&key) {
                match OptionProbabilities::from_text(&reply.text, reply.spend, reply.estimated)
                    .filter(|p| p.probabilities.len() == usize::from(request.options))
                {
                    Some(p) => {
                        self.served(&reply);
                        return Ok(p);
                    }
                    None => self.ignore(&format!(
                        "{}: it holds no weighing of this question's options",
                        self.path(&key).display()
                    )),
                }
            }
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            let result = self.inner.option_probabilities(request).await;
            if let Ok(p) = &result {
                let reply =
                    ChatReply { text: p.to_text(), spend: p.spend, estimated: p.estimated, attempts: Vec::new() };
                self.put(&key, &reply);
            }
            result
        })
    }

    fn endpoints(&self) -> Vec<engine::chat::EndpointCount> {
        self.inner.endpoints()
    }

    fn activity(&self) -> Option<engine::chat::ChatActivity> {
        self.inner.activity()
    }

    fn conversation_started(&self) {
        self.inner.conversation_started();
    }

    fn conversation_ended(&self) {
        self.inner.conversation_ended();
    }

    fn attach_journal(&self, journal: Arc<dyn engine::chat::BatchJournal>, earlier: Vec<engine::chat::SubmittedBatch>) {
        self.inner.attach_journal(journal, earlier);
    }

    fn cache_report(&self) -> Option<CacheReport> {
        Some(self.counters.report(&self.dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::chat::ChatPurpose;
    use engine::testing::{block_on_ready, FixedChat};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sim-response-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A second port on the same directory answers from it with no call,
    /// to the byte (spend included); another base is another key; an
    /// altered entry, or one copied under another key, is ignored and
    /// replaced by a live answer.
    #[test]
    fn answers_are_kept_served_and_bad_entries_ignored() {
        let dir = scratch("serve");
        let base = DigestWriter::new("t").u64(1).finish();
        let request = ChatRequest::new("m", ChatPurpose::Probe, "one");
        let live = Arc::new(FixedChat::default().with(ChatPurpose::Probe, &["ANSWER: 3\nWHY: x"]));
        let counters = Arc::new(CacheCounters::default());
        let first = CachedChat::new(live.clone(), &dir, base, counters.clone());
        let bought = block_on_ready(first.complete(&request)).expect("a live reply");
        let empty = Arc::new(FixedChat::default());
        let second = CachedChat::new(empty.clone(), &dir, base, counters.clone());
        let served = block_on_ready(second.complete(&request)).expect("served");
        assert_eq!(served, bought, "the same reply, spend and attempts");
        assert!(empty.seen.lock().is_empty(), "no call");
        let report = counters.report(&dir);
        assert_eq!((report.cache_hits, report.provider_calls, report.saved_nano_usd), (1, 1, bought.spend.nano_usd));
        let other = CachedChat::new(empty.clone(), &dir, DigestWriter::new("t").u64(2).finish(), counters.clone());
        assert!(block_on_ready(other.complete(&request)).is_err(), "another seed: no entry, and the live port is dry");
        // An altered byte: ignored, asked live, replaced.
        let path = first.path(&first.key("reply", &request));
        let mut bytes = std::fs::read(&path).expect("the entry");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("alter");
        let again = Arc::new(FixedChat::default().with(ChatPurpose::Probe, &["ANSWER: 4\nWHY: y"]));
        let third = CachedChat::new(again.clone(), &dir, base, counters.clone());
        assert_eq!(block_on_ready(third.complete(&request)).expect("live").text, "ANSWER: 4\nWHY: y");
        assert_eq!(counters.report(&dir).ignored, 1);
        // The entry of another request, copied here: not this key's.
        let two = ChatRequest::new("m", ChatPurpose::Probe, "two");
        let filler = Arc::new(FixedChat::default().with(ChatPurpose::Probe, &["ANSWER: 5\nWHY: z"]));
        block_on_ready(CachedChat::new(filler, &dir, base, counters.clone()).complete(&two)).expect("live");
        std::fs::copy(first.path(&first.key("reply", &two)), &path).expect("copy");
        assert!(block_on_ready(second.complete(&request)).is_err(), "ignored, and the live port is dry");
        assert_eq!(counters.report(&dir).ignored, 2);
        // A weighing is kept as its recorded text.
        let weigh = ChatRequest::new("m", ChatPurpose::Survey, "w").with_options(2);
        let p = OptionProbabilities {
            probabilities: vec![0.25, 0.75],
            mass: 0.5,
            raised: Some(0.99),
            spend: engine::cost::Spend { nano_usd: 7, ..Default::default() },
            estimated: false,
        };
        let key = first.key("weighing", &weigh);
        first.put(&key, &ChatReply { text: p.to_text(), spend: p.spend, estimated: false, attempts: Vec::new() });
        assert_eq!(block_on_ready(second.option_probabilities(&weigh)).expect("served"), p);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
