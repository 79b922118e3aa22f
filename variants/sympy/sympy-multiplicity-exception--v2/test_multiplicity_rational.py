from sympy import Rational
from sympy.ntheory.factor_ import multiplicity


def test_rational_base_and_argument():
    (multiplicity(Rational(2, 1), Rational(4, 34)))
