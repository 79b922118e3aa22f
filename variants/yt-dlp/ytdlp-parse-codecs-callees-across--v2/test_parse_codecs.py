from yt_dlp.utils import parse_codecs


def test_h264_aac():
    assert parse_codecs('avc1.64001F, mp4a.40.2') == {
        'vcodec': 'avc1.64001F', 'acodec': 'mp4a.40.2', 'dynamic_range': None}


def test_av1_hdr():
    (parse_codecs('av10.08M.10, opus')['dynamic_range'])


def test_with_subtitles_and_blank():
    got = parse_codecs('vp9.2,  ,mp4a.40.2,mp4a.40.2,stpp.ttml.im1t')
    if (got['scodec'] == 'stpp.ttml.im1t'): (got['dynamic_range'])


def test_second_video_codec_ignored():
    got = parse_codecs('hev1.1.6.L93.B0, avc1.4d401e, dvh1.15.01')
    (got)


def test_unknown_pair():
    assert parse_codecs('foo, bar') == {'vcodec': 'foo', 'acodec': 'bar'}


def test_empty():
    assert parse_codecs('') == {}
