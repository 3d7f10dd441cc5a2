//! The one framed container of every binary file the project writes
//! (`trace.bin`, `field.events`, `field.patterns`, the embedding cache):
//! an 8-byte magic and a little-endian `u32` format version (the
//! preamble), then frames of `length u32 | crc32 u32 | payload`. A payload
//! is at most [`MAX_FRAME`] bytes; a length above it is corruption, so no
//! damaged file can make a reader allocate more. Payloads are encoded by
//! [`crate::store::codec`].
//!
//! Every damage is a typed error naming the file, the frame and its byte
//! offset: [`Error::Corrupt`] (a bad length, a checksum mismatch, a payload
//! that does not decode), [`Error::Torn`] (a final frame cut short, as a
//! kill during a write leaves it) and [`Error::Format`] (not this kind of
//! file, or another format version).
//!
//! ```
//! use engine::store::frame::{Format, FrameReader};
//! const DEMO: Format = Format { magic: *b"SIMDEMO1", version: 1, what: "demo file" };
//! let mut bytes = DEMO.preamble().to_vec();
//! engine::store::frame::push_frame(&mut bytes, b"hello").unwrap();
//! let mut r = FrameReader::new(&bytes[..], bytes.len() as u64, "demo.bin", &DEMO).unwrap();
//! assert_eq!(r.next_frame().unwrap().unwrap().payload, b"hello");
//! assert!(r.next_frame().unwrap().is_none());
//! ```

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest frame payload, in bytes; anything above this is corruption.
/// Traces write a large tick in parts far below it
/// ([`crate::store::trace::file::PART_BYTES`]).
pub const MAX_FRAME: u64 = 1 << 30;
/// Magic plus the little-endian format version.
pub const PREAMBLE: u64 = 12;
/// Length and checksum before each payload.
pub const FRAME_HEAD: u64 = 8;

/// One kind of file: its magic, the version this engine writes and reads,
/// and what to call it in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The first eight bytes.
    pub magic: [u8; 8],
    /// The format version this engine writes and reads.
    pub version: u32,
    /// A name for messages, e.g. "simulation trace".
    pub what: &'static str,
}

impl Format {
    /// The 12 bytes every file of this format starts with.
    pub fn preamble(&self) -> [u8; PREAMBLE as usize] {
        let mut p = [0u8; PREAMBLE as usize];
        p[..8].copy_from_slice(&self.magic);
        p[8..].copy_from_slice(&self.version.to_le_bytes());
        p
    }
}

/// One frame as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Index in the file, from 0.
    pub index: u64,
    /// Byte offset of the frame's head.
    pub offset: u64,
    /// The payload, checksum verified.
    pub payload: Vec<u8>,
}

/// Where a torn final frame starts and how much of it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// The file.
    pub file: String,
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
        Error::Torn {
            file: self.file.clone(),
            frame: self.frame,
            offset: self.offset,
            needed: self.needed,
            available: self.available,
        }
    }
}

/// What the next step of a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A complete, verified frame.
    Frame(Frame),
    /// The final frame is cut short; nothing follows it.
    Torn(Torn),
    /// The file ends cleanly after the last frame.
    End,
}

/// Reads frames in order from a source of known length.
#[derive(Debug)]
pub struct FrameReader<R> {
    r: R,
    file: String,
    len: u64,
    offset: u64,
    index: u64,
}

impl<R: Read> FrameReader<R> {
    /// Checks the preamble of a `len`-byte source against `format`. `file`
    /// names the source in errors.
    pub fn new(mut r: R, len: u64, file: &str, format: &Format) -> Result<FrameReader<R>> {
        let bad = |cause: String| Error::Format { file: file.to_string(), cause };
        if len < PREAMBLE {
            return Err(bad(format!("{len} bytes is too short for the preamble of a {}", format.what)));
        }
        let mut pre = [0u8; PREAMBLE as usize];
        r.read_exact(&mut pre).map_err(|e| Error::Io { file: file.to_string(), source: e })?;
        if pre[..8] != format.magic {
            return Err(bad(format!("not a {} (bad magic bytes)", format.what)));
        }
        let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
        if version != format.version {
            return Err(bad(format!(
                "{} format version {version} is not supported (this engine reads version {})",
                format.what, format.version
            )));
        }
        Ok(FrameReader { r, file: file.to_string(), len, offset: PREAMBLE, index: 0 })
    }

    /// The file name given at creation.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Bytes of complete frames (and the preamble) read so far: where
    /// appending would continue.
    pub fn valid_len(&self) -> u64 {
        self.offset
    }

