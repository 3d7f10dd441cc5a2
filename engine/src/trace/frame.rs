//! The framed log: a preamble, then `length u32 | crc32 u32 | payload`
//! frames, appended and synced one at a time.

use super::codec::{decode, encode_into, MAX_FRAME};
use super::record::{Header, Record, RunEnd, TickFrame, FORMAT_VERSION};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The first eight bytes of every trace.
pub const MAGIC: &[u8; 8] = b"SIMTRACE";
/// Magic plus the little-endian format version.
pub const PREAMBLE: u64 = 12;
const FRAME_HEAD: u64 = 8;

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

/// Where a torn final frame starts and how much of it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Torn {
    /// Frame index.
    pub frame: u64,
    /// Byte offset of the frame's start.
    pub offset: u64,
    /// Bytes the frame needs.
    pub needed: u64,
    /// Bytes that were there.
    pub available: u64,
}

impl Torn {
    /// The error a strict reader reports.
    pub fn error(&self) -> Error {
        Error::TraceTorn { frame: self.frame, offset: self.offset, needed: self.needed, available: self.available }
    }
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::TraceIo { path: path.display().to_string(), cause: e.to_string() }
}

/// Reads a trace of `len` bytes. Strictly, a torn last frame is an error;
/// leniently (for resume) it is reported in [`ReadTrace::torn`] and
/// everything before it is returned. Damage anywhere else is always an
/// error naming the frame and its byte offset.
pub fn read_trace<R: Read>(mut r: R, len: u64, lenient: bool) -> Result<ReadTrace> {
    if len < PREAMBLE {
        return Err(Error::TraceFormat { cause: format!("{len} bytes is too short for a trace preamble") });
    }
    let mut pre = [0u8; PREAMBLE as usize];
    r.read_exact(&mut pre).map_err(|e| Error::TraceFormat { cause: format!("cannot read the preamble: {e}") })?;
    if &pre[..8] != MAGIC {
        return Err(Error::TraceFormat { cause: "not a simulation trace (bad magic bytes)".into() });
    }
    let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
    if version != FORMAT_VERSION {
        return Err(Error::TraceFormat {
            cause: format!("format version {version} is not supported (this engine reads version {FORMAT_VERSION})"),
        });
    }
    let mut offset = PREAMBLE;
    let mut frame = 0u64;
    let mut header = None;
    let mut ticks: Vec<TickFrame> = Vec::new();
    let mut end = None;
    let mut torn = None;
    while offset < len {
        let corrupt = |cause: String| Error::TraceCorrupt { frame, offset, cause };
        let available = len - offset;
        let torn_err = |needed: u64| Torn { frame, offset, needed, available };
        if available < FRAME_HEAD {
            torn = Some(torn_err(FRAME_HEAD));
            break;
        }
        let mut head = [0u8; FRAME_HEAD as usize];
        r.read_exact(&mut head).map_err(|e| corrupt(format!("cannot read: {e}")))?;
        let size = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if size > MAX_FRAME {
            return Err(corrupt(format!("length {size} exceeds the {MAX_FRAME}-byte frame limit")));
        }
        if FRAME_HEAD + size > available {
            torn = Some(torn_err(FRAME_HEAD + size));
            break;
        }
        let mut payload = vec![0u8; size as usize];
        r.read_exact(&mut payload).map_err(|e| corrupt(format!("cannot read: {e}")))?;
        if crc32fast::hash(&payload) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let record = decode(&payload).map_err(|e| corrupt(format!("cannot decode: {e}")))?;
        if end.is_some() {
            return Err(corrupt("a frame follows the end-of-run frame".into()));
        }
        match (record, frame) {
            (Record::Header(h), 0) => {
                if h.format_version != FORMAT_VERSION {
                    return Err(corrupt(format!(
                        "header format version {} differs from the preamble",
                        h.format_version
                    )));
                }
                header = Some(*h);
            }
            (Record::Header(_), _) => return Err(corrupt("a second header".into())),
            (_, 0) => return Err(corrupt("the first frame is not a header".into())),
            (Record::Tick(t), _) => {
                let expected = ticks.len() as u32 + 1;
                if t.tick != expected {
                    return Err(corrupt(format!("tick {} where tick {expected} was expected", t.tick)));
                }
                ticks.push(*t);
            }
            (Record::End(e), _) => end = Some(e),
        }
        offset += FRAME_HEAD + size;
        frame += 1;
    }
    if let (Some(t), false) = (&torn, lenient) {
        return Err(t.error());
    }
    let header = match header {
        Some(h) => h,
        None => return Err(Error::TraceFormat { cause: "the trace has no complete header frame".into() }),
    };
    Ok(ReadTrace { header, ticks, end, valid_len: offset, torn })
}

