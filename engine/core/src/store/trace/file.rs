//! The trace file: a [`crate::store::frame`] container whose frames are
//! [`Record`]s, appended and synced one at a time. A tick whose encoding is
//! larger than a part ([`PART_BYTES`]) is written as [`TickPart`] frames
//! closed by a [`TickCommit`], so that no frame nears the frame limit
//! whatever the panel size; readers reassemble it.

use super::record::{
    spend_layout, Bytes, Header, Record, RunEnd, Split, TickCommit, TickFrame, TickPart, COMPRESSED_FROM,
    FORMAT_VERSION, OLDEST_READABLE,
};
use crate::cost::{with_layout, Layout};
use crate::error::{Error, Result};
use crate::store::frame::{Format, FrameReader, FrameWriter, Next, MAX_FRAME};
use std::io::Read;
use std::path::Path;

/// The container format of a trace.
pub const TRACE_FORMAT: Format = Format { magic: *b"SIMTRACE", version: FORMAT_VERSION, what: "simulation trace" };

/// The largest slice of a tick one part frame carries: 16 MiB, far below
/// the frame limit, so that neither the writer nor a reader holds a frame
/// near it, and small beside a large tick's own memory.
pub const PART_BYTES: usize = 16 << 20;
// A part frame adds a few bytes of record framing to its slice.
const _: () = assert!(PART_BYTES as u64 + 64 <= MAX_FRAME);

pub use crate::store::frame::Torn;

/// A trace as read.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadTrace {
    /// The header.
    pub header: Header,
    /// Committed ticks, in order.
    pub ticks: Vec<TickFrame>,
    /// Present when the run finished.
    pub end: Option<RunEnd>,
    /// A shard's trace: `Split::Shard`; a merged one: `Split::Merged`.
    pub split: Option<Split>,
    /// A merged trace's split of each tick, shard by shard (empty for any
    /// other trace).
    pub tick_splits: Vec<Vec<super::record::ShardTick>>,
    /// Length of the committed frames, where appending continues.
    pub valid_len: u64,
    /// What follows the committed frames (only when reading leniently).
    pub tail: Option<Tail>,
}

/// What a run stopped mid-write leaves after its last committed frame: the
/// parts of a tick with no commit frame, a torn frame, or both. Resume cuts
/// it off (and keeps its bytes); a strict reader refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The trace.
    pub file: String,
    /// Byte offset where it starts: the end of the committed frames.
    pub offset: u64,
    /// The tick whose parts are there without their commit, and how many
    /// complete parts there are.
    pub uncommitted: Option<(u32, u32)>,
    /// The torn final frame, if the writer stopped inside one.
    pub torn: Option<Torn>,
}

impl Tail {
    /// One line for a person: what is there and where.
    pub fn describe(&self) -> String {
        let torn = self.torn.as_ref().map(|t| {
            format!("frame {} at byte offset {} is torn ({} of {} bytes)", t.frame, t.offset, t.available, t.needed)
        });
        match (self.uncommitted, torn) {
            (Some((tick, parts)), torn) => {
                let then = torn.map(|t| format!(", then {t}")).unwrap_or_default();
                format!(
                    "tick {tick} is not committed: {parts} part frames from byte offset {} and no commit frame{then}",
                    self.offset
                )
            }
            (None, Some(t)) => t,
            (None, None) => format!("nothing after byte offset {}", self.offset),
        }
    }

    /// The error a strict reader reports.
    pub fn error(&self) -> Error {
        match (self.uncommitted, &self.torn) {
            (None, Some(t)) => t.error(),
            (Some((tick, parts)), _) => {
                Error::Uncommitted { file: self.file.clone(), tick, parts, offset: self.offset }
            }
            (None, None) => Error::Format { file: self.file.clone(), cause: self.describe() },
        }
    }
}

/// The parts of a tick read so far.
#[derive(Debug)]
struct Pending {
    tick: u32,
    parts: u32,
    bytes: Vec<u8>,
}

