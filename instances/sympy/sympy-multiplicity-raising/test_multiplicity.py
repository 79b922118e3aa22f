import pytest
from sympy import Rational, factorial
from sympy.ntheory.factor_ import multiplicity


def test_integers():
    assert multiplicity(2, 24) == 3


def test_rational_argument():
    assert multiplicity(3, Rational(1, 9)) == -2


def test_unevaluated_factorial():
    assert multiplicity(5, factorial(25, evaluate=False)) == 6


def test_zero_argument():
    with pytest.raises(ValueError):
        multiplicity(2, 0)


def test_float_base():
    with pytest.raises(ValueError):
        multiplicity(2.5, 5)
