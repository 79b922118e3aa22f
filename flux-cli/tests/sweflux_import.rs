//! `flux import swe-flux` → `flux harvest` → `flux harvest --check` → `flux export`, the real
//! binary on a fixture in SWE-Flux's layout (`flux-interop/tests/fixtures/store`, written for
//! flux's tests): the test runs traced by flux in `flux/sympy:1.13.3-py3.11`, laid out where
//! their harness puts it; their-style `parser.py` reads flux's swe-flux-log in a container of
//! the same image; the answer must be the fixture's stored one (made by running the reference
//! settrace tracer and the parser in that image), and `--check` must say so under their rules.
//!
//! Needs root, eBPF, Docker and the image; else `skipping: …`.

use crate::common::{cannot_trace, tempdir};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const IMAGE: &str = "flux/sympy:1.13.3-py3.11";
const ID: &str = "factor_multiplicity_m5_exceptions";

fn skip(what: &str) -> bool {
    if let Some(why) = cannot_trace() {
        return flux_skip::skip(what, why);
    }
    let ok = Command::new("docker")
        .args(["image", "inspect", IMAGE])
        .output()
        .is_ok_and(|o| o.status.success());
    !ok && flux_skip::skip(
        what,
        &format!("Docker or image {IMAGE} is missing (cargo xtask images sympy)"),
    )
}

fn flux(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(args)
        .output()
        .expect("run flux")
}

fn ok(what: &str, o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn an_imported_instance_is_answered_by_their_parser_on_fluxs_log_and_checked_against_theirs() {
    if skip("swe-flux import and harvest") {
        return;
    }
    let work = tempdir();
    let store = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../flux-interop/tests/fixtures/store/out/sympy/run_1/instances")
        .join(ID);
    let out = work.join("instances");
    let (o, c) = (out.to_str().unwrap(), work.join("cache"));
    let c = c.to_str().unwrap();
    ok(
        "import",
        &flux(&[
            "import",
            "swe-flux",
            store.to_str().unwrap(),
            "--repository",
            "sympy",
            "--image",
            IMAGE,
            "--out",
            o,
        ]),
    );
    let dir = out.join("sympy").join(ID);
    let d = dir.to_str().unwrap();
    let check = flux(&["harvest", "--check", "--cache", c, d]);
    ok("harvest --check against their stored answer alone", &check);
    ok("harvest", &flux(&["harvest", "--cache", c, d]));
    let oracle = json(&dir.join("oracle.json"));
    let theirs = json(&dir.join("swe-flux/oracle.json"));
    assert_eq!(
        oracle["oracle_answer"], theirs["oracle_answer"],
        "their answer from flux's run"
    );
    let p = &oracle["provenance"];
    assert_eq!(p["extractor"], "swe-flux-parser");
    assert!(
        p["labels"].to_string().contains("external parser"),
        "labelled as an external parser: {p}"
    );
    ok(
        "harvest --check",
        &flux(&["harvest", "--check", "--cache", c, d]),
    );
    // Exported as it came: their parser and eval.sh, flux's harvested answer.
    let exported = work.join("export");
    ok(
        "export",
        &flux(&[
            "export",
            "--format",
            "swe-flux",
            "--instances",
            o,
            exported.to_str().unwrap(),
        ]),
    );
    let e = exported.join("sympy_qa").join(ID);
    assert_eq!(
        std::fs::read(e.join("eval.sh")).unwrap(),
        std::fs::read(store.join("eval.sh")).unwrap()
    );
    assert!(e.join("files/parser.py").is_file() && e.join("files/testcase.py").is_file());
    assert_eq!(
        json(&e.join("oracle.json"))["oracle_answer"],
        theirs["oracle_answer"]
    );
    let _ = std::fs::remove_dir_all(&work);
}
