from yt_dlp.utils import parse_duration


def test_fractional_hours():
    (parse_duration('hours 3.5'))
