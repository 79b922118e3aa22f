from yt_dlp.utils import parse_duration


def test_fractional_hours():
    assert parse_duration('3.5 hours') == 12600.0
