use engine::config::Config;
use engine::cost::Spend;
use engine::cost::{with_layout, Layout};
use engine::digest::DigestWriter;
use engine::embed::{EmbedCall, EmbedRole, Strategy};
use engine::error::Error;
use engine::memory::Change;
use engine::persona::MemoryId;
use engine::rng::{Purpose, Stream};
use engine::store::frame::PREAMBLE;
use engine::store::trace::file::read_trace;
use engine::store::trace::record::{Vectors, FORMAT_VERSION};
use engine::store::trace::{read_trace_file, EmbedExchange, Header, Record, RunEnd, TickFrame, TraceWriter};
use engine::turn::{Outcome, TickDigests};
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) fn header() -> Header {
    let cfg = Config::defaults();
    Header {
        format_version: FORMAT_VERSION,
        engine_version: "test".into(),
        config_toml: cfg.to_toml(),
        config_hash: cfg.hash(),
        seed: 7,
        personas: 2,
        ticks: 3,
        budget_nano_usd: None,
        strategy: Strategy::Batched,
        scenario_origin: "built-in:default".into(),
        scenario_source: "name = \"x\"".into(),
        scenario_hash: "00".into(),
        traits_source: String::new(),
        traits_hash: "00".into(),
    }
}

pub(crate) fn tick(t: u32) -> TickFrame {
    let mut o = Outcome::new(t, 0, 1, "ad".into(), 0);
    o.retrieved = vec![MemoryId { persona: 1, seq: 0 }];
    let d = DigestWriter::new("t").u32(t).finish();
    TickFrame {
        tick: t,
        stimuli: vec!["ad".into()],
        outcomes: vec![o],
        embeddings: vec![EmbedExchange {
            role: EmbedRole::Memory,
            request: d,
            texts: 1,
            result: Ok((
                Vectors(vec![Arc::from(vec![0.5f32; 8])]),
                vec![EmbedCall { texts: vec![0], attempts: 1, spend: Spend::default() }],
                0,
            )),
        }],
        memories: Vec::new(),
        persona_digests: vec![Some(d), None],
        digests: TickDigests { digest: d, full_digest: d },
        consolidation: vec![(
            1,
            vec![Change::Queued { record: engine::persona::MemoryId { persona: 1, seq: 0 }.into() }],
        )],
    }
}

/// Writes a finished three-tick trace; returns its path and the byte offset
/// of every frame, with the file length last.
fn sample(name: &str) -> (PathBuf, Vec<u64>) {
    sample_in_parts(name, engine::store::trace::file::PART_BYTES)
}

