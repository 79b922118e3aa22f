from cfnlint.decode.cfn_json import count_occurrences


def test_newlines_before_offset():
    indexes = list(range(5, 400, 9))
    assert count_occurrences(indexes, 250) == 28
