//! The hook's wire protocol decoder and the merge over whatever it decoded: any bytes on the
//! socket give problems, never a panic.
#![no_main]
use flux_merge::{merge, plan, CallsMode, Capabilities, HookCapture, Stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut s = Stream::default();
    for line in text.lines() {
        s.feed(line);
    }
    let _ = s.problems();
    let hook = HookCapture {
        streams: vec![s],
        problems: Vec::new(),
    };
    let caps = Capabilities {
        entry: data.first().is_some_and(|b| b & 1 != 0),
        ret: true,
        line: false,
    };
    for mode in [CallsMode::Usdt, CallsMode::Hook] {
        let p = plan(caps, mode, flux_trace::Scope::Run).expect("returns usable");
        let _ = merge(None, &hook, "fuzz", &p);
    }
});
