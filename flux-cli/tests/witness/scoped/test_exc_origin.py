# targets: convert, scope
# answer: raising_tests {"type": "ValueError", "raised_in": "convert"} -> {"crashing_tests": ["test_exc_origin.py::test_own_raise"], "safe_tests": ["test_exc_origin.py::test_callee_raises", "test_exc_origin.py::test_thrown_into_scope", "test_exc_origin.py::test_scope_raises"]}
# answer: raising_tests {"type": "KeyError", "raised_in": "scope"} -> {"crashing_tests": ["test_exc_origin.py::test_scope_raises"], "safe_tests": ["test_exc_origin.py::test_callee_raises", "test_exc_origin.py::test_own_raise", "test_exc_origin.py::test_thrown_into_scope"]}
# Where an exception was raised, whatever is traced (issue 23.2). `convert` (targeted) calls
# `fail` (untargeted), which raises: under scope "targets" (and 3.11's USDT returns, which do
# not say how a frame ended) nothing of `fail` is traced, and its exception reached `convert`
# looking like one `convert` raised. `scope`, a targeted @contextmanager generator, gets a
# `with` body's exception thrown in at its `yield`: not one it raised. It raises one of its own
# only when told to.
from contextlib import contextmanager

import pytest


def fail(msg):
    raise ValueError(msg)


def convert(v):
    if v < 0:
        fail("negative")
    if v == 0:
        raise ValueError("zero")
    return v


@contextmanager
def scope(log, bad=False):
    log.append("in")
    try:
        yield len(log)
    finally:
        log.append("out")
    if bad:
        raise KeyError("own")


def test_callee_raises():
    with pytest.raises(ValueError):
        convert(-1)
    assert convert(2) == 2


def test_own_raise():
    with pytest.raises(ValueError):
        convert(0)


def test_thrown_into_scope():
    log = []
    with pytest.raises(KeyError):
        with scope(log):
            raise KeyError("body")
    assert log == ["in", "out"]


def test_scope_raises():
    log = []
    with pytest.raises(KeyError):
        with scope(log, bad=True):
            pass
    assert log == ["in", "out"]
