//! The chat write-ahead log, `chat.wal`: every answer a live chat provider
//! gave (or the failure it billed), appended and synced as the call
//! completes, not only when its tick commits. After a crash `--resume`
//! serves the answers already paid for from it and sends only what is
//! missing, so nothing paid for is bought twice.
//!
//! A [`crate::store::frame`] container (magic `SIMCHWAL`) whose first frame names
//! the engine that wrote it, then one frame per answer. A torn final frame
//! (a kill during a write) is cut when the log is reopened.

use crate::chat::{BatchJournal, ChatAttempt, ChatError, ChatPort, ChatReply, ChatRequest, SubmittedBatch};
use crate::cost::{with_layout, Layout, Spend};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::store::frame::{Format, FrameReader, FrameWriter, Next};
use crate::BoxFuture;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The container format of `chat.wal`. Version 2 (engine 0.6.0): a
/// [`Spend`] holds the cached prompt tokens; a version 1 log is still read,
/// and appended to in its own layout.
pub const CHAT_WAL_FORMAT: Format = Format { magic: *b"SIMCHWAL", version: 2, what: "chat write-ahead log" };

/// The layout of [`Spend`] in the log at `path`, and its container format.
fn layout(path: &Path) -> (Format, Layout) {
    let version = crate::store::frame::readable_version(path, &CHAT_WAL_FORMAT, 1);
    let layout = if version >= 2 { Layout::Current } else { Layout::BeforeCached };
    (Format { version, ..CHAT_WAL_FORMAT }, layout)
}

/// One frame of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum WalFrame {
    /// The first frame: who wrote the log.
    Start {
        /// Engine version.
        engine_version: String,
    },
    /// One answered call.
    Call(WalEntry),
    /// A batch submitted to a Batch API, before its answers.
    Batch(SubmittedBatch),
}

/// One answered call: the request digest and the reply, or the failure
/// with what it billed; either way with its transport attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WalEntry {
    /// The request digest.
    pub request: Digest,
    /// The answer.
    pub answer: std::result::Result<ChatReply, (String, Spend, Vec<ChatAttempt>)>,
}

/// The answers in a log, oldest first; a missing file has none, and a torn
/// final frame is left out. Returns them with the length of the complete
/// frames (where appending continues).
pub fn read_wal(path: &Path) -> Result<(Vec<WalEntry>, u64)> {
    read_log(path).map(|(entries, _, valid)| (entries, valid))
}

/// The answers, the batches recorded as submitted (oldest first) and the
/// length of the complete frames.
fn read_log(path: &Path) -> Result<(Vec<WalEntry>, Vec<SubmittedBatch>, u64)> {
    if !path.exists() {
        return Ok((Vec::new(), Vec::new(), 0));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::Io { file: path.display().to_string(), source: e })?;
    let len = file.metadata().map_err(|e| Error::Io { file: path.display().to_string(), source: e })?.len();
    let (format, layout) = layout(path);
    let mut r = FrameReader::new(std::io::BufReader::new(file), len, &path.display().to_string(), &format)?;
    let (mut out, mut batches) = (Vec::new(), Vec::new());
    loop {
        match r.read_next()? {
            Next::Frame(f) => {
                let frame = with_layout(layout, || crate::store::codec::decode::<WalFrame>(&f.payload));
                match frame.map_err(|e| r.corrupt(&f, e))? {
                    WalFrame::Start { .. } => {}
                    WalFrame::Call(entry) => out.push(entry),
                    WalFrame::Batch(b) => batches.push(b),
                }
            }
            Next::Torn(_) | Next::End => return Ok((out, batches, r.valid_len())),
        }
    }
}

/// A chat port that appends every answer of the port it wraps to a log,
/// synced, before handing it on.
pub struct WalChat {
    inner: Arc<dyn ChatPort>,
    path: PathBuf,
    frames: Arc<Mutex<FrameWriter>>,
    layout: Layout,
}

/// The log as a batch port's journal: it shares the log's writer.
struct Journal {
    path: PathBuf,
    frames: Arc<Mutex<FrameWriter>>,
    layout: Layout,
}

