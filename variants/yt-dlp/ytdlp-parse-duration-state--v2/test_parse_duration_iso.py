from yt_dlp.utils import parse_duration


def test_iso8601_duration():
    (parse_duration('P6DT2H3M4.5S'))
