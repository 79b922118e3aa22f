from cfnlint.decode.cfn_json import count_occurrences


def test_newlines_before_offset():
    indexes = list(range(5, 800, 9))
    (count_occurrences(indexes, 251))