/// [`sample`], with ticks split into parts of at most `part_bytes`.
fn sample_in_parts(name: &str, part_bytes: usize) -> (PathBuf, Vec<u64>) {
    let dir = std::env::temp_dir().join(format!("engine-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("run.trace");
    let mut w = TraceWriter::create(&path, &header()).expect("create").with_part_bytes(part_bytes);
    let mut offsets = vec![PREAMBLE, w.len()];
    for t in 1..=3 {
        let at = w.len();
        w.append(&Record::Tick(Box::new(tick(t)))).expect("append");
        // Every frame of the tick: its parts and commit, or the one frame.
        let mut frames = engine::store::frame::open(&path, &engine::store::trace::TRACE_FORMAT).expect("open");
        while let Some(f) = frames.next_frame().expect("frames") {
            if f.offset > at {
                offsets.push(f.offset);
            }
        }
        offsets.push(w.len());
    }
    let d = tick(3).digests;
    w.append(&Record::End(RunEnd { ticks_completed: 3, stopped: None, digests: d })).expect("end");
    offsets.push(w.len());
    (path, offsets)
}

fn read(bytes: &[u8], lenient: bool) -> engine::Result<engine::store::trace::ReadTrace> {
    read_trace(bytes, bytes.len() as u64, "t.bin", lenient)
}

#[test]
fn round_trip() {
    let (path, _) = sample("round-trip");
    let t = read_trace_file(&path, false).expect("reads");
    assert_eq!(t.header, header());
    assert_eq!(t.ticks, vec![tick(1), tick(2), tick(3)]);
    assert_eq!(t.end.map(|e| e.ticks_completed), Some(3));
}

#[test]
fn every_single_bit_flip_is_a_typed_error_naming_its_frame() {
    let (path, offsets) = sample("flips");
    let clean = std::fs::read(&path).expect("read");
    for byte in 0..clean.len() {
        for bit in [0u8, 3, 7] {
            let mut b = clean.clone();
            b[byte] ^= 1 << bit;
            let err = match read(&b, false) {
                Err(e) => e,
                Ok(_) => panic!("flip of bit {bit} at byte {byte} went unnoticed"),
            };
            let frame = offsets.windows(2).position(|w| (w[0] as usize..w[1] as usize).contains(&byte));
            match (&err, frame) {
                (Error::Format { .. }, None) => {}
                // A flip in the preamble's version field can name an older
                // format, which gets the "recorded by an older engine" error.
                (Error::RecordedByOlder { .. }, None) if (8..12).contains(&byte) => {}
                // Or a readable older format, whose uncompressed reading
                // then fails on the header frame.
                (Error::Corrupt { frame: 0, .. }, None) if (8..12).contains(&byte) => {}
                (Error::Corrupt { frame: f, offset, .. } | Error::Torn { frame: f, offset, .. }, Some(i)) => {
                    assert_eq!((*f as usize, *offset), (i, offsets[i]), "byte {byte}: {err}");
                }
                (e, at) => panic!("byte {byte} (frame {at:?}): unexpected {e}"),
            }
        }
    }
}

#[test]
fn truncation_at_and_around_every_frame_boundary() {
    let (path, offsets) = sample("truncate");
    let clean = std::fs::read(&path).expect("read");
    for (i, &at) in offsets.iter().enumerate().skip(1) {
        let at = at as usize;
        // At a boundary: a shorter but valid trace (the header frame must be whole).
        let t = read(&clean[..at], false).expect("a frame boundary is a valid end");
        assert_eq!(t.ticks.len(), (i - 1).min(3));
        // One byte short: the frame before the boundary is torn.
        match read(&clean[..at - 1], false) {
            Err(Error::Torn { frame, offset, .. }) if i > 1 => {
                assert_eq!((frame, offset), (i as u64 - 1, offsets[i - 1]))
            }
            Err(Error::Torn { .. } | Error::Format { .. }) => {}
            other => panic!("cut at {} gave {other:?}", at - 1),
        }
        let lenient = read(&clean[..at - 1], true);
        if i > 1 {
            let t = lenient.expect("resume reads the prefix");
            assert_eq!(t.valid_len, offsets[i - 1]);
            assert!(t.tail.is_some());
        }
        // One byte into the next frame: that frame is torn.
        if at < clean.len() {
            match read(&clean[..at + 1], false) {
                Err(Error::Torn { frame, offset, .. }) => assert_eq!((frame, offset), (i as u64, at as u64)),
                other => panic!("cut at {} gave {other:?}", at + 1),
            }
        }
    }
}

#[test]
fn random_damage_never_panics() {
    // One frame per tick, and ticks in parts of 11 bytes.
    for (path, _) in [sample("damage"), sample_in_parts("damage-parts", 11)] {
        damage(&path);
    }
}

fn damage(path: &std::path::Path) {
    let clean = std::fs::read(path).expect("read");
    let full = read(&clean, false).expect("clean");
    let mut s = Stream::derive(2024, 0, 0, Purpose::Testing);
    for case in 0..3_000 {
        let mut b = clean.clone();
        match s.below(4) {
            0 => {
                for _ in 0..1 + s.below(8) {
                    let i = s.below(b.len());
                    b[i] = s.next_u64() as u8;
                }
            }
            1 => b.truncate(s.below(b.len())),
            2 => {
                let i = s.below(b.len());
                b.insert(i, s.next_u64() as u8);
            }
            _ => {
                let i = s.below(b.len() - 4);
                b[i..i + 4].copy_from_slice(&(s.next_u64() as u32).to_le_bytes());
            }
        }
        for lenient in [false, true] {
            if let Ok(t) = read(&b, lenient) {
                assert_eq!(t.header, full.header, "case {case}: seed 2024");
                assert!(full.ticks.starts_with(&t.ticks), "case {case}: a damaged trace read as different ticks");
            }
        }
    }
}

/// The encoded size of `tick(t)` as one record.
fn tick_bytes(t: u32) -> usize {
    engine::store::codec::encode(&Record::Tick(Box::new(tick(t)))).expect("encodes").len()
}

#[test]
fn a_tick_larger_than_a_part_is_written_in_parts_and_reads_back_whole() {
    let whole = tick_bytes(1);
    // A tick of exactly one part is one ordinary frame: header, 3 ticks, end.
    let (_, offsets) = sample_in_parts("one-part", whole);
    assert_eq!(offsets.len() - 1, 5);
    // One byte less: two parts and a commit per tick.
    let (_, offsets) = sample_in_parts("two-parts", whole - 1);
    assert_eq!(offsets.len() - 1, 2 + 3 * 3);
    // Tiny parts: many frames, none larger than a part and its framing, and
    // the same trace read back, strictly.
    let (path, offsets) = sample_in_parts("tiny-parts", 7);
    assert!(offsets.len() - 1 > 3 * whole / 7, "{} frames", offsets.len() - 1);
    // Between the header and the end frame: parts and commits only.
    let ticks = &offsets[1..offsets.len() - 1];
    assert!(ticks.windows(2).all(|w| w[1] - w[0] <= 8 + 7 + 16), "a part frame outgrew its part");
    let t = read_trace_file(&path, false).expect("reads");
    assert_eq!(t.header, header());
    assert_eq!(t.ticks, vec![tick(1), tick(2), tick(3)]);
    assert_eq!(t.end.map(|e| e.ticks_completed), Some(3));
}

/// A run stopped between two parts of a tick, or inside one, leaves the
/// parts without their commit: a lenient reader returns the committed ticks
/// and where appending continues, a strict one names the tick.
#[test]
fn parts_without_their_commit_are_a_tail_that_resume_cuts() {
    let (path, offsets) = sample_in_parts("uncommitted", 9);
    let clean = std::fs::read(&path).expect("read");
    // Where each tick's commit frame ends.
    let mut commits = Vec::new();
    let mut frames = engine::store::frame::open(&path, &engine::store::trace::TRACE_FORMAT).expect("open");
    while let Some(f) = frames.next_frame().expect("frames") {
        let payload = engine::store::trace::file::unpack(&f.payload).expect("a compressed frame");
        if let Ok(Record::TickCommit(_)) = engine::store::codec::decode::<Record>(&payload) {
            commits.push(frames.valid_len());
        }
    }
    assert_eq!(commits.len(), 3);
    for &at in &offsets[2..offsets.len() - 1] {
        for cut in [at, at + 3] {
            let committed = commits.iter().filter(|&&c| c <= cut).count();
            let t = read(&clean[..cut as usize], true).expect("lenient");
            assert_eq!(t.ticks.len(), committed, "cut at {cut}");
            let end = if committed == 0 { offsets[1] } else { commits[committed - 1] };
            assert_eq!(t.valid_len, end, "cut at {cut}");
            let at_commit = commits.contains(&cut);
            assert_eq!(t.tail.is_none(), at_commit, "cut at {cut}: {:?}", t.tail);
            if at_commit {
                assert!(read(&clean[..cut as usize], false).is_ok());
                continue;
            }
            let tail = t.tail.expect("a tail");
            assert_eq!(tail.offset, end);
            match (tail.uncommitted, read(&clean[..cut as usize], false)) {
                (Some((tick, parts)), Err(Error::Uncommitted { tick: t2, parts: p2, offset, .. })) => {
                    assert_eq!((tick, parts, offset), (t2, p2, end));
                    assert_eq!(tick as usize, committed + 1);
                    assert!(tail.describe().contains(&format!("tick {tick} is not committed")));
                }
                (None, Err(Error::Torn { offset, .. })) => assert_eq!(offset, end, "cut at {cut}"),
                (u, other) => panic!("cut at {cut}: {u:?} then {other:?}"),
            }
        }
    }
}

/// Formats 4 and 5 added part frames and compression, format 6 the cached
/// tokens of every spend: a format 3 trace (uncompressed, three-field
/// spends) and a format 5 one (compressed) read as they are, and a resume
/// appends to each in its own format.
#[test]
fn older_trace_formats_still_read_and_resume_in_their_format() {
    let dir = std::env::temp_dir().join(format!("sim-old-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for version in [3u32, 5] {
        let mut h = header();
        h.format_version = version;
        let mut bytes =
            engine::store::frame::Format { version, ..engine::store::trace::TRACE_FORMAT }.preamble().to_vec();
        with_layout(Layout::BeforeCached, || {
            for record in [Record::Header(Box::new(h.clone())), Record::Tick(Box::new(tick(1)))] {
                let payload = engine::store::codec::encode(&record).expect("encodes");
                let payload = match version >= 5 {
                    true => lz4_flex::block::compress_prepend_size(&payload),
                    false => payload,
                };
                engine::store::frame::push_frame(&mut bytes, &payload).expect("frame");
            }
        });
        let t = read(&bytes, false).unwrap_or_else(|e| panic!("format {version} reads: {e}"));
        assert_eq!((&t.header, &t.ticks), (&h, &vec![tick(1)]));
        let path = dir.join(format!("trace-{version}.bin"));
        std::fs::write(&path, &bytes).expect("write");
        let mut w = TraceWriter::reopen(&path, t.valid_len, h.format_version).expect("reopen");
        w.append(&Record::Tick(Box::new(tick(2)))).expect("append");
        let t = read_trace_file(&path, false).unwrap_or_else(|e| panic!("still format {version}: {e}"));
        assert_eq!(t.ticks, vec![tick(1), tick(2)]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