/// Reads a trace record by record, in order, checking that it is well
/// formed: a header first, ticks numbered from 1 without gaps, nothing
/// after the end frame. A tick written in parts comes out whole, as one
/// `Record::Tick`; part and commit frames are never returned.
#[derive(Debug)]
pub struct RecordReader<R> {
    frames: FrameReader<R>,
    version: u32,
    ticks: u32,
    ended: bool,
    pending: Option<Pending>,
    committed: u64,
    tail: Option<Tail>,
    /// Whether the trace is a merge of shards.
    merged: bool,
}

/// The source of a [`RecordReader`]: the preamble it has read, then the rest.
pub type Source<R> = std::io::Chain<std::io::Cursor<Vec<u8>>, R>;

impl<R: Read> RecordReader<Source<R>> {
    /// Opens a trace of `len` bytes; `file` names it in errors. A trace of
    /// a format this engine no longer reads gets
    /// [`Error::RecordedByOlder`], naming the engine that wrote it.
    pub fn new(mut r: R, len: u64, file: &str) -> Result<RecordReader<Source<R>>> {
        let mut pre = [0u8; crate::store::frame::PREAMBLE as usize];
        let got = read_up_to(&mut r, &mut pre).map_err(|e| Error::Io { file: file.to_string(), source: e })?;
        let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
        let ours = got == pre.len() && pre[..8] == TRACE_FORMAT.magic;
        if ours && (1..OLDEST_READABLE).contains(&version) {
            return Err(older_format(&pre[..], r, len, file, version));
        }
        let version =
            if ours && (OLDEST_READABLE..=FORMAT_VERSION).contains(&version) { version } else { FORMAT_VERSION };
        let format = Format { version, ..TRACE_FORMAT };
        let frames = FrameReader::new(std::io::Cursor::new(pre[..got].to_vec()).chain(r), len, file, &format)?;
        Ok(RecordReader {
            frames,
            version,
            ticks: 0,
            ended: false,
            pending: None,
            committed: crate::store::frame::PREAMBLE,
            tail: None,
            merged: false,
        })
    }
}

