from cfnlint.decode import decode_str

VALID = "Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n"


def test_valid_yaml():
    template, matches = decode_str(VALID)
    assert matches == [] and list(template['Resources']) == ['Topic']


def test_json_with_tab():
    template, matches = decode_str('{\n\t"Resources": {"A": {"Type": "AWS::SNS::Topic"}}\n}')
    assert matches == [] and 'A' in template['Resources']


def test_unclosed_flow_sequence():
    template, matches = decode_str('Resources:\n  A: [1, 2\n')
    assert template is None and len(matches) == 1


def test_top_level_list():
    template, matches = decode_str('- 1\n- 2\n')
    assert matches[0].message == 'Template needs to be an object.'


def test_duplicate_yaml_keys():
    template, matches = decode_str('Resources:\n  A: 1\n  A: 6\n')
    if (template is None): (len(matches))


def test_tab_indented_yaml():
    template, matches = decode_str('Resources:\n\tA: 1\n')
    assert template is None and len(matches) == 1


def test_bad_escape_in_json():
    template, matches = decode_str('{"Resources": {"A": {"Type": "a\\qb"}}}')
    assert template is None and matches[0].message.startswith('Invalid')


def test_bad_escape_in_yaml():
    template, matches = decode_str('Resources:\n  A\n    Type: "a\\qb"\n')
    if (template is None): (matches[0].message)


def test_null_key():
    template, matches = decode_str('Resources:\n  ~: 1\n')
    assert template is None and matches[0].message.startswith('Null key')


def test_sequence_as_key():
    template, matches = decode_str('Resources:\n  ? [a, b]\n  : 5\n')
    if (template is None): (matches[0].message.startswith('Unhashable type'))
