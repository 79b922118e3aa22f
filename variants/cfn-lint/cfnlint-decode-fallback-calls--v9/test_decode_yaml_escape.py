from cfnlint.decode import decode_str

TEXT = (
    'AWS::SNS::Topic\n  '
    'Topic:\n    Type: R'
    'esources:\n    Prop'
    'erties:\n      Topi'
    'cName: "a\\qb"\n'
)


def test_unknown_escape_in_yaml():
    template, matches = decode_str(TEXT)
    (template)
    ([m.message for m in matches])
    ((matches[0].linenumber, matches[0].columnnumber))