impl<R: Read> RecordReader<R> {
    /// The next header, tick or end record; `None` at the end of the file
    /// or at a tail left by a run stopped mid-write ([`RecordReader::tail`]).
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        loop {
            let f = match self.frames.read_next()? {
                Next::Frame(f) => f,
                Next::Torn(t) => return Ok(self.stop(Some(t))),
                Next::End => return Ok(self.stop(None)),
            };
            let r = &self.frames;
            let layout = spend_layout(self.version);
            let record: Record = match self.version >= COMPRESSED_FROM {
                true => {
                    let bytes = unpack(&f.payload).map_err(|e| r.corrupt(&f, e))?;
                    with_layout(layout, || crate::store::codec::decode(&bytes))
                }
                false => with_layout(layout, || crate::store::codec::decode(&f.payload)),
            }
            .map_err(|e| r.corrupt(&f, e))?;
            if self.ended {
                return Err(r.corrupt(&f, "a frame follows the end-of-run frame"));
            }
            let expected = self.ticks + 1;
            if self.pending.is_some() && !matches!(record, Record::TickPart(_) | Record::TickCommit(_)) {
                return Err(
                    r.corrupt(&f, format!("the parts of tick {expected} are not followed by their commit frame"))
                );
            }
            let record = match (record, f.index) {
                (Record::Header(h), 0) => {
                    if h.format_version != self.version {
                        let cause = format!("header format version {} differs from the preamble", h.format_version);
                        return Err(r.corrupt(&f, cause));
                    }
                    Record::Header(h)
                }
                (Record::Header(_), _) => return Err(r.corrupt(&f, "a second header")),
                (_, 0) => return Err(r.corrupt(&f, "the first frame is not a header")),
                (Record::Tick(t), _) => {
                    if t.tick != expected {
                        return Err(r.corrupt(&f, format!("tick {} where tick {expected} was expected", t.tick)));
                    }
                    Record::Tick(t)
                }
                (Record::TickPart(p), _) => {
                    let pending = self.pending.get_or_insert(Pending { tick: expected, parts: 0, bytes: Vec::new() });
                    if (p.tick, p.part) != (pending.tick, pending.parts) {
                        let want = format!("part {} of tick {}", pending.parts, pending.tick);
                        return Err(
                            r.corrupt(&f, format!("part {} of tick {} where {want} was expected", p.part, p.tick))
                        );
                    }
                    pending.parts += 1;
                    pending.bytes.extend_from_slice(&p.bytes.0);
                    continue;
                }
                (Record::TickCommit(c), _) => {
                    let Some(p) = self.pending.take() else {
                        return Err(
                            r.corrupt(&f, format!("a commit frame for tick {} with no parts before it", c.tick))
                        );
                    };
                    let read = TickCommit { tick: p.tick, parts: p.parts, bytes: p.bytes.len() as u64 };
                    if c != read {
                        let cause = format!("commit frame {c:?} does not match the parts read ({read:?})");
                        return Err(r.corrupt(&f, cause));
                    }
                    match with_layout(layout, || crate::store::codec::decode_assembled::<Record>(&p.bytes)) {
                        Ok(Record::Tick(t)) if t.tick == c.tick => Record::Tick(t),
                        Ok(_) => {
                            return Err(r.corrupt(&f, format!("the parts of tick {} do not hold that tick", c.tick)))
                        }
                        Err(e) => return Err(r.corrupt(&f, format!("the parts of tick {}: {e}", c.tick))),
                    }
                }
                (Record::End(e), _) => {
                    self.ended = true;
                    Record::End(e)
                }
                (Record::Split(s @ (Split::Shard(_) | Split::Merged { .. })), 1) => {
                    self.merged = matches!(s, Split::Merged { .. });
                    Record::Split(s)
                }
                (Record::Split(Split::Tick { tick, shards }), _) if self.merged => {
                    if tick != expected {
                        return Err(
                            r.corrupt(&f, format!("the split of tick {tick} where tick {expected} was expected"))
                        );
                    }
                    Record::Split(Split::Tick { tick, shards })
                }
                (Record::Split(_), _) => {
                    return Err(
                        r.corrupt(&f, "a shard record out of place (it follows the header, or precedes a merged tick)")
                    )
                }
            };
            if let Record::Tick(_) = record {
                self.ticks += 1;
            }
            self.committed = self.frames.valid_len();
            return Ok(Some(record));
        }
    }

    /// Ends the reading: what follows the committed frames becomes the tail.
    fn stop(&mut self, torn: Option<Torn>) -> Option<Record> {
        let uncommitted = self.pending.take().map(|p| (p.tick, p.parts));
        if uncommitted.is_some() || torn.is_some() {
            self.tail = Some(Tail { file: self.frames.file().to_string(), offset: self.committed, uncommitted, torn });
        }
        None
    }

    /// What follows the committed frames, once [`RecordReader::next_record`]
    /// has returned `None`.
    pub fn tail(&self) -> Option<&Tail> {
        self.tail.as_ref()
    }

    /// Bytes of committed frames read so far: where appending continues.
    pub fn committed_len(&self) -> u64 {
        self.committed
    }
}

/// Reads a trace of `len` bytes; `file` names it in errors. Strictly, a
/// tail (a torn last frame, a tick's parts with no commit) is an error;
/// leniently (for resume) it is reported in [`ReadTrace::tail`] and
/// everything before it is returned. Damage anywhere else is always an
/// error naming the file, the frame and its byte offset.
pub fn read_trace<R: Read>(r: R, len: u64, file: &str, lenient: bool) -> Result<ReadTrace> {
    read_all(RecordReader::new(r, len, file)?, file, lenient)
}