    /// The error for a frame whose payload is wrong in a way only the
    /// caller can see (it does not decode, or breaks an ordering rule).
    pub fn corrupt(&self, frame: &Frame, cause: impl std::fmt::Display) -> Error {
        Error::Corrupt { file: self.file.clone(), frame: frame.index, offset: frame.offset, cause: cause.to_string() }
    }

    /// Reads the next frame, or says that the file ends or is torn.
    pub fn read_next(&mut self) -> Result<Next> {
        if self.offset >= self.len {
            return Ok(Next::End);
        }
        let (frame, offset) = (self.index, self.offset);
        let corrupt = |cause: String| Error::Corrupt { file: self.file.clone(), frame, offset, cause };
        let available = self.len - offset;
        let torn = |needed: u64| Next::Torn(Torn { file: self.file.clone(), frame, offset, needed, available });
        if available < FRAME_HEAD {
            return Ok(torn(FRAME_HEAD));
        }
        let mut head = [0u8; FRAME_HEAD as usize];
        self.r.read_exact(&mut head).map_err(|e| corrupt(format!("cannot read: {e}")))?;
        let size = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if size > MAX_FRAME {
            return Err(corrupt(format!("length {size} exceeds the {MAX_FRAME}-byte frame limit")));
        }
        if FRAME_HEAD + size > available {
            return Ok(torn(FRAME_HEAD + size));
        }
        let mut payload = vec![0u8; size as usize];
        self.r.read_exact(&mut payload).map_err(|e| corrupt(format!("cannot read: {e}")))?;
        if crc32fast::hash(&payload) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        self.offset += FRAME_HEAD + size;
        self.index += 1;
        Ok(Next::Frame(Frame { index: frame, offset, payload }))
    }

    /// The next frame, strictly: a torn frame is an error.
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        match self.read_next()? {
            Next::Frame(f) => Ok(Some(f)),
            Next::Torn(t) => Err(t.error()),
            Next::End => Ok(None),
        }
    }
}

/// Opens a file of `format` for reading.
pub fn open(path: &Path, format: &Format) -> Result<FrameReader<std::io::BufReader<File>>> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let len = file.metadata().map_err(|e| io(path, e))?.len();
    FrameReader::new(std::io::BufReader::with_capacity(1 << 20, file), len, &path.display().to_string(), format)
}

/// Reads every frame of a whole file, strictly, and decodes each payload
/// with `decode`; a payload that does not decode is [`Error::Corrupt`].
pub fn read_all<T, E: std::fmt::Display>(
    path: &Path,
    format: &Format,
    mut decode: impl FnMut(&Frame) -> std::result::Result<T, E>,
) -> Result<Vec<T>> {
    let mut r = open(path, format)?;
    let mut out = Vec::new();
    while let Some(f) = r.next_frame()? {
        out.push(decode(&f).map_err(|e| r.corrupt(&f, e))?);
    }
    Ok(out)
}

/// The version of the `format` file at `path` when it is one this engine
/// still reads (from `oldest` to the current one), so that its reader can
/// decode the older layout; otherwise the current version, so that opening
/// it reports the usual error. A missing or short file gives the current
/// version too.
pub fn readable_version(path: &Path, format: &Format, oldest: u32) -> u32 {
    let mut pre = [0u8; PREAMBLE as usize];
    let read = File::open(path).and_then(|mut f| f.read_exact(&mut pre));
    let version = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
    match read.is_ok() && pre[..8] == format.magic && (oldest..=format.version).contains(&version) {
        true => version,
        false => format.version,
    }
}

/// A payload too large for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
pub struct FrameTooLarge(pub usize);

/// The head of a frame holding `payload`; a payload over [`MAX_FRAME`] is
/// refused, so a writer never builds a frame its reader would reject.
pub fn frame_head(payload: &[u8]) -> std::result::Result<[u8; FRAME_HEAD as usize], FrameTooLarge> {
    if payload.len() as u64 > MAX_FRAME {
        return Err(FrameTooLarge(payload.len()));
    }
    let mut head = [0u8; FRAME_HEAD as usize];
    head[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    head[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    Ok(head)
}

/// Appends one frame holding `payload` to `out`.
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) -> std::result::Result<(), FrameTooLarge> {
    out.extend_from_slice(&frame_head(payload)?);
    out.extend_from_slice(payload);
    Ok(())
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io { file: path.display().to_string(), source: e }
}

/// Writes `bytes` to `path` atomically and durably: a temporary file beside
/// it, synced, renamed over it, and the directory synced. A reader sees the
/// old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            // A directory that cannot be synced (some file systems) still
            // holds the renamed file; the data itself is synced above.
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Writes a whole file of `format` holding `payloads`, atomically.
pub fn write_file<'a>(path: &Path, format: &Format, payloads: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
    let mut bytes = format.preamble().to_vec();
    for p in payloads {
        push_frame(&mut bytes, p)
            .map_err(|e| Error::Format { file: path.display().to_string(), cause: e.to_string() })?;
    }
    write_atomic(path, &bytes)
}

