from cfnlint.decode import decode_str

# A tab before the first key: YAML refuses it, so cfn-lint retries the text as JSON,
# where the duplicate key "A" is reported.
TEXT = '{\n\t"Resources": {"A": {"Type": "AWS::SNS::Topic"}, "A": {"Type": "AWS::SQS::Queue"}}\n}'


def test_duplicate_key_found_by_json_fallback():
    template, matches = decode_str(TEXT)
    assert template is None
    assert len(matches) == 2
    assert all('Duplicate found' in m.message for m in matches)
