from cfnlint.helpers import is_types_compatible


def test_string_boolean_number_accept_string():
    (is_types_compatible(['string', 'object', 'boolean'], 'object'))