/// Reads a trace file.
pub fn read_trace_file(path: &Path, lenient: bool) -> Result<ReadTrace> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let len = file.metadata().map_err(|e| io(path, e))?.len();
    read_trace(std::io::BufReader::with_capacity(1 << 20, file), len, lenient)
}

/// Appends frames to a trace file, syncing each one.
pub struct TraceWriter {
    file: File,
    path: PathBuf,
    len: u64,
    /// The payload buffer, reused across frames.
    buf: Vec<u8>,
}

/// Encodes `record` into `buf` and returns its frame head.
fn frame_head(record: &Record, buf: &mut Vec<u8>) -> Result<[u8; FRAME_HEAD as usize]> {
    encode_into(record, buf)?;
    if buf.len() as u64 > MAX_FRAME {
        return Err(Error::TraceFormat {
            cause: format!("a frame of {} bytes exceeds the {MAX_FRAME}-byte limit", buf.len()),
        });
    }
    let mut head = [0u8; FRAME_HEAD as usize];
    head[..4].copy_from_slice(&(buf.len() as u32).to_le_bytes());
    head[4..].copy_from_slice(&crc32fast::hash(buf).to_le_bytes());
    Ok(head)
}

impl TraceWriter {
    /// Creates `path` holding the preamble and the header. The file appears
    /// only once the header is durable (written to a temporary file, synced,
    /// renamed), so a trace that exists always has a complete header.
    pub fn create(path: &Path, header: &Header) -> Result<TraceWriter> {
        let tmp = path.with_extension("bin.partial");
        let mut payload = Vec::with_capacity(4096);
        let head = frame_head(&Record::Header(Box::new(header.clone())), &mut payload)?;
        let mut bytes = Vec::with_capacity(payload.len() + 20);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&head);
        bytes.extend_from_slice(&payload);
        let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(&bytes).and_then(|_| f.sync_all()).map_err(|e| io(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        let file = OpenOptions::new().append(true).open(path).map_err(|e| io(path, e))?;
        Ok(TraceWriter { file, path: path.to_path_buf(), len: bytes.len() as u64, buf: payload })
    }

    /// Opens an existing trace for appending after its first `valid_len`
    /// bytes; anything after them is cut.
    pub fn reopen(path: &Path, valid_len: u64) -> Result<TraceWriter> {
        let file = OpenOptions::new().write(true).open(path).map_err(|e| io(path, e))?;
        file.set_len(valid_len).and_then(|_| file.sync_all()).map_err(|e| io(path, e))?;
        drop(file);
        let file = OpenOptions::new().append(true).open(path).map_err(|e| io(path, e))?;
        Ok(TraceWriter { file, path: path.to_path_buf(), len: valid_len, buf: Vec::new() })
    }

    /// Appends one record and syncs it; returns the bytes written.
    pub fn append(&mut self, record: &Record) -> Result<u64> {
        let head = frame_head(record, &mut self.buf)?;
        self.file
            .write_all(&head)
            .and_then(|_| self.file.write_all(&self.buf))
            .and_then(|_| self.file.sync_data())
            .map_err(|e| io(&self.path, e))?;
        let written = FRAME_HEAD + self.buf.len() as u64;
        self.len += written;
        Ok(written)
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing but the preamble is written (never, after create).
    pub fn is_empty(&self) -> bool {
        self.len <= PREAMBLE
    }
}
