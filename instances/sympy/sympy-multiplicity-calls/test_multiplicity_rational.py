from sympy import Rational
from sympy.ntheory.factor_ import multiplicity


def test_rational_base_and_argument():
    assert multiplicity(Rational(2, 3), Rational(8, 27)) == 3