/// Every record of `r`, as [`read_trace`] returns them.
fn read_all<R: Read>(mut r: RecordReader<R>, file: &str, lenient: bool) -> Result<ReadTrace> {
    let mut header = None;
    let mut ticks = Vec::new();
    let mut end = None;
    let (mut split, mut tick_splits) = (None, Vec::new());
    while let Some(record) = r.next_record()? {
        match record {
            Record::Header(h) => header = Some(*h),
            Record::Tick(t) => ticks.push(*t),
            Record::End(e) => end = Some(e),
            Record::Split(Split::Tick { shards, .. }) => tick_splits.push(shards),
            Record::Split(s @ (Split::Shard(_) | Split::Merged { .. })) => split = Some(s),
            // The record reader assembles parts and never returns them.
            Record::TickPart(_) | Record::TickCommit(_) => {}
        }
    }
    let tail = r.tail().cloned();
    if let (Some(t), false) = (&tail, lenient) {
        return Err(t.error());
    }
    let Some(header) = header else {
        return Err(Error::Format { file: file.to_string(), cause: "the trace has no complete header frame".into() });
    };
    // A tick split written without its tick (a merge stopped between the
    // two) is not kept.
    tick_splits.truncate(ticks.len());
    Ok(ReadTrace { header, ticks, end, split, tick_splits, valid_len: r.committed_len(), tail })
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
    let old = Format { version, ..TRACE_FORMAT };
    let header = FrameReader::new(pre.chain(r), len, file, &old)
        .and_then(|mut frames| frames.next_frame())
        .ok()
        .flatten()
        .and_then(|f| crate::store::codec::decode::<Record>(&f.payload).ok());
    let recorded_by = match header {
        Some(Record::Header(h)) => h.engine_version,
        _ => "of an earlier version".into(),
    };
    Error::RecordedByOlder {
        file: file.to_string(),
        recorded_by,
        why: format!("in trace format {version} (this engine reads format {FORMAT_VERSION})"),
    }
}

/// What [`outline`] reads of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Outline {
    /// The header.
    pub header: Header,
    /// The shard record after it, if any.
    pub split: Option<Split>,
    /// Committed ticks.
    pub ticks: u32,
    /// The end frame, when the run finished.
    pub end: Option<RunEnd>,
}

/// A trace's header, shard record, committed tick count and end frame,
/// read without decoding a tick: every frame is checked and unpacked, but
/// only the small records are decoded. For checking many shards before a
/// merge reads them.
pub fn outline(path: &Path) -> Result<Outline> {
    // The variant positions of `Record` (its encoding starts with one).
    const TICK: u8 = 1;
    const PART: u8 = 3;
    const COMMIT: u8 = 4;
    let mut r = open_records(path)?;
    let (mut header, mut split, mut ticks, mut end) = (None, None, 0, None);
    // A torn tail ends it, as it ends any reading.
    while let Next::Frame(f) = r.frames.read_next()? {
        let bytes = match r.version >= COMPRESSED_FROM {
            true => unpack(&f.payload).map_err(|e| r.frames.corrupt(&f, e))?,
            false => f.payload.clone(),
        };
        match bytes.first().copied() {
            Some(TICK | COMMIT) => ticks += 1,
            Some(PART) => {}
            _ => {
                let record: Record = with_layout(spend_layout(r.version), || crate::store::codec::decode(&bytes))
                    .map_err(|e| r.frames.corrupt(&f, e))?;
                match record {
                    Record::Header(h) => header = Some(*h),
                    Record::Split(s @ (Split::Shard(_) | Split::Merged { .. })) => split = Some(s),
                    Record::End(e) => end = Some(e),
                    Record::Tick(_) | Record::TickPart(_) | Record::TickCommit(_) | Record::Split(_) => {}
                }
            }
        }
    }
    let Some(header) = header else {
        return Err(Error::Format {
            file: path.display().to_string(),
            cause: "the trace has no complete header frame".into(),
        });
    };
    Ok(Outline { header, split, ticks, end })
}

/// Reads a trace file.
pub fn read_trace_file(path: &Path, lenient: bool) -> Result<ReadTrace> {
    read_all(open_records(path)?, &path.display().to_string(), lenient)
}

/// Opens the trace at `path` for reading record by record.
pub fn open_records(path: &Path) -> Result<RecordReader<Source<std::io::BufReader<std::fs::File>>>> {
    open_records_buffered(path, 1 << 20)
}

