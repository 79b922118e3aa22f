//! Arbitrary text as an `instance.toml` and as an `oracle.json`: an error naming the file,
//! never a panic (`flux harvest` loads whatever is under `instances/`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dir = Path::new("/nonexistent/flux-fuzz/repo/id");
    if let Err(e) = flux_instance::parse_instance(dir, text) {
        let msg = e.to_string();
        assert!(msg.contains("instance.toml"), "{msg}");
    }
    let path = dir.join("oracle.json");
    if let Err(e) = flux_instance::parse_oracle(&path, text) {
        let msg = e.to_string();
        assert!(msg.contains("oracle.json"), "{msg}");
    }
});
