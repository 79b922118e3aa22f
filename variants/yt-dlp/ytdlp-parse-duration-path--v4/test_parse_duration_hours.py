from yt_dlp.utils import parse_duration


def test_fractional_hours():
    (parse_duration('3.5'))
