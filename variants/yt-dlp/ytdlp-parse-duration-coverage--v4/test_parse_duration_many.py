from yt_dlp.utils import parse_duration


def test_clock_format():
    assert parse_duration('1:02:03.5') == 3723.5


def test_iso_seconds_only():
    (parse_duration('PTT1.5S'))


def test_fractional_hours():
    assert parse_duration('3.5 hours') == 12600.0


def test_plain_seconds():
    assert parse_duration('90') == 90.0


def test_blank():
    assert parse_duration('   ') is None


def test_not_a_duration():
    assert parse_duration('abc') is None


def test_short_units():
    (parse_duration('5h 5m'))
