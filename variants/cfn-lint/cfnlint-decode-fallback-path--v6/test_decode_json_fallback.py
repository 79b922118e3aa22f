from cfnlint.decode import decode_str

# `\q` is not a valid escape in YAML nor in JSON: PyYAML's scanner rejects it, cfn-lint
# retries the text as JSON, and the JSON error is reported.
TEXT = '{"Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName":: "a\\qb"}}}}'


def test_bad_escape_reported_by_json_fallback():
    template, matches = decode_str(TEXT)
    (template)
    (len(matches))
    matches[0].message.startswith('Invalid \\escape')