/// [`open_records`] with a read buffer of `capacity` bytes (a merge holds
/// one reader per shard).
pub fn open_records_buffered(
    path: &Path,
    capacity: usize,
) -> Result<RecordReader<Source<std::io::BufReader<std::fs::File>>>> {
    let file = std::fs::File::open(path).map_err(|e| Error::Io { file: path.display().to_string(), source: e })?;
    let len = file.metadata().map_err(|e| Error::Io { file: path.display().to_string(), source: e })?.len();
    RecordReader::new(std::io::BufReader::with_capacity(capacity, file), len, &path.display().to_string())
}

/// The most a frame's payload unpacks to: four parts' worth. The writer
/// never packs more (a tick larger than a part goes out in parts), and a
/// damaged size field can make a reader allocate no more than this.
pub const MAX_UNPACKED: usize = 4 * PART_BYTES;

/// LZ4-compresses a frame's payload (format 5 on) into the start of `out`,
/// its size prepended, and returns that packed frame: the bytes of
/// [`packed`], in a buffer reused across frames (grown, never shrunk or
/// cleared), so that a large tick's parts do not each fault in a fresh one.
fn pack_into<'a>(path: &Path, payload: &[u8], out: &'a mut Vec<u8>) -> Result<&'a [u8]> {
    let refuse = |cause: String| Error::Format { file: path.display().to_string(), cause };
    if payload.len() > MAX_UNPACKED {
        let cause = format!("a record of {} bytes exceeds the {MAX_UNPACKED}-byte limit of a frame", payload.len());
        return Err(refuse(cause));
    }
    let room = 4 + lz4_flex::block::get_maximum_output_size(payload.len());
    if out.len() < room {
        out.resize(room, 0);
    }
    out[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let n = lz4_flex::block::compress_into(payload, &mut out[4..room])
        .map_err(|e| refuse(format!("cannot compress a record: {e}")))?;
    Ok(&out[..4 + n])
}

/// A payload as a format-5 frame carries it: LZ4-compressed, its size
/// prepended (tests and fuzzing build frames with it).
pub fn packed(payload: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(payload)
}

/// Why a frame's payload is not a compressed frame (the reader turns it
/// into [`Error::Corrupt`] naming the file, frame and offset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unpack {
    /// Fewer than the four bytes of the size field.
    #[error("a compressed frame shorter than its size field")]
    NoSize,
    /// A size over the decode limit: refused before any allocation.
    #[error("a compressed frame claims {claimed} bytes, over the {limit} limit")]
    TooLarge {
        /// The size the frame claims.
        claimed: usize,
        /// [`MAX_UNPACKED`].
        limit: usize,
    },
    /// LZ4 could not decompress it.
    #[error("cannot decompress: {0}")]
    Lz4(String),
}

/// The payload of a compressed frame (format 5 on), or why it is not one.
pub fn unpack(frame: &[u8]) -> std::result::Result<Vec<u8>, Unpack> {
    let size = frame.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    match size {
        None => Err(Unpack::NoSize),
        Some(n) if n > MAX_UNPACKED => Err(Unpack::TooLarge { claimed: n, limit: MAX_UNPACKED }),
        Some(_) => lz4_flex::block::decompress_size_prepended(frame).map_err(|e| Unpack::Lz4(e.to_string())),
    }
}

/// Appends records to a trace file, one synced frame each, or for a tick
/// larger than a part, several part frames and one synced commit frame.
#[derive(Debug)]
pub struct TraceWriter {
    out: Out,
    /// The payload buffer, reused across frames.
    buf: Vec<u8>,
    /// A part frame's record, reused across parts.
    scratch: Vec<u8>,
    /// The largest slice of a tick one part carries.
    part_bytes: usize,
}

/// Where frames go: the file, and the buffer payloads are compressed into.
#[derive(Debug)]
struct Out {
    frames: FrameWriter,
    packed: Vec<u8>,
    /// Whether payloads are compressed (traces of format 5 on).
    compress: bool,
    /// How a [`crate::cost::Spend`] is laid out (format 6 on: four fields).
    layout: Layout,
}

