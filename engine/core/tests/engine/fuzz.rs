//! Property-based fuzzing on stable (proptest): the trace decoder, the
//! frame reader, and the scenario and config parsers take any input and
//! answer with a value or a typed error, never a panic. The inputs are
//! arbitrary bytes, checksummed frames of arbitrary bytes (the
//! decompressor), checksummed and compressed frames of arbitrary payloads
//! and of edited encodings of real records (the decoder behind both), and
//! edited scenario and config files.
//!
//! Each property runs 1,000 cases; `PROPTEST_CASES=100000 cargo test -p
//! engine --test engine fuzz` runs longer. The libFuzzer targets in
//! `engine/core/fuzz` need a nightly toolchain.

use crate::trace::{header, tick};
use engine::config::RawConfig;
use engine::persona::Traits;
use engine::scenario::{Scenario, BUILTIN};
use engine::store::frame::push_frame;
use engine::store::trace::file::read_trace;
use engine::store::trace::{Record, TRACE_FORMAT};
use proptest::prelude::*;
use proptest::sample::Index;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Reads `data` strictly and leniently; a strict read that succeeds must
/// agree with the lenient one.
fn read_both(data: &[u8]) {
    let strict = read_trace(data, data.len() as u64, "fuzz", false);
    let lenient = read_trace(data, data.len() as u64, "fuzz", true);
    if let (Ok(s), Ok(l)) = (&strict, &lenient) {
        assert_eq!(s.ticks, l.ticks);
    }
    if let Err(e) = strict {
        assert!(e.to_string().contains("fuzz"), "an error names the file: {e}");
    }
}

/// A trace file: the preamble, then one frame per payload, each packed as
/// the format packs it (compressed), so that edits reach the decoder.
fn file_of(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut data = TRACE_FORMAT.preamble().to_vec();
    for p in payloads {
        push_frame(&mut data, &engine::store::trace::file::packed(p)).expect("a small frame");
    }
    data
}

fn encoded(record: &Record) -> Vec<u8> {
    engine::store::codec::encode(record).expect("encodes")
}

/// Byte edits: (where, new byte), and where to cut, if anywhere.
fn edits() -> impl Strategy<Value = (Vec<(Index, u8)>, Option<Index>)> {
    (prop::collection::vec((any::<Index>(), any::<u8>()), 0..8), any::<Option<Index>>())
}

fn apply(mut bytes: Vec<u8>, (edits, cut): &(Vec<(Index, u8)>, Option<Index>)) -> Vec<u8> {
    if bytes.is_empty() {
        return bytes;
    }
    for (at, b) in edits {
        let i = at.index(bytes.len());
        bytes[i] = *b;
    }
    if let Some(c) = cut {
        bytes.truncate(c.index(bytes.len() + 1));
    }
    bytes
}

/// Text edits: (where, text inserted or replacing up to the line's end).
fn text_edits() -> impl Strategy<Value = Vec<(Index, bool, String)>> {
    prop::collection::vec((any::<Index>(), any::<bool>(), "[a-z0-9_=\\[\\]{}\"'.,: \\n#-]{0,16}"), 1..6)
}

fn apply_text(text: &str, edits: &[(Index, bool, String)]) -> String {
    let mut t = text.to_string();
    for (at, replace, s) in edits {
        let mut i = at.index(t.len() + 1);
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        let end = if *replace { t[i..].find('\n').map_or(t.len(), |n| i + n) } else { i };
        t.replace_range(i..end, s);
    }
    t
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_read_as_a_trace_or_a_typed_error(bytes in prop::collection::vec(any::<u8>(), 0..2048), preamble: bool) {
        let data = if preamble { [TRACE_FORMAT.preamble().to_vec(), bytes].concat() } else { bytes };
        read_both(&data);
    }

    #[test]
    fn checksummed_frames_of_any_bytes_unpack_or_fail_typed(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..512), 0..5),
    ) {
        let mut data = TRACE_FORMAT.preamble().to_vec();
        push_frame(&mut data, &engine::store::trace::file::packed(&encoded(&Record::Header(Box::new(header()))))).expect("frame");
        for p in &payloads {
            push_frame(&mut data, p).expect("a small frame");
        }
        read_both(&data);
    }

    #[test]
    fn checksummed_frames_of_any_payload_decode_or_fail_typed(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..512), 0..5),
    ) {
        let mut frames = vec![encoded(&Record::Header(Box::new(header())))];
        frames.extend(payloads);
        read_both(&file_of(&frames));
    }

    #[test]
    fn edited_records_behind_valid_checksums_decode_or_fail_typed(which in 0usize..4, e in edits()) {
        let h = encoded(&Record::Header(Box::new(header())));
        let t1 = encoded(&Record::Tick(Box::new(tick(1))));
        let mut frames = vec![h, t1, encoded(&Record::Tick(Box::new(tick(2))))];
        frames[which.min(2)] = apply(frames[which.min(2)].clone(), &e);
        read_both(&file_of(&frames));
    }

    #[test]
    fn edited_scenarios_parse_or_fail_typed(which in 0usize..BUILTIN.len(), e in text_edits()) {
        let text = apply_text(BUILTIN[which].1, &e);
        if let Ok(s) = Scenario::from_toml(&text, "fuzzed scenario") {
            let _ = s.check_run("fuzzed scenario", 3, &Traits::builtin().interests);
        }
    }

    #[test]
    fn edited_configs_parse_or_fail_typed(e in text_edits()) {
        let text = apply_text(&toml::to_string(&RawConfig::default()).expect("serialises"), &e);
        if let Ok(raw) = RawConfig::from_toml(&text, "fuzzed config") {
            let _ = raw.resolve("fuzzed config");
        }
    }

    #[test]
    fn any_text_is_a_scenario_a_config_or_an_error(text in "\\PC{0,400}") {
        let _ = Scenario::from_toml(&text, "fuzzed scenario");
        let _ = RawConfig::from_toml(&text, "fuzzed config").and_then(|r| r.resolve("fuzzed config"));
    }
}
