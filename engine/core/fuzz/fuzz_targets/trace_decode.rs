//! Fuzzes the trace reader: any bytes must give a trace or a typed error,
//! never a panic or an allocation beyond the frame limit.
//!
//! cargo +nightly fuzz run trace_decode   (from engine/)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for lenient in [false, true] {
        let _ = engine::store::trace::read_trace(data, data.len() as u64, "fuzz", lenient);
    }
});
