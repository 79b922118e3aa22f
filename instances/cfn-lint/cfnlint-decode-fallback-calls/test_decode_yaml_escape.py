from cfnlint.decode import decode_str

TEXT = (
    "Resources:\n"
    "  Topic:\n"
    "    Type: AWS::SNS::Topic\n"
    "    Properties:\n"
    "      TopicName: \"a\\qb\"\n"
)


def test_unknown_escape_in_yaml():
    template, matches = decode_str(TEXT)
    assert template is None
    assert [m.message for m in matches] == ['found unknown escape character']
    assert (matches[0].linenumber, matches[0].columnnumber) == (5, 20)
