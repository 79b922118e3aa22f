"""Tests whose traced run tests/sweflux_log.rs compares between flux (`--format swe-flux-log`)
and the reference settrace tracer, under several settings of SWE-Flux's variables."""
import asyncio
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pkg import shapes  # noqa: E402


def test_exceptions_and_deleted_names():
    assert shapes.lookups(["a", "b", "c", "a"], {"a": 1, "c": 3}) == ([1, 3, 1], 1)
    try:
        shapes.reraiser(-2)
    except ValueError:
        pass
    assert shapes.reraiser(3) == 3
    try:
        shapes.depth(3)
    except LookupError:
        pass


def test_values_limits_and_methods():
    assert shapes.wide(700) > 0
    s = shapes.Shape("tri", 3)
    assert s.describe(1) == "base:1:tri"
    assert shapes.chain([1, 2, 3])[0] == 12


def test_generators_throw_close_and_context_managers():
    g = shapes.counter(5)
    assert next(g) == 0
    assert g.send(2) == 2
    g.close()
    log = []
    with shapes.guarded(log) as n:
        raise RuntimeError("inside %d" % n)
    with shapes.guarded(log):
        pass
    assert log[-1] == "exit"


def test_coroutines_and_other_threads():
    assert asyncio.run(shapes.root(2)) == 12
    t = threading.Thread(target=shapes.lookups, args=(["z"], {}))
    t.start()
    t.join()
