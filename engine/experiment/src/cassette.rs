//! The experiment cassette: every chat and embedding call of a live
//! experiment, and each mission's measured latency, in one framed file
//! (`cassette.bin`, the container of [`engine::store::frame`], magic `SIMXCAS1`).
//! [`RecordingChat`] and [`RecordingEmbedder`] append each answer as it
//! arrives, synced; [`Cassette`] serves them back by request digest, so
//! `sim-cli experiment --replay DIR` re-scores a live experiment with no
//! call. A miss is an error, never a live call.

use engine::chat::{ChatAttempt, ChatPort, ChatReply, ChatRequest};
use engine::cost::{with_layout, Layout, Spend};
use engine::digest::Digest;
use engine::embed::{EmbedBatch, EmbedCall, EmbedKey, EmbeddingPort};
use engine::error::{Error, Result};
use engine::store::frame::{Format, FrameWriter};
use engine::store::trace::record::embed_request_digest;
use engine::BoxFuture;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The file format. Version 2 (engine 0.6.0): a [`Spend`] holds the
/// cached prompt tokens; a version 1 cassette is still read.
pub const CASSETTE_FORMAT: Format = Format { magic: *b"SIMXCAS1", version: 2, what: "experiment cassette" };

/// The cassette's name in an experiment's directory.
pub const CASSETTE_FILE: &str = "cassette.bin";

/// One frame of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {
    /// The first frame: the engine version and the experiment's setup as
    /// its caller encodes it (JSON), enough to run it again.
    Header {
        /// The engine that recorded it.
        engine_version: String,
        /// The setup.
        setup_json: String,
    },
    /// A chat answer.
    Chat {
        /// The request's digest.
        request: Digest,
        /// The reply text.
        text: String,
        /// What it was billed.
        spend: Spend,
        /// Tokens estimated, not reported.
        estimated: bool,
        /// Its transport attempts.
        attempts: Vec<ChatAttempt>,
    },
    /// An embedding answer.
    Embed {
        /// Digest of (key, texts).
        request: Digest,
        /// One vector per text.
        vectors: Vec<Vec<f32>>,
        /// The physical requests, as billed.
        calls: Vec<EmbedCall>,
        /// Texts served from a cache.
        cache_hits: u64,
    },
    /// A mission's wall-clock latency, measured when it ran.
    Latency {
        /// The mission ([`mission_key`]).
        mission: String,
        /// Milliseconds.
        measured_ms: f64,
    },
}

/// The key of a mission in a cassette: topic, repetition, condition and
/// lambda.
pub fn mission_key(topic: &str, rep: u32, condition: &str, lambda: Option<f64>) -> String {
    format!("{topic}/{rep}/{condition}/{}", lambda.map_or("-".to_string(), |l| l.to_string()))
}

/// Appends entries to a cassette, each synced; the first write error is
/// kept and reported by [`Recorder::finish`].
pub struct Recorder {
    writer: Mutex<FrameWriter>,
    failed: Mutex<Option<Error>>,
}

impl Recorder {
    /// Creates `path` (never over an existing file) with its header.
    pub fn create(path: &Path, setup_json: &str) -> Result<Arc<Recorder>> {
        let header = Entry::Header {
            engine_version: engine::store::trace::record::ENGINE_VERSION.into(),
            setup_json: setup_json.into(),
        };
        let first = encode(path, &header)?;
        let writer = FrameWriter::create(path, &CASSETTE_FORMAT, &first, false)?;
        Ok(Arc::new(Recorder { writer: Mutex::new(writer), failed: Mutex::new(None) }))
    }

    /// Appends one entry.
    pub fn append(&self, entry: &Entry) {
        let mut w = self.writer.lock();
        let result = encode(w.path(), entry).and_then(|bytes| w.append(&bytes).map(|_| ()));
        if let Err(e) = result {
            self.failed.lock().get_or_insert(e);
        }
    }

