"""The access key's policy document, per emulator."""

from __future__ import annotations

from providers.localstack.policy import key_policy, policy_reach
from tests.providers.s3.contract import REGION


def test_access_key_policy_lists_exact_arns_and_the_unscoped_actions_only_on_moto():
    reach = ["bucket:shop-media", "queue:shop-jobs", "table:shop-sessions"]
    on_moto = key_policy(reach, REGION, "123456789012", "moto")
    on_localstack = key_policy(reach, REGION, "123456789012", "localstack")
    resources = {st["Sid"]: st["Resource"] for st in on_localstack["Statement"]}
    assert resources == {
        "DataBucket": ["arn:aws:s3:::shop-media", "arn:aws:s3:::shop-media/*"],
        "DataQueue": ["arn:aws:sqs:us-east-1:123456789012:shop-jobs"],
        "DataTable": ["arn:aws:dynamodb:us-east-1:123456789012:table/shop-sessions",
                      "arn:aws:dynamodb:us-east-1:123456789012:table/shop-sessions/index/*"],
    }
    unchecked = on_moto["Statement"][-1]
    assert (unchecked["Sid"], unchecked["Resource"]) == ("UncheckedResources", "*")
    assert "sqs:GetQueueUrl" in unchecked["Action"] and "dynamodb:PutItem" in unchecked["Action"]
    assert not any(a.startswith(("s3:", "sns:", "kinesis:")) for a in unchecked["Action"])
    assert policy_reach(on_moto) == sorted(reach)
    assert key_policy([], REGION, "123456789012", "moto") is None