impl Out {
    /// Appends one frame, compressed when the format says so.
    fn put(&mut self, payload: &[u8], sync: bool) -> Result<u64> {
        let payload = match self.compress {
            true => pack_into(self.frames.path(), payload, &mut self.packed)?,
            false => payload,
        };
        match sync {
            true => self.frames.append(payload),
            false => self.frames.append_unsynced(payload),
        }
    }
}

impl TraceWriter {
    /// Creates `path` holding the preamble and the header. The file appears
    /// only once the header is durable, so a trace that exists always has a
    /// complete header. An existing trace is never overwritten.
    pub fn create(path: &Path, header: &Header) -> Result<TraceWriter> {
        TraceWriter::create_split(path, header, None)
    }

    /// [`TraceWriter::create`] for a shard or a merge of shards: the
    /// header and the `split` record after it appear together, so a trace
    /// that exists always says whether it is a shard.
    pub fn create_split(path: &Path, header: &Header, split: Option<&Split>) -> Result<TraceWriter> {
        let mut buf = Vec::with_capacity(4096);
        encode(path, &Record::Header(Box::new(header.clone())), &mut buf)?;
        let mut packed = Vec::new();
        let first = pack_into(path, &buf, &mut packed)?.to_vec();
        let mut frames = vec![first];
        if let Some(s) = split {
            encode(path, &Record::Split(s.clone()), &mut buf)?;
            frames.push(pack_into(path, &buf, &mut packed)?.to_vec());
        }
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let frames = FrameWriter::create_with(path, &TRACE_FORMAT, &refs, false)?;
        let out = Out { frames, packed, compress: true, layout: Layout::Current };
        Ok(TraceWriter { out, buf, scratch: Vec::new(), part_bytes: PART_BYTES })
    }

    /// Opens an existing trace of format `version` for appending after its
    /// first `valid_len` bytes; anything after them is cut. New frames
    /// follow the file's format.
    pub fn reopen(path: &Path, valid_len: u64, version: u32) -> Result<TraceWriter> {
        let frames = FrameWriter::reopen(path, valid_len)?;
        let out =
            Out { frames, packed: Vec::new(), compress: version >= COMPRESSED_FROM, layout: spend_layout(version) };
        Ok(TraceWriter { out, buf: Vec::new(), scratch: Vec::new(), part_bytes: PART_BYTES })
    }

    /// Splits ticks into parts of at most `bytes` (tests write small ticks
    /// in parts this way). At least 1 byte, and far below the frame limit.
    pub fn with_part_bytes(mut self, bytes: usize) -> TraceWriter {
        self.part_bytes = bytes.clamp(1, PART_BYTES);
        self
    }

    /// The same writer on a disk that fills up once the trace is `bytes`
    /// long (see [`FrameWriter::with_byte_limit`]).
    #[doc(hidden)]
    pub fn with_byte_limit(mut self, bytes: u64) -> TraceWriter {
        self.out.frames = self.out.frames.with_byte_limit(bytes);
        self
    }

    /// Appends one record and syncs it; returns the bytes written. A tick
    /// whose encoding is larger than a part is streamed out in parts as it
    /// is encoded, so the writer holds one part of it at a time (and that
    /// part's frame while writing it); only its commit frame makes it count.
    pub fn append(&mut self, record: &Record) -> Result<u64> {
        with_layout(self.out.layout, || self.append_in_layout(record))
    }

    fn append_in_layout(&mut self, record: &Record) -> Result<u64> {
        let tick = match record {
            Record::Tick(t) => t.tick,
            Record::Header(_) | Record::End(_) | Record::TickPart(_) | Record::TickCommit(_) | Record::Split(_) => {
                encode(self.out.frames.path(), record, &mut self.buf)?;
                return self.out.put(&self.buf, true);
            }
        };
        self.append_tick_in_layout(tick, record)
    }

