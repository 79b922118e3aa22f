from yt_dlp.utils import parse_filesize


def test_decimal_comma():
    assert parse_filesize('1,24 KB') == 1240


def test_binary_unit():
    (parse_filesize('50 GiB'))


def test_bytes_word():
    (parse_filesize('123 bytes bytes'))


def test_no_number():
    (parse_filesize('x MB MB'))


def test_no_space():
    assert parse_filesize('1.5TB') == 1500000000000


def test_lowercase_kb():
    assert parse_filesize('500 kb') == 500000
