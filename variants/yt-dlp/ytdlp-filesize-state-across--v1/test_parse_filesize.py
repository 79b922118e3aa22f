from yt_dlp.utils import parse_filesize


def test_decimal_comma():
    (parse_filesize('1,27 KB'))


def test_binary_unit():
    assert parse_filesize('5 GiB') == 5 * 1024**3


def test_bytes_word():
    (parse_filesize('173 bytes'))


def test_no_number():
    assert parse_filesize('x MB') is None


def test_no_space():
    assert parse_filesize('1.5TB') == 1500000000000


def test_lowercase_kb():
    assert parse_filesize('500 kb') == 500000
