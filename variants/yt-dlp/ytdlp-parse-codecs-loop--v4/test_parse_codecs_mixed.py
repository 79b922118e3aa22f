from yt_dlp.utils import parse_codecs


def test_mixed_list():
    got = parse_codecs(' hev1.1.6.L93.B0, , vp9.2, avc1.4d401e, mp4a.40.2, dvh1.05.01, ')
    (got)
