//! Two JSON answers and order-insensitive patterns (one line each): `flux_score::compare`
//! never panics, and every answer matches itself under any patterns (unless a string of it
//! holds `|||`: in a gold answer that separates accepted alternatives, by design).
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let (Some(a), Some(b)) = (lines.next(), lines.next()) else {
        return;
    };
    let patterns: Vec<String> = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    let (Ok(a), Ok(b)) = (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) else {
        return;
    };
    let opts = flux_score::CompareOptions {
        order_insensitive: patterns,
    };
    let _ = flux_score::compare(&a, &b, &opts);
    if has_alternatives(&a) {
        return;
    }
    assert!(
        flux_score::compare::matches(&a, &a, &opts),
        "an answer does not match itself: {a}"
    );
});

/// Whether a string anywhere in `v` (keys too) holds `|||`.
fn has_alternatives(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("|||"),
        Value::Array(xs) => xs.iter().any(has_alternatives),
        Value::Object(m) => m
            .iter()
            .any(|(k, x)| k.contains("|||") || has_alternatives(x)),
        _ => false,
    }
}