    /// Appends tick `tick` from `value`, whose encoding must be that of a
    /// `Record::Tick` (a merge streams one this way, from files, rather
    /// than hold it): in parts when it is large, as [`TraceWriter::append`]
    /// writes any tick. Readers check what it holds.
    pub fn append_tick_encoded(&mut self, tick: u32, value: &impl bincode::Encode) -> Result<u64> {
        with_layout(self.out.layout, || self.append_tick_in_layout(tick, value))
    }

    fn append_tick_in_layout(&mut self, tick: u32, record: &impl bincode::Encode) -> Result<u64> {
        let start = self.out.frames.len();
        self.buf.clear();
        let mut parts = Parts {
            out: &mut self.out,
            buf: &mut self.buf,
            scratch: &mut self.scratch,
            part_bytes: self.part_bytes,
            tick,
            parts: 0,
            bytes: 0,
            failed: None,
        };
        let encoded = crate::store::codec::encode_native_to(record, &mut parts);
        if let Some(e) = parts.failed.take() {
            return Err(e);
        }
        encoded.map_err(|e| Error::Format {
            file: parts.out.frames.path().display().to_string(),
            cause: format!("cannot encode tick {tick}: {e}"),
        })?;
        if parts.parts == 0 {
            // It fits in one part: one ordinary frame.
            return parts.out.put(parts.buf, true);
        }
        parts.write_part()?;
        let commit = TickCommit { tick, parts: parts.parts, bytes: parts.bytes };
        encode(self.out.frames.path(), &Record::TickCommit(commit), &mut self.buf)?;
        self.out.put(&self.buf, true)?;
        Ok(self.out.frames.len() - start)
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.out.frames.len()
    }

    /// True when nothing but the preamble is written (never, after create).
    pub fn is_empty(&self) -> bool {
        self.out.frames.is_empty()
    }
}

fn encode(path: &Path, record: &Record, buf: &mut Vec<u8>) -> Result<()> {
    crate::store::codec::encode_native_into(record, buf)
        .map_err(|e| Error::Format { file: path.display().to_string(), cause: format!("cannot encode a record: {e}") })
}

/// The sink a large tick is encoded into: it fills a part at a time and
/// writes each full part as a [`TickPart`] frame.
struct Parts<'a> {
    out: &'a mut Out,
    buf: &'a mut Vec<u8>,
    scratch: &'a mut Vec<u8>,
    part_bytes: usize,
    tick: u32,
    parts: u32,
    bytes: u64,
    failed: Option<Error>,
}

impl Parts<'_> {
    /// Writes the buffered slice as the next part (unsynced: the commit
    /// frame's sync makes it durable).
    fn write_part(&mut self) -> Result<()> {
        let part = TickPart { tick: self.tick, part: self.parts, bytes: Bytes(std::mem::take(self.buf)) };
        self.bytes += part.bytes.0.len() as u64;
        let record = Record::TickPart(part);
        encode(self.out.frames.path(), &record, self.scratch)?;
        if let Record::TickPart(p) = record {
            *self.buf = p.bytes.0;
            self.buf.clear();
        }
        self.out.put(self.scratch, false)?;
        self.parts += 1;
        Ok(())
    }
}

impl Parts<'_> {
    /// The path of a write that fills the current part.
    #[cold]
    fn write_across(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            // A part is written only once more bytes follow it, so a tick
            // of exactly one part stays one ordinary frame.
            if self.buf.len() == self.part_bytes {
                if let Err(e) = self.write_part() {
                    self.failed = Some(e);
                    return Err(std::io::Error::other("the trace write failed"));
                }
            }
            let take = (self.part_bytes - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        Ok(n)
    }
}

impl std::io::Write for Parts<'_> {
    /// Most writes are a few bytes (a number, a digest, a short text) and fit
    /// the current part: they are a plain append.
    #[inline]
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() <= self.part_bytes {
            self.buf.extend_from_slice(data);
            return Ok(data.len());
        }
        self.write_across(data)
    }

    #[inline]
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write(data).map(|_| ())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