    /// The first write error, if any.
    pub fn finish(&self) -> Result<()> {
        match self.failed.lock().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn encode(path: &Path, entry: &Entry) -> Result<Vec<u8>> {
    engine::store::codec::encode(entry).map_err(|e| Error::Format {
        file: path.display().to_string(),
        cause: format!("cannot encode a cassette entry: {e}"),
    })
}

/// A chat port that records every answer of the port it wraps.
pub struct RecordingChat {
    /// The live port.
    pub inner: Arc<dyn ChatPort>,
    /// Where answers go.
    pub recorder: Arc<Recorder>,
}

impl ChatPort for RecordingChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        Box::pin(async move {
            let reply = self.inner.complete(request).await?;
            self.recorder.append(&Entry::Chat {
                request: request.digest(),
                text: reply.text.clone(),
                spend: reply.spend,
                estimated: reply.estimated,
                attempts: reply.attempts.clone(),
            });
            Ok(reply)
        })
    }
}

/// An embedding port that records every answer of the port it wraps.
pub struct RecordingEmbedder {
    /// The live port.
    pub inner: Arc<dyn EmbeddingPort>,
    /// Where answers go.
    pub recorder: Arc<Recorder>,
}

impl EmbeddingPort for RecordingEmbedder {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, engine::embed::EmbedResult<EmbedBatch>> {
        Box::pin(async move {
            let batch = self.inner.embed(key, texts).await?;
            self.recorder.append(&Entry::Embed {
                request: embed_request_digest(key, texts),
                vectors: batch.vectors.iter().map(|v| v.to_vec()).collect(),
                calls: batch.calls.clone(),
                cache_hits: batch.cache_hits,
            });
            Ok(batch)
        })
    }
}

/// A recorded experiment, served back.
pub struct Cassette {
    /// The setup its recorder was given.
    pub setup_json: String,
    /// The engine that recorded it.
    pub engine_version: String,
    chats: Mutex<HashMap<Digest, VecDeque<ChatReply>>>,
    embeds: Mutex<HashMap<Digest, VecDeque<EmbedBatch>>>,
    /// Measured latency per mission.
    pub latencies: HashMap<String, f64>,
    served: AtomicU64,
}

impl Cassette {
    /// Reads a cassette; damage is an error naming the file and frame.
    pub fn read(path: &Path) -> Result<Arc<Cassette>> {
        let version = engine::store::frame::readable_version(path, &CASSETTE_FORMAT, 1);
        let layout = if version >= 2 { Layout::Current } else { Layout::BeforeCached };
        let entries = engine::store::frame::read_all(path, &Format { version, ..CASSETTE_FORMAT }, |f| {
            with_layout(layout, || engine::store::codec::decode::<Entry>(&f.payload))
        })?;
        let mut it = entries.into_iter();
        let Some(Entry::Header { engine_version, setup_json }) = it.next() else {
            return Err(Error::Format { file: path.display().to_string(), cause: "no cassette header".into() });
        };
        let (mut chats, mut embeds, mut latencies) = (HashMap::new(), HashMap::new(), HashMap::new());
        for e in it {
            match e {
                Entry::Chat { request, text, spend, estimated, attempts } => chats
                    .entry(request)
                    .or_insert_with(VecDeque::new)
                    .push_back(ChatReply { text, spend, estimated, attempts }),
                Entry::Embed { request, vectors, calls, cache_hits } => {
                    let vectors = vectors.into_iter().map(Arc::from).collect();
                    embeds.entry(request).or_insert_with(VecDeque::new).push_back(EmbedBatch {
                        vectors,
                        calls,
                        cache_hits,
                    });
                }
                Entry::Latency { mission, measured_ms } => {
                    latencies.insert(mission, measured_ms);
                }
                Entry::Header { .. } => {
                    return Err(Error::Format { file: path.display().to_string(), cause: "a second header".into() })
                }
            }
        }
        Ok(Arc::new(Cassette {
            setup_json,
            engine_version,
            chats: Mutex::new(chats),
            embeds: Mutex::new(embeds),
            latencies,
            served: AtomicU64::new(0),
        }))
    }

    /// Answers served so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// The next recorded answer to `request`; the last one is served again
    /// once the recorded ones are used up.
    fn chat(&self, request: &Digest) -> Option<ChatReply> {
        self.next(self.chats.lock().get_mut(request)?)
    }

