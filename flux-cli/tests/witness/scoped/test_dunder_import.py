# targets: load, load_module, own
# answer: raising_tests {"type": "ModuleNotFoundError", "raised_in": "load"} -> {"crashing_tests": [], "safe_tests": ["test_dunder_import.py::test_builtin_import", "test_dunder_import.py::test_import_module", "test_dunder_import.py::test_own_raise"]}
# answer: raising_tests {"type": "ModuleNotFoundError", "raised_in": "own"} -> {"crashing_tests": ["test_dunder_import.py::test_own_raise"], "safe_tests": ["test_dunder_import.py::test_builtin_import", "test_dunder_import.py::test_import_module"]}
# A missing module imported by a call of the builtin (`__import__(name)`, as packaging's
# _get_manylinux_module does) is raised in importlib's frames, which CPython removes from the
# traceback as it does for an `import` statement: the targeted caller only sees it propagate.
# `importlib.import_module` keeps its frames; `own` raises one itself.
import importlib

import pytest


def load(name):
    try:
        return __import__(name)
    except ModuleNotFoundError:
        return None


def load_module(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None


def own(name):
    raise ModuleNotFoundError(f"No module named {name!r}")


def test_builtin_import():
    assert load("no_such_module_flux_witness") is None
    assert load("json") is not None


def test_import_module():
    assert load_module("no_such_module_flux_witness") is None


def test_own_raise():
    with pytest.raises(ModuleNotFoundError):
        own("mine")
