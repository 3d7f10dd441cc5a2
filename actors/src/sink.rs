//! Writing the trace off the tick loop.
//!
//! [`TraceSink`] owns a [`TraceWriter`] on a dedicated thread: encoding,
//! checksumming, writing and syncing a tick's frame overlap with the next
//! tick's work instead of stalling it. A tick is committed once its frame
//! is synced; [`TraceSink::finish`] waits for every frame sent, so nothing
//! is reported as done before it is durable. The channel is a rendezvous:
//! a tick's frame is handed over only once the previous one is written, so
//! at most one frame is in writing while the next tick runs, and a slow
//! disk slows the run rather than filling memory (a tick of a million
//! personas holds about a gigabyte).

use crate::error::{Error, Result};
use engine::store::trace::{Record, TraceWriter};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// A trace writer on its own thread.
pub struct TraceSink {
    tx: Option<SyncSender<Record>>,
    handle: Option<JoinHandle<Result<u64>>>,
}

impl TraceSink {
    /// Starts the writer thread.
    pub fn new(mut writer: TraceWriter) -> TraceSink {
        let (tx, rx) = sync_channel::<Record>(0);
        let handle = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || {
                for record in rx {
                    let what = match &record {
                        Record::Tick(t) => format!("tick {}", t.tick),
                        Record::End(_) => "the end of the run".to_string(),
                        Record::Header(_) => "the header".to_string(),
                        Record::TickPart(_) | Record::TickCommit(_) => "a tick part".to_string(),
                        Record::Split(_) => "the shard record".to_string(),
                    };
                    writer.append(&record).map_err(|source| Error::TraceWrite { what, source })?;
                }
                Ok(writer.len())
            })
            .ok();
        TraceSink { tx: Some(tx), handle }
    }

    /// Queues a record. Fails (with the writer's error) once the writer has
    /// stopped.
    pub fn send(&mut self, record: Record) -> Result<()> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(record).is_ok());
        if sent {
            return Ok(());
        }
        Err(self.join().err().unwrap_or(Error::TraceWriter("stopped")))
    }

    fn join(&mut self) -> Result<u64> {
        self.tx = None;
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| Error::TraceWriter("panicked; this is a bug"))?,
            None => Err(Error::TraceWriter("could not be started")),
        }
    }

    /// Waits until every queued record is written and synced; returns the
    /// trace's length in bytes.
    pub fn finish(mut self) -> Result<u64> {
        self.join()
    }
}

impl Drop for TraceSink {
    /// A sink dropped on an error path still writes what it was given
    /// before the process goes on: frames are never silently dropped.
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}
