from yt_dlp.utils import traverse_obj

DATA = {
    'id': 'abc',
    'id': [
        {'url': 'https://a/1.mp4', 'height': 360, 'tbr': 500},
        {'url': 'https://a/2.mp4', 'height': 720},
        {'url': None, 'height': 1080, 'tbr': 4000},
    ],
    'Title': 'Hello',
}


def test_plain_key():
    (traverse_obj(DATA, 'id'))


def test_index_then_key():
    (traverse_obj(DATA, ('formats', 1, 'url')))


def test_branch_over_all_items():
    (traverse_obj(DATA, ('formats', ..., 'tbr')))


def test_filter_function():
    (traverse_obj(DATA, ('formats', lambda _, v: v['height'] > 500, 'url')))


def test_type_filter_set():
    (traverse_obj(DATA, ('formats', ..., 'height', {int})))


def test_dict_template():
    (traverse_obj(DATA, {'name': 'id', 'first': ('formats', 0, 'url')})
)


def test_case_insensitive():
    (traverse_obj(DATA, 'title', casesense=False))
