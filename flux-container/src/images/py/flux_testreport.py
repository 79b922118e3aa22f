# flux: a pytest plugin (`-p flux_testreport`) that records what a repository's own test suite
# did, for `flux images test`. It appends one JSON object per line to $FLUX_TESTREPORT as the
# run goes (so a run killed at its deadline still says how far it got):
#   {"collected": NODEID}                      an item collected (and not deselected)
#   {"collect_error": NODEID, "message": STR}  a module (or other collector) failed to collect
#   {"test": NODEID, "outcome": OUTCOME}       a test ended: passed, failed, error, skipped,
#                                              xfailed or xpassed
#   {"finished": EXIT_STATUS}                  the session ended
import json
import os

_out = None
_phases = {}


def _write(obj):
    global _out
    if _out is None:
        _out = open(os.environ["FLUX_TESTREPORT"], "a", buffering=1)
    _out.write(json.dumps(obj) + "\n")


def pytest_collectreport(report):
    if report.failed:
        _write({"collect_error": report.nodeid, "message": str(report.longrepr)[-1500:]})


def pytest_collection_finish(session):
    # The items that will run: after every plugin's deselection (-m, -k, conftest hooks).
    for item in session.items:
        _write({"collected": item.nodeid})


def pytest_runtest_logreport(report):
    state = _phases.setdefault(report.nodeid, None)
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        state = "failed" if report.when == "call" else (state if state == "failed" else "error")
    elif report.skipped and state is None:
        state = "xfailed" if xfail else "skipped"
    elif report.passed and report.when == "call" and state is None:
        state = "xpassed" if xfail else "passed"
    _phases[report.nodeid] = state
    if report.when == "teardown":
        _write({"test": report.nodeid, "outcome": _phases.pop(report.nodeid) or "error"})


def pytest_sessionfinish(session, exitstatus):
    _write({"finished": int(exitstatus)})
