# targets: drain, shut, poke, primed
# Generators started where nothing is traced and resumed where everything is (rule
# `unseen-starts`): one started at import (before every test window), one started by the test
# outside every extent of targeted code, as pluggy starts pytest's hook wrappers. Their first
# traced activation is a resumption, never a fresh call of the targeted code it runs under;
# under scope "targets" flux called it a fresh call (3.13, 3.14) until the hook marked every
# fresh start. `poke` throws into an unstarted generator: that *is* a fresh start (3.12+ fires
# PY_THROW for it, no PY_START; 3.11's call event stands at RETURN_GENERATOR), of targeted
# code so that every interpreter compares it.


def numbers(n):
    for i in range(n):
        yield i


def guarded(out):
    try:
        yield 1
        yield 2
    finally:
        out.append("closed")


STARTED = numbers(3)
next(STARTED)


def drain(it):
    total = 0
    for x in it:
        total += x
    return total


def shut(it):
    it.close()
    return "shut"


def primed():
    try:
        yield 1
    finally:
        pass


def poke():
    try:
        primed().throw(ValueError("early"))
    except ValueError as e:
        return str(e)
    return ""


def test_resumed_at_import():
    assert drain(STARTED) == 3


def test_resumed_in_extent():
    it = numbers(4)
    assert next(it) == 0
    assert drain(it) == 6


def test_closed_in_extent():
    out = []
    g = guarded(out)
    assert next(g) == 1
    assert shut(g) == "shut"
    assert out == ["closed"]


def test_thrown_before_start():
    assert poke() == "early"