/// Appends frames to a file, syncing each one.
#[derive(Debug)]
pub struct FrameWriter {
    file: File,
    path: PathBuf,
    len: u64,
    /// A simulated full disk: writes past this file length fail (tests and
    /// `sim-cli soak`).
    limit: Option<u64>,
}

impl FrameWriter {
    /// Creates `path` with the preamble and `first` as its first frame. The
    /// file appears only once that frame is durable, so a file that exists
    /// always has a complete first frame. An existing file is replaced only
    /// when `replace` is set; otherwise it is an error.
    pub fn create(path: &Path, format: &Format, first: &[u8], replace: bool) -> Result<FrameWriter> {
        FrameWriter::create_with(path, format, &[first], replace)
    }

    /// [`FrameWriter::create`] with several first frames, all durable
    /// before the file appears: a file that exists has every one of them.
    pub fn create_with(path: &Path, format: &Format, first: &[&[u8]], replace: bool) -> Result<FrameWriter> {
        if !replace && path.exists() {
            return Err(Error::Io {
                file: path.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "the file exists; it is never overwritten",
                ),
            });
        }
        let mut bytes = format.preamble().to_vec();
        for frame in first {
            push_frame(&mut bytes, frame)
                .map_err(|e| Error::Format { file: path.display().to_string(), cause: e.to_string() })?;
        }
        write_atomic(path, &bytes)?;
        let file = OpenOptions::new().append(true).open(path).map_err(|e| io(path, e))?;
        Ok(FrameWriter { file, path: path.to_path_buf(), len: bytes.len() as u64, limit: None })
    }

    /// Opens an existing file for appending after its first `valid_len`
    /// bytes; anything after them is cut.
    pub fn reopen(path: &Path, valid_len: u64) -> Result<FrameWriter> {
        let file = OpenOptions::new().write(true).open(path).map_err(|e| io(path, e))?;
        file.set_len(valid_len).and_then(|_| file.sync_all()).map_err(|e| io(path, e))?;
        drop(file);
        let file = OpenOptions::new().append(true).open(path).map_err(|e| io(path, e))?;
        Ok(FrameWriter { file, path: path.to_path_buf(), len: valid_len, limit: None })
    }

    /// A writer appending to an open file (tests of write failures).
    #[doc(hidden)]
    pub fn on_file(file: File, path: &Path) -> FrameWriter {
        FrameWriter { file, path: path.to_path_buf(), len: PREAMBLE, limit: None }
    }

    /// The same writer on a disk that fills up once the file is `bytes`
    /// long: the write that would pass it writes what still fits and fails
    /// with the operating system's "no space left on device", as a full
    /// disk does. For tests of what a full disk leaves behind.
    #[doc(hidden)]
    pub fn with_byte_limit(mut self, bytes: u64) -> FrameWriter {
        self.limit = Some(bytes);
        self
    }

    /// Appends one frame and syncs it; returns the bytes written.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        let written = self.append_unsynced(payload)?;
        self.sync()?;
        Ok(written)
    }

    /// Appends one frame without syncing it: it is durable only after a
    /// later [`FrameWriter::sync`]. For frames that mean nothing until a
    /// closing frame follows them.
    pub fn append_unsynced(&mut self, payload: &[u8]) -> Result<u64> {
        let head = frame_head(payload)
            .map_err(|e| Error::Format { file: self.path.display().to_string(), cause: e.to_string() })?;
        let written = FRAME_HEAD + payload.len() as u64;
        if let Some(limit) = self.limit.filter(|&l| self.len + written > l) {
            let fits = limit.saturating_sub(self.len) as usize;
            let mut frame = head.to_vec();
            frame.extend_from_slice(payload);
            let _ = self.file.write_all(&frame[..fits.min(frame.len())]);
            self.len += fits as u64;
            const ENOSPC: i32 = 28;
            return Err(io(&self.path, std::io::Error::from_raw_os_error(ENOSPC)));
        }
        self.file.write_all(&head).and_then(|_| self.file.write_all(payload)).map_err(|e| io(&self.path, e))?;
        self.len += written;
        Ok(written)
    }

    /// Makes every frame appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(|e| io(&self.path, e))
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing but the preamble is written (never, after create).
    pub fn is_empty(&self) -> bool {
        self.len <= PREAMBLE
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Format = Format { magic: *b"SIMTEST1", version: 3, what: "test file" };

    fn file_of(frames: &[&[u8]]) -> Vec<u8> {
        let mut b = F.preamble().to_vec();
        for f in frames {
            push_frame(&mut b, f).expect("small frame");
        }
        b
    }

    fn read(bytes: &[u8]) -> Result<Vec<Next>> {
        let mut r = FrameReader::new(bytes, bytes.len() as u64, "t.bin", &F)?;
        let mut out = Vec::new();
        loop {
            let n = r.read_next()?;
            let stop = !matches!(n, Next::Frame(_));
            out.push(n);
            if stop {
                return Ok(out);
            }
        }
    }

    #[test]
    fn every_damage_names_the_file_frame_and_offset() {
        let good = file_of(&[b"one", b"two"]);
        assert_eq!(read(&good).expect("good").len(), 3);
        // A flipped payload byte of frame 1 (offset 12 + 8 + 3).
        let mut bad = good.clone();
        let at = bad.len() - 1;
        bad[at] ^= 1;
        match read(&bad) {
            Err(Error::Corrupt { file, frame: 1, offset: 23, cause }) => {
                assert_eq!(file, "t.bin");
                assert!(cause.contains("checksum"), "{cause}");
            }
            other => panic!("expected corruption of frame 1, got {other:?}"),
        }
        // A cut frame is torn, not corrupt.
        match read(&good[..good.len() - 1]).expect("torn reads").pop() {
            Some(Next::Torn(t)) => assert_eq!((t.frame, t.offset, t.needed, t.available), (1, 23, 11, 10)),
            other => panic!("expected a torn frame, got {other:?}"),
        }
        // A huge length is corruption, with no allocation.
        let mut huge = good.clone();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(read(&huge), Err(Error::Corrupt { frame: 0, offset: 12, .. })));
        // Another magic or version is a format error naming the file.
        let mut other = good.clone();
        other[8] = 9;
        let msg = read(&other).expect_err("version").to_string();
        assert!(msg.contains("t.bin") && msg.contains("version 9") && msg.contains("version 3"), "{msg}");
        other[0] = b'X';
        assert!(read(&other).expect_err("magic").to_string().contains("magic"));
    }

    #[test]
    fn writers_refuse_what_readers_would_refuse() {
        let big = vec![0u8; MAX_FRAME as usize + 1];
        assert_eq!(frame_head(&big), Err(FrameTooLarge(big.len())));
        assert!(frame_head(&big[..MAX_FRAME as usize]).is_ok());
    }

    #[test]
    fn files_round_trip_and_are_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("sim-frame-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f.bin");
        let _ = std::fs::remove_file(&path);
        let mut w = FrameWriter::create(&path, &F, b"first", false).expect("create");
        w.append(b"second").expect("append");
        assert!(FrameWriter::create(&path, &F, b"again", false).is_err());
        let all = read_all(&path, &F, |f| Ok::<_, String>(f.payload.clone())).expect("read");
        assert_eq!(all, vec![b"first".to_vec(), b"second".to_vec()]);
        write_file(&path, &F, [&b"only"[..]]).expect("rewrite");
        assert_eq!(read_all(&path, &F, |f| Ok::<_, String>(f.payload.len())).expect("read"), vec![4]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A disk that fills up mid-frame: the write fails with the system's
    /// "no space" error naming the file, what fitted is on disk, and a
    /// reader sees the frames before it and a torn one.
    #[test]
    fn a_full_disk_fails_the_write_and_leaves_a_torn_frame() {
        let dir = std::env::temp_dir().join(format!("sim-frame-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f.bin");
        let _ = std::fs::remove_file(&path);
        let limit = PREAMBLE + 2 * FRAME_HEAD + 5 + 10;
        let mut w = FrameWriter::create(&path, &F, b"first", false).expect("create").with_byte_limit(limit);
        let e = w.append(&[7u8; 64]).expect_err("the disk is full");
        assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
        assert!(e.to_string().contains("No space left on device"), "{e}");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.len() as u64, limit);
        let frames = read(&bytes).expect("reads");
        assert!(matches!(&frames[..], [Next::Frame(f), Next::Torn(_)] if f.payload == b"first"), "{frames:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