impl BatchJournal for Journal {
    fn submitted(&self, batch: &SubmittedBatch) -> Result<()> {
        let payload = with_layout(self.layout, || encode(&self.path, &WalFrame::Batch(batch.clone())))?;
        self.frames.lock().append(&payload).map(|_| ())
    }
}

impl WalChat {
    /// Wraps `inner`, appending to the log at `path`: created when missing,
    /// otherwise reopened after its last complete frame (a torn tail is cut).
    pub fn open(path: &Path, inner: Arc<dyn ChatPort>) -> Result<WalChat> {
        let layout = layout(path).1;
        let (frames, batches) = if path.exists() {
            let (_, batches, valid) = read_log(path)?;
            (FrameWriter::reopen(path, valid)?, batches)
        } else {
            let start = WalFrame::Start { engine_version: crate::store::trace::record::ENGINE_VERSION.to_string() };
            let payload = encode(path, &start)?;
            (FrameWriter::create(path, &CHAT_WAL_FORMAT, &payload, false)?, Vec::new())
        };
        let frames = Arc::new(Mutex::new(frames));
        let journal = Journal { path: path.to_path_buf(), frames: Arc::clone(&frames), layout };
        inner.attach_journal(Arc::new(journal), batches);
        Ok(WalChat { inner, path: path.to_path_buf(), frames, layout })
    }

    /// Logs the answers of `calls`, bought before the log was opened (a
    /// run's pilot), so that a resume is served them even if the run never
    /// asked them. Failed calls are left out: the run asks them again, and
    /// its own answer is the one a resume must serve.
    pub fn log_paid(&self, calls: &[crate::turn::ChatCallRecord]) -> Result<()> {
        for c in calls.iter().filter(|c| c.failed.is_none()) {
            self.append(WalEntry { request: c.request, answer: c.answer() })?;
        }
        Ok(())
    }

    fn append(&self, entry: WalEntry) -> Result<()> {
        let payload = with_layout(self.layout, || encode(&self.path, &WalFrame::Call(entry)))?;
        self.frames.lock().append(&payload).map(|_| ())
    }
}

fn encode(path: &Path, frame: &WalFrame) -> Result<Vec<u8>> {
    crate::store::codec::encode(frame)
        .map_err(|e| Error::Format { file: path.display().to_string(), cause: e.to_string() })
}