    fn embed(&self, request: &Digest) -> Option<EmbedBatch> {
        self.next(self.embeds.lock().get_mut(request)?)
    }

    fn next<T: Clone>(&self, queue: &mut VecDeque<T>) -> Option<T> {
        self.served.fetch_add(1, Ordering::Relaxed);
        if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        }
    }
}

/// A chat port answering from a cassette; a miss goes to `fallback` (a
/// judge the user configured for the re-scoring), or is an error.
pub struct ReplayChat {
    /// The recording.
    pub cassette: Arc<Cassette>,
    /// Where a miss goes, if anywhere.
    pub fallback: Option<Arc<dyn ChatPort>>,
}

impl ChatPort for ReplayChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, engine::chat::ChatResult<ChatReply>> {
        if let Some(reply) = self.cassette.chat(&request.digest()) {
            return Box::pin(std::future::ready(Ok(reply)));
        }
        match &self.fallback {
            Some(f) => f.complete(request),
            None => Box::pin(std::future::ready(Err(engine::chat::ChatError::Provider {
                cause: format!(
                    "the cassette holds no answer to this {:?} request ({}); a replay makes no call",
                    request.purpose,
                    &request.digest().hex()[..16]
                ),
                spend: Spend::default(),
                attempts: Vec::new(),
            }))),
        }
    }
}

/// An embedding port answering from a cassette only.
pub struct ReplayEmbedder {
    /// The recording.
    pub cassette: Arc<Cassette>,
}

impl EmbeddingPort for ReplayEmbedder {
    fn embed<'a>(
        &'a self,
        key: &'a EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, engine::embed::EmbedResult<EmbedBatch>> {
        let digest = embed_request_digest(key, texts);
        Box::pin(std::future::ready(self.cassette.embed(&digest).ok_or_else(|| engine::embed::EmbedError::Provider {
            cause: format!("the cassette holds no embedding of these {} texts; a replay makes no call", texts.len()),
            calls: Vec::new(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScriptedAgentModel;
    use engine::chat::ChatPurpose;

    /// What a recorder wrote is served back by digest, in order; a request
    /// it never saw is an error, not a call.
    #[test]
    fn a_recorded_answer_is_served_back_and_a_miss_is_an_error() {
        let dir = std::env::temp_dir().join(format!("sim-cassette-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(CASSETTE_FILE);
        let rec = Recorder::create(&path, "{\"setup\": 1}").expect("create");
        let live = Arc::new(ScriptedAgentModel::new(3, engine::cost::Price::from_usd_per_mtok(0.15, 0.6)));
        let chat = RecordingChat { inner: live, recorder: rec.clone() };
        let ask = |text: &str| {
            ChatRequest::new(
                "m",
                ChatPurpose::Agent,
                format!("ROLE: writer\nOUTPUT BUDGET: 50 tokens\nITEMS:\n- {text}\n"),
            )
        };
        let first = engine::testing::block_on_ready(chat.complete(&ask("Prices fell by 90 percent."))).expect("reply");
        rec.append(&Entry::Latency { mission: mission_key("t", 1, "field", Some(0.1)), measured_ms: 12.5 });
        rec.finish().expect("written");
        let c = Cassette::read(&path).expect("reads");
        assert_eq!(c.setup_json, "{\"setup\": 1}");
        assert_eq!(c.latencies.get("t/1/field/0.1"), Some(&12.5));
        let replay = ReplayChat { cassette: c.clone(), fallback: None };
        let again =
            engine::testing::block_on_ready(replay.complete(&ask("Prices fell by 90 percent."))).expect("served");
        assert_eq!((again.text, again.spend), (first.text, first.spend));
        let miss = engine::testing::block_on_ready(replay.complete(&ask("Something else."))).expect_err("a miss");
        assert!(miss.to_string().contains("a replay makes no call"), "{miss}");
        assert_eq!(c.served(), 1);
        assert!(Recorder::create(&path, "{}").is_err(), "a cassette is never overwritten");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
