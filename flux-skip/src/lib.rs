//! How a test that needs root, eBPF, Docker, an image or an interpreter says it cannot run.
//!
//! Such tests skip with a loud `skipping: <what>: <why>` where the machine lacks the piece, so
//! `cargo test` works anywhere. But a skip is a pass, and on a machine that has everything a
//! skip hides a broken test (a renamed image, a wrong path): `cargo xtask test` once went green
//! there while tests skipped. So `cargo xtask test`, once its setup has proved root, eBPF,
//! Docker and the images work, sets [`REQUIRE_ALL`]`=1`, and under it [`skip`] panics instead:
//! every skip is then a failure naming what was missing.
//!
//! A skip that is no lack of the machine (an API key set in the environment, a back-end the
//! test is not about) is [`not_applicable`]: said the same way, never a failure. Every skip
//! message comes from here: the tidy test (`xtask/tests/tidy.rs`) refuses one printed anywhere
//! else, and the hook's Python suite reports its skips through its Rust wrapper.

/// The variable `cargo xtask test` sets after its setup proved the machine can run every test.
pub const REQUIRE_ALL: &str = "FLUX_REQUIRE_ALL";

/// Whether [`REQUIRE_ALL`] is set (to anything but empty or `0`).
pub fn required() -> bool {
    std::env::var(REQUIRE_ALL).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Say that `what` cannot run here because of `why` and return `true` (the caller returns);
/// under [`REQUIRE_ALL`] panic instead.
pub fn skip(what: &str, why: &str) -> bool {
    if required() {
        panic!(
            "{what}: {why} — but {REQUIRE_ALL}=1 says this machine can run every test \
             (`cargo xtask test` sets it after its setup proved root, eBPF, Docker and the \
             images work), so this is a failure, not a skip"
        );
    }
    eprintln!("skipping: {what}: {why}");
    true
}

/// Say that `what` does not apply here because of `why`, a reason that is no lack of the
/// machine, and return `true` (the caller returns). Never a failure, under [`REQUIRE_ALL`] too:
/// a machine with everything would skip it the same way.
pub fn not_applicable(what: &str, why: &str) -> bool {
    eprintln!("skipping: {what}: {why} (not applicable here, whatever the machine has)");
    true
}

#[cfg(test)]
mod tests {
    /// 15.5: a test skipped for lack of root, eBPF or Docker passed on a machine that has them.
    #[test]
    fn a_skip_is_a_failure_under_require_all() {
        // One test sets the variable: the others in this crate do not read it.
        std::env::remove_var(super::REQUIRE_ALL);
        assert!(super::skip("t", "no Docker"));
        std::env::set_var(super::REQUIRE_ALL, "0");
        assert!(super::skip("t", "no Docker"));
        std::env::set_var(super::REQUIRE_ALL, "1");
        let r = std::panic::catch_unwind(|| super::skip("t", "no Docker"));
        std::env::remove_var(super::REQUIRE_ALL);
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(
            msg.starts_with("t: no Docker — but FLUX_REQUIRE_ALL=1"),
            "{msg}"
        );
        // A skip that is no lack of the machine is never a failure.
        std::env::set_var(super::REQUIRE_ALL, "1");
        let r = std::panic::catch_unwind(|| super::not_applicable("t", "a key is set"));
        std::env::remove_var(super::REQUIRE_ALL);
        assert!(r.unwrap());
    }
}
