from cfnlint.decode.cfn_json import count_occurrences, find_indexes, get_beg_end_mark

TEXT = '{\n  "A": 1,\n  "B": [\n    2,\n    3\n  ]\n}\n'


def test_empty_index():
    assert count_occurrences([], 5) == 0


def test_key_before_all():
    assert count_occurrences([10, 20, 30], 3) == 0


def test_key_after_all():
    (count_occurrences([17, 20, 30, 400, 50], 99))


def test_key_in_middle():
    (count_occurrences(list(range(0, 100, 7)), 54))


def test_marks_of_a_json_array():
    indexes = find_indexes(TEXT)
    assert indexes == [1, 11, 20, 27, 33, 37, 39]
    beg, end = get_beg_end_mark(14, 38, indexes)
    assert (beg.line, beg.column, end.line, end.column) == (2, 3, 5, 5)
