from cfnlint.helpers import is_types_compatible


def test_string_boolean_number_accept_string():
    assert is_types_compatible(['string', 'boolean', 'number'], 'object') is False
