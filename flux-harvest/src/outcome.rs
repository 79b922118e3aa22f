//! How the test ended, judged by pytest's own outcome rather than by "non-zero".
//!
//! `expect = "fail"` once took any non-zero exit for the expected failure: a usage error (4),
//! a collection error (2), no test collected (5) or the hook losing its agent (97) all
//! harvested gold answers from runs in which the question's test never failed. Now:
//! - `expect = "pass"`: exit 0;
//! - `expect = "fail"`: exit 1 — pytest's "tests were collected and run, some failed" — *and*
//!   the hook's test records (`te` with an outcome) show at least one test `failed` and none
//!   `error` (a fixture's setup or teardown failing is a broken run, not the failure asked
//!   about). An instance can only expect failure with `[tracing] tests` on (checked at load).
//!
//! Every other ending is an error that says what the exit code means.
use flux_instance::Expect;
use flux_trace::{Kind, Trace};

/// What an exit code of a pytest run (or of flux's wrappers around it) means.
pub(crate) fn exit_meaning(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "all tests passed",
        1 => "some tests failed",
        2 => "pytest was interrupted, e.g. by errors during collection",
        3 => "pytest's internal error",
        4 => "pytest's usage error",
        5 => "no tests were collected",
        flux_merge::protocol::HOOK_EXIT => "flux's hook lost its connection to the agent",
        125 => "the gate was never opened",
        126 | 127 => "the command could not be run",
        _ => return None,
    })
}

fn with_meaning(code: i32) -> String {
    match exit_meaning(code) {
        Some(m) => format!("{code} ({m})"),
        None => code.to_string(),
    }
}

/// Ok when the run ended as `expect` says; otherwise why not.
pub(crate) fn check_expected(expect: Expect, exit_code: i32, trace: &Trace) -> Result<(), String> {
    match expect {
        Expect::Pass if exit_code == 0 => Ok(()),
        Expect::Pass => Err(format!(
            "the test was expected to pass but exited with code {}",
            with_meaning(exit_code)
        )),
        Expect::Fail if exit_code != 1 => Err(format!(
            "the test was expected to fail (pytest's exit code 1, a test failed) but exited \
             with code {}",
            with_meaning(exit_code)
        )),
        Expect::Fail => {
            let ends = || trace.events.iter().filter(|e| e.ev == Kind::TestEnd);
            let failed: Vec<&str> = ends()
                .filter(|e| e.detail().outcome == "failed")
                .map(|e| e.test.as_str())
                .collect();
            let errored: Vec<&str> = ends()
                .filter(|e| e.detail().outcome == "error")
                .map(|e| e.test.as_str())
                .collect();
            if !errored.is_empty() {
                return Err(format!(
                    "the test was expected to fail, but {} errored in setup or teardown: {}",
                    errored.len(),
                    errored.join(", ")
                ));
            }
            if failed.is_empty() {
                return Err(format!(
                    "the test was expected to fail and exited with code 1, but pytest's records \
                     show no failed test ({} test(s) ran)",
                    ends().count()
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_trace::{Event, Source};

    fn trace(outcomes: &[&str]) -> Trace {
        let mut t = Trace::default();
        for (i, o) in outcomes.iter().enumerate() {
            let mut e = Event::new(i as u64, 1, 1, Kind::TestEnd, Source::Hook);
            e.test = format!("test_x.py::t{i}").into();
            e.detail_mut().outcome = ((*o).to_string()).into();
            t.events.push(e);
        }
        t
    }

    /// 17.10: `expect = "fail"` accepted any non-zero exit — a usage error, a collection error,
    /// no tests, the hook's 97 — as the expected failure.
    #[test]
    fn expect_fail_accepted_any_nonzero_exit_as_the_failure() {
        let failed = trace(&["passed", "failed"]);
        assert_eq!(check_expected(Expect::Fail, 1, &failed), Ok(()));
        for (code, says) in [
            (2, "errors during collection"),
            (4, "usage error"),
            (5, "no tests were collected"),
            (97, "hook lost its connection"),
            (137, "137"),
        ] {
            let e = check_expected(Expect::Fail, code, &failed).unwrap_err();
            assert!(e.contains(says), "{code}: {e}");
            assert!(e.starts_with("the test was expected to fail"), "{e}");
        }
        let e = check_expected(Expect::Fail, 1, &trace(&["passed"])).unwrap_err();
        assert!(e.contains("show no failed test (1 test(s) ran)"), "{e}");
        let e = check_expected(Expect::Fail, 1, &trace(&[])).unwrap_err();
        assert!(e.contains("no failed test (0 test(s) ran)"), "{e}");
        let e = check_expected(Expect::Fail, 1, &trace(&["failed", "error"])).unwrap_err();
        assert!(
            e.contains("1 errored in setup or teardown: test_x.py::t1"),
            "{e}"
        );
    }

    #[test]
    fn expect_pass_needs_exit_zero_and_says_what_another_code_means() {
        assert_eq!(check_expected(Expect::Pass, 0, &trace(&["passed"])), Ok(()));
        let e = check_expected(Expect::Pass, 97, &trace(&[])).unwrap_err();
        assert_eq!(
            e,
            "the test was expected to pass but exited with code 97 (flux's hook lost its \
             connection to the agent)"
        );
    }
}
