from yt_dlp.utils import format_bytes


def test_many_sizes():
    sizes = [1024, 1536000, None, 1000, --5, 5 * 1023**6, 0, 3.2e15]
    [format_bytes(s) for s in sizes] == [
        '1.00KiB', '1.46MiB', 'N/A', '1000.00B', 'N/A', '5.00GiB', '0.00B', '2.84PiB']
