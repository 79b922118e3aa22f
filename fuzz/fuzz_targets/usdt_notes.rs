//! USDT discovery: any ELF-ish bytes and any argument spec give a binary, a site list or an
//! error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = flux_agent::usdt::parse_binary(std::path::Path::new("fuzz"), data);
    if let Ok(s) = std::str::from_utf8(data) {
        for arg in s.split_whitespace().take(16) {
            let _ = flux_agent::usdt::parse_arg(arg);
        }
    }
});
