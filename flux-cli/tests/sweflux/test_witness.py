"""Every program of ../witness/ run as one pytest test (runpy, in the test's thread): the
corpus `tests/sweflux_log.rs` traces with flux (`--format swe-flux-log`) and with the reference
settrace tracer (xtask/bench/reference_tracer.py), whose logs must be equal. `WITNESS_ONLY`
(comma-separated names) limits the corpus while debugging."""
import os
import runpy

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(HERE), "witness")
ONLY = [n.strip() for n in os.environ.get("WITNESS_ONLY", "").split(",") if n.strip()]
# Programs that install their own tracer: flux's trace of them is incomplete by design (the
# program's tracer replaces flux's; a loss flux reports), so their logs cannot be compared.
OWN_TRACERS = {"own_settrace"}


def gc_timed(f):
    """`# witness: gc-timing`: where its finalizers run moves with a tracer's own allocations,
    so two tracers' logs are not in the same order (the witness compares them as multisets)."""
    with open(os.path.join(CORPUS, f)) as fh:
        return any(line.strip() == "# witness: gc-timing" for line in fh)


def not_comparable(f):
    """`# witness: not-in-swe-flux-log: <why>`: the reference tracer (SWE-Flux's way) cannot
    log the program as it runs (e.g. its own read of f_locals keeps dropped values alive)."""
    with open(os.path.join(CORPUS, f)) as fh:
        return any(line.startswith("# witness: not-in-swe-flux-log:") for line in fh)


PROGRAMS = sorted(
    f[:-3]
    for f in os.listdir(CORPUS)
    if f.endswith(".py")
    and f[:-3] not in OWN_TRACERS
    and not gc_timed(f)
    and not not_comparable(f)
    and (not ONLY or f[:-3] in ONLY)
)


@pytest.mark.parametrize("name", PROGRAMS)
def test_program(name):
    try:
        runpy.run_path(os.path.join(CORPUS, name + ".py"), run_name="__witness__")
    except SystemExit:
        pass
