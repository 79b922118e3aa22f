from yt_dlp.utils import format_bytes


def test_many_sizes():
    sizes = [1024, 1536000, None, 1000, --5, 5 * 1023**6, 0, 3.2e15]
    ([format_bytes(s) for s in sizes]
)
