//! `flux extractors`: the real binary prints every extractor of the registry, with its
//! parameters and shapes, as text and JSON; an unknown name is an error naming the known ones.
use serde_json::Value;
use std::process::Command;

fn flux(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .output()
        .expect("run flux")
}

#[test]
fn extractors_json_lists_the_registry() {
    let out = flux(&["extractors", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let registry: Vec<&str> = flux_extract::extractors().iter().map(|e| e.name).collect();
    assert_eq!(names, registry);
    let cov = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "coverage_across_tests")
        .unwrap();
    // Both of its shapes: per test, and with `line`, the covering tests.
    assert_eq!(cov["shapes"].as_array().unwrap().len(), 2);
    assert_eq!(cov["shapes"][1]["with"], "line");
    assert!(cov["shapes"][1]["shape"]["covering_tests"].is_array());
    let path = &v[0];
    assert_eq!(path["name"], "executed_path");
    let function = path["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "function")
        .unwrap();
    assert_eq!(function["required"], true);
    assert_eq!(function["type"], "a string");
}

#[test]
fn extractors_text_for_one_and_unknown_names() {
    let out = flux(&["extractors", "loop_stats"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("loop_stats  (S2_Loops, M2_Loops)\n"),
        "{text}"
    );
    assert!(
        text.contains("    header (a line number, required)"),
        "{text}"
    );
    assert!(
        text.contains(
            "  usual template: {\"min_iterations\": \"int\", \"max_iterations\": \"int\"}"
        ),
        "{text}"
    );
    assert!(text.contains("  iteration:\n"), "{text}");
    let out = flux(&["extractors", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown extractor `nope`; known extractors: executed_path"),
        "{err}"
    );
}
