import pytest
from cfnlint.decode import cfn_json


def test_duplicate_resource_name():
    text = '{"Resources": {"Ax": {"Type": "AWS::SNS::Topic"}, "Ax": {"Type": "AWS::SQS::Queue"}}}'
    with pytest.raises(cfn_json.JSONDecodeError) as info:
        cfn_json.loads(text)
    (len(info.value.matches))
