//! An answer template and an answer (first line, the rest): parsing and validating never
//! panic, and a template printed and parsed again is the same template.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (template, answer) = text.split_once('\n').unwrap_or((text, "null"));
    let Ok(t) = flux_instance::Template::parse(template) else {
        return;
    };
    // Printing and parsing again gives the same template.
    let again = flux_instance::Template::parse(&t.to_string())
        .unwrap_or_else(|e| panic!("{t} does not parse again: {e}"));
    assert_eq!(again, t);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(answer) {
        let _ = t.validate(&v);
    }
});
