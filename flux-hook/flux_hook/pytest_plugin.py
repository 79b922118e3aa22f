"""pytest plugin recording test boundaries; enable with PYTEST_PLUGINS=flux_hook.pytest_plugin.

Records ["ts", ts, tid, nodeid] when a test starts and ["te", ts, tid, nodeid, outcome] when its
setup/call/teardown are done; outcome is passed, failed, skipped or error (setup/teardown failed).
Does nothing when the hook is not installed or the config says tests=false.

With scope "tests", a wrapper around each test's `pytest_runtest_protocol` opens the hook's
window before pluggy runs the protocol (logstart, setup, call, teardown, logfinish) and closes
it after: the wrapper is a generator that pluggy's `_multicall` resumes from the same frame,
so every program activation that starts inside the window also ends inside it, and none that
started outside ends inside.
"""
from json.encoder import encode_basestring_ascii as _jstr  # C function: no traced frames

import pytest

from . import _core


def _protocol_window(item, nextitem):
    h = _hook()
    if h is None or not h.window:
        return (yield)
    h.window_open()
    try:
        return (yield)
    finally:
        h.window_close()


# A new-style wrapper (pluggy >= 1.1) is resumed by `_multicall` itself; pluggy >= 1.4 runs an
# old-style `hookwrapper` inside a generator of its own (`run_old_style_hookwrapper`), whose
# resumption would start inside the window and end after it.
# Only with test windows: the wrapper is a generator of the hook's, and 3.15's USDT entry probe
# fires at a generator's creation without a return, so with the probes on (scope "run") the
# agent's bracket of the hook's own frames would never close again (cargo xtask bench
# harvest's flux-auto-run: every 3.15 instance incomplete). Without windows nothing needs it.
if _core.HOOK is not None and _core.HOOK.window:
    try:
        pytest_runtest_protocol = pytest.hookimpl(wrapper=True)(_protocol_window)
    except TypeError:
        pytest_runtest_protocol = pytest.hookimpl(hookwrapper=True)(_protocol_window)

_outcomes = {}


def _hook():
    h = _core.HOOK
    if h is None or not h.cfg.tests:
        return None
    return h


def pytest_runtest_logstart(nodeid, location):
    h = _hook()
    if h is None:
        return
    _outcomes[nodeid] = "passed"
    h.check_tracing()
    h.emit('["ts",%d,%d,%s]' % (_core.CLOCK[0](), h.tid(), _jstr(_core.clean(nodeid))))


def pytest_runtest_logreport(report):
    if _hook() is None:
        return
    cur = _outcomes.get(report.nodeid, "passed")
    if report.when == "call":
        if report.failed:
            new = "failed"
        elif report.skipped:
            new = "skipped"
        else:
            new = "passed"
        if cur == "passed":
            cur = new
    else:  # setup / teardown
        if report.failed:
            cur = "error"
        elif report.skipped and cur == "passed":
            cur = "skipped"
    _outcomes[report.nodeid] = cur


def pytest_runtest_logfinish(nodeid, location):
    h = _hook()
    if h is None:
        return
    outcome = _outcomes.pop(nodeid, "passed")
    h.check_tracing()
    h.emit('["te",%d,%d,%s,"%s"]' % (_core.CLOCK[0](), h.tid(), _jstr(_core.clean(nodeid)), outcome))
