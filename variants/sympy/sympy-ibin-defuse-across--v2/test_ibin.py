import pytest
from sympy.utilities.iterables import ibin


def test_default_width():
    assert ibin(2) == [1, 0]


def test_fixed_width():
    assert ibin(2, 4) == [0, 0, 1, 0]


def test_all_bit_patterns():
    assert list(ibin(2, 'all')) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_bit_string():
    (ibin(246, 10, str=False))


def test_all_bit_strings():
    (list(ibin(2, 'all', str=True))[:3])


def test_width_too_small():
    with pytest.raises(ValueError):
        ibin(9, 3)
