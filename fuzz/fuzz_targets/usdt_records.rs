//! Ring-buffer records: any bytes are a record, a string definition, or counted as malformed.
#![no_main]
use flux_merge::usdt::{decode_record, usdt_events, Drained};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Drained::default();
    for chunk in data.chunks(64).chain(std::iter::once(data)) {
        decode_record(chunk, &mut d);
    }
    let _ = usdt_events(&d);
});