impl ChatPort for WalChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, crate::chat::ChatResult<ChatReply>> {
        Box::pin(async move {
            let result = self.inner.complete(request).await;
            let answer = match &result {
                Ok(r) => Ok(r.clone()),
                Err(ChatError::Provider { cause, spend, attempts }) => Err((cause.clone(), *spend, attempts.clone())),
                Err(ChatError::Engine(_)) => return result,
            };
            // An answer that cannot be logged is still paid for: the call
            // fails with its cost, so the trace keeps what it cost.
            if let Err(e) = self.append(WalEntry { request: request.digest(), answer }) {
                let spend = result.as_ref().map_or_else(ChatError::spend, |r| r.spend);
                let attempts = match &result {
                    Ok(r) => r.attempts.clone(),
                    Err(e) => e.attempts().to_vec(),
                };
                let cause = format!("the answer was paid for but not logged: {e}");
                return Err(ChatError::Provider { cause, spend, attempts });
            }
            result
        })
    }

    fn endpoints(&self) -> Vec<crate::chat::EndpointCount> {
        self.inner.endpoints()
    }

    /// Logged like a reply, its text the probabilities'
    /// ([`crate::chat::OptionProbabilities::to_text`]).
    fn option_probabilities<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, crate::chat::ChatResult<crate::chat::OptionProbabilities>> {
        Box::pin(async move {
            let result = self.inner.option_probabilities(request).await;
            let answer = match &result {
                Ok(p) => {
                    Ok(ChatReply { text: p.to_text(), spend: p.spend, estimated: p.estimated, attempts: Vec::new() })
                }
                Err(ChatError::Provider { cause, spend, attempts }) => Err((cause.clone(), *spend, attempts.clone())),
                Err(ChatError::Engine(_)) => return result,
            };
            if let Err(e) = self.append(WalEntry { request: request.digest(), answer }) {
                let spend = result.as_ref().map_or_else(ChatError::spend, |p| p.spend);
                let cause = format!("the answer was paid for but not logged: {e}");
                return Err(ChatError::Provider { cause, spend, attempts: Vec::new() });
            }
            result
        })
    }

    fn activity(&self) -> Option<crate::chat::ChatActivity> {
        self.inner.activity()
    }

    fn cache_report(&self) -> Option<crate::chat::CacheReport> {
        self.inner.cache_report()
    }

    fn conversation_started(&self) {
        self.inner.conversation_started();
    }

    fn conversation_ended(&self) {
        self.inner.conversation_ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ChatPurpose;
    use crate::testing::{block_on_ready, FixedChat};

    #[test]
    fn answers_are_logged_as_they_come_and_a_torn_tail_is_cut() {
        let dir = std::env::temp_dir().join(format!("sim-wal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("answers.wal");
        let _ = std::fs::remove_file(&path);
        let inner =
            Arc::new(FixedChat::default().with(ChatPurpose::Probe, &["ANSWER: 3\nWHY: x", "ANSWER: 4\nWHY: y"]));
        let wal = WalChat::open(&path, inner.clone()).expect("open");
        let first = ChatRequest::new("m", ChatPurpose::Probe, "one");
        let second = ChatRequest::new("m", ChatPurpose::Probe, "two");
        block_on_ready(wal.complete(&first)).expect("reply");
        block_on_ready(wal.complete(&second)).expect("reply");
        let third = ChatRequest::new("m", ChatPurpose::Probe, "three");
        assert!(block_on_ready(wal.complete(&third)).is_err(), "no reply left: a failure, logged too");
        let (entries, _) = read_wal(&path).expect("read");
        assert_eq!(
            entries.iter().map(|e| e.request).collect::<Vec<_>>(),
            vec![first.digest(), second.digest(), third.digest()]
        );
        assert!(matches!(&entries[0].answer, Ok(r) if !r.estimated && r.text == "ANSWER: 3\nWHY: x"));
        assert!(entries[2].answer.is_err());
        // A kill mid-write leaves a torn frame; reopening cuts it and appends.
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 3]).expect("tear");
        assert_eq!(read_wal(&path).expect("lenient").0.len(), 2);
        let again = WalChat::open(&path, inner).expect("reopen");
        drop(again);
        assert_eq!(read_wal(&path).expect("read").0.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A log written before cached tokens (version 1, three-field spends)
    /// is read, and a resume appends to it in that layout.
    #[test]
    fn a_version_1_log_reads_and_is_appended_to_in_its_layout() {
        let dir = std::env::temp_dir().join(format!("sim-wal1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("answers.wal");
        let v1 = Format { version: 1, ..CHAT_WAL_FORMAT };
        let old = ChatRequest::new("m", ChatPurpose::Probe, "old");
        let spend = Spend { input_tokens: 9, output_tokens: 4, nano_usd: 17, cached_input_tokens: 0 };
        let reply = ChatReply { text: "ANSWER: 2\nWHY: z".into(), spend, estimated: false, attempts: Vec::new() };
        let mut bytes = v1.preamble().to_vec();
        with_layout(Layout::BeforeCached, || {
            for frame in [
                WalFrame::Start { engine_version: "0.5.0".into() },
                WalFrame::Call(WalEntry { request: old.digest(), answer: Ok(reply.clone()) }),
            ] {
                let payload = crate::store::codec::encode(&frame).expect("encodes");
                crate::store::frame::push_frame(&mut bytes, &payload).expect("frame");
            }
        });
        std::fs::write(&path, &bytes).expect("write");
        let (entries, _) = read_wal(&path).expect("a version 1 log reads");
        assert_eq!(entries[0].answer, Ok(reply));
        let inner = Arc::new(FixedChat::default().with(ChatPurpose::Probe, &["ANSWER: 3\nWHY: x"]));
        let wal = WalChat::open(&path, inner).expect("reopen");
        let new = ChatRequest::new("m", ChatPurpose::Probe, "new");
        block_on_ready(wal.complete(&new)).expect("reply");
        let (entries, _) = read_wal(&path).expect("still one layout");
        assert_eq!(entries.iter().map(|e| e.request).collect::<Vec<_>>(), vec![old.digest(), new.digest()]);
        assert_eq!(std::fs::read(&path).expect("read")[8..12], 1u32.to_le_bytes(), "still version 1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
