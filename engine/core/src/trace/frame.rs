//! The trace file: a [`crate::frame`] container whose frames are
//! [`Record`]s, appended and synced one at a time.

use super::record::{Header, Record, RunEnd, TickFrame, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::frame::{Format, FrameReader, FrameWriter, Next};
use std::io::Read;
use std::path::Path;

/// The container format of a trace.
pub const TRACE: Format = Format { magic: *b"SIMTRACE", version: FORMAT_VERSION, what: "simulation trace" };

pub use crate::frame::Torn;

/// A trace as read.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadTrace {
    /// The header.
    pub header: Header,
    /// Committed ticks, in order.
    pub ticks: Vec<TickFrame>,
    /// Present when the run finished.
    pub end: Option<RunEnd>,
    /// Length of the complete frames, where appending continues.
    pub valid_len: u64,
    /// A torn final frame (only when reading leniently).
    pub torn: Option<Torn>,
}

/// Reads a trace of `len` bytes; `file` names it in errors. Strictly, a
/// torn last frame is an error; leniently (for resume) it is reported in
/// [`ReadTrace::torn`] and everything before it is returned. Damage anywhere
/// else is always an error naming the file, the frame and its byte offset.
pub fn read_trace<R: Read>(mut r: R, len: u64, file: &str, lenient: bool) -> Result<ReadTrace> {
    let mut pre = [0u8; crate::frame::PREAMBLE as usize];
    let got = read_up_to(&mut r, &mut pre).map_err(|e| Error::Io { file: file.to_string(), source: e })?;
    let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
    if got == pre.len() && pre[..8] == TRACE.magic && (1..FORMAT_VERSION).contains(&version) {
        return Err(older_format(&pre[..], r, len, file, version));
    }
    let mut r = FrameReader::new(pre[..got].chain(r), len, file, &TRACE)?;
    let mut header = None;
    let mut ticks: Vec<TickFrame> = Vec::new();
    let mut end = None;
    let mut torn = None;
    loop {
        let f = match r.read_next()? {
            Next::Frame(f) => f,
            Next::Torn(t) => {
                torn = Some(t);
                break;
            }
            Next::End => break,
        };
        let record: Record = crate::codec::decode(&f.payload).map_err(|e| r.corrupt(&f, e))?;
        if end.is_some() {
            return Err(r.corrupt(&f, "a frame follows the end-of-run frame"));
        }
        match (record, f.index) {
            (Record::Header(h), 0) => {
                if h.format_version != FORMAT_VERSION {
                    let cause = format!("header format version {} differs from the preamble", h.format_version);
                    return Err(r.corrupt(&f, cause));
                }
                header = Some(*h);
            }
            (Record::Header(_), _) => return Err(r.corrupt(&f, "a second header")),
            (_, 0) => return Err(r.corrupt(&f, "the first frame is not a header")),
            (Record::Tick(t), _) => {
                let expected = ticks.len() as u32 + 1;
                if t.tick != expected {
                    return Err(r.corrupt(&f, format!("tick {} where tick {expected} was expected", t.tick)));
                }
                ticks.push(*t);
            }
            (Record::End(e), _) => end = Some(e),
        }
    }
    if let (Some(t), false) = (&torn, lenient) {
        return Err(t.error());
    }
    let Some(header) = header else {
        return Err(Error::Format { file: file.to_string(), cause: "the trace has no complete header frame".into() });
    };
    Ok(ReadTrace { header, ticks, end, valid_len: r.valid_len(), torn })
}

/// Reads as many bytes as `buf` holds, or fewer at the end of the input.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// The error for a trace of an older format: the header frame has kept its
/// layout, so it names the engine that wrote the trace.
fn older_format(pre: &[u8], r: impl Read, len: u64, file: &str, version: u32) -> Error {
    let old = Format { version, ..TRACE };
    let header = FrameReader::new(pre.chain(r), len, file, &old)
        .and_then(|mut frames| frames.next_frame())
        .ok()
        .flatten()
        .and_then(|f| crate::codec::decode::<Record>(&f.payload).ok());
    let recorded_by = match header {
        Some(Record::Header(h)) => h.engine_version,
        Some(Record::Tick(_) | Record::End(_)) | None => "of an earlier version".into(),
    };
    Error::RecordedByOlder {
        file: file.to_string(),
        recorded_by,
        why: format!("in trace format {version} (this engine reads format {FORMAT_VERSION})"),
    }
}

/// Reads a trace file.
pub fn read_trace_file(path: &Path, lenient: bool) -> Result<ReadTrace> {
    let file = std::fs::File::open(path).map_err(|e| Error::Io { file: path.display().to_string(), source: e })?;
    let len = file.metadata().map_err(|e| Error::Io { file: path.display().to_string(), source: e })?.len();
    read_trace(std::io::BufReader::with_capacity(1 << 20, file), len, &path.display().to_string(), lenient)
}

/// Appends records to a trace file, one synced frame each.
#[derive(Debug)]
pub struct TraceWriter {
    frames: FrameWriter,
    /// The payload buffer, reused across frames.
    buf: Vec<u8>,
}

impl TraceWriter {
    /// Creates `path` holding the preamble and the header. The file appears
    /// only once the header is durable, so a trace that exists always has a
    /// complete header. An existing trace is never overwritten.
    pub fn create(path: &Path, header: &Header) -> Result<TraceWriter> {
        let mut buf = Vec::with_capacity(4096);
        encode(path, &Record::Header(Box::new(header.clone())), &mut buf)?;
        let frames = FrameWriter::create(path, &TRACE, &buf, false)?;
        Ok(TraceWriter { frames, buf })
    }

    /// Opens an existing trace for appending after its first `valid_len`
    /// bytes; anything after them is cut.
    pub fn reopen(path: &Path, valid_len: u64) -> Result<TraceWriter> {
        Ok(TraceWriter { frames: FrameWriter::reopen(path, valid_len)?, buf: Vec::new() })
    }

    /// Appends one record and syncs it; returns the bytes written.
    pub fn append(&mut self, record: &Record) -> Result<u64> {
        encode(self.frames.path(), record, &mut self.buf)?;
        self.frames.append(&self.buf)
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.frames.len()
    }

    /// True when nothing but the preamble is written (never, after create).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

fn encode(path: &Path, record: &Record, buf: &mut Vec<u8>) -> Result<()> {
    crate::codec::encode_into(record, buf)
        .map_err(|e| Error::Format { file: path.display().to_string(), cause: format!("cannot encode a record: {e}") })
}
