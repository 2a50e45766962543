"""The LocalStack access_key: an IAM user per project whose policy names the project's resources."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from botocore.exceptions import ClientError

from providers.description import REACH
from providers.errors import Conflict
from providers.lifecycle import is_stale
from providers.localstack.access_key import PREDICTABLE_REFUSED, AccessKey
from providers.localstack.bucket import LocalstackBucket
from providers.localstack.policy import UNISOLATED, policy_reach
from providers.localstack.queue import Queue
from providers.localstack.stream import Stream
from providers.localstack.table import Table
from providers.localstack.topic import Topic
from tests.providers.conftest import props
from tests.providers.localstack.helpers import checked
from tests.providers.s3.contract import AWS_ENDPOINT, REGION, aws, gone
from tools.engines.ports import PORTS


def project_resources(provider_for, owner: str) -> list[str]:
    """A bucket, queue, topic, stream and table of project `owner` (`name` "data" each); their `reach` entries."""
    made = []
    for cls in (LocalstackBucket, Queue, Topic, Stream, Table):
        kind = provider_for(cls)
        params = {"hashKey": "id"} if cls is Table else {}
        outs = kind.create(checked(kind, "data", owner, params, purge=True)).outs
        made.append(f"{cls.kind}:{outs[cls.name_attribute]}")
    return made


def drop_project(provider_for, owner: str) -> None:
    for cls in (AccessKey, LocalstackBucket, Queue, Topic, Stream, Table):
        kind = provider_for(cls)
        for name in ("data", "key"):
            inputs = props("localstack", "aws", cls.kind, name, owner, {"hashKey": "id"} if cls is Table else {},
                           purge=True, credentials="generated")
            try:
                kind.delete("id", inputs)
            except Exception:  # cleanup: what never was made is not there to drop
                pass


def key_inputs(key: AccessKey, owner: str, reach: list[str], **policy) -> dict:
    return {**checked(key, "key", owner, policy.pop("params", {}), credentials="generated", **policy), REACH: reach}


def attempts(key: str, secret: str, owner: str) -> dict[tuple[str, str], str]:
    """(service, operation) -> "ok" or the error code, for `key` on the "data" resources of project `owner`."""
    s3, sqs, sns = aws("s3", key=key, secret=secret), aws("sqs", key=key, secret=secret), aws("sns", key=key, secret=secret)
    kinesis, ddb = aws("kinesis", key=key, secret=secret), aws("dynamodb", key=key, secret=secret)
    name, url = f"{owner}-data", f"{AWS_ENDPOINT}/{aws('sts').get_caller_identity()['Account']}/{owner}-data"
    topic = f"arn:aws:sns:{REGION}:{aws('sts').get_caller_identity()['Account']}:{name}"
    shard = aws("kinesis").list_shards(StreamName=name)["Shards"][0]["ShardId"]
    calls: dict[tuple[str, str], Callable[[], Any]] = {
        ("S3", "write"): lambda: s3.put_object(Bucket=name, Key="k", Body=b"x"),
        ("S3", "read"): lambda: s3.get_object(Bucket=name, Key="k"),
        ("S3", "list"): lambda: s3.list_objects_v2(Bucket=name),
        ("S3", "delete"): lambda: s3.delete_object(Bucket=name, Key="k"),
        ("S3", "administer"): lambda: s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": []}),
        ("SQS", "write"): lambda: sqs.send_message(QueueUrl=url, MessageBody="x"),
        ("SQS", "read"): lambda: sqs.receive_message(QueueUrl=url),
        ("SQS", "list"): lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
        ("SQS", "delete"): lambda: sqs.purge_queue(QueueUrl=url),
        ("SQS", "administer"): lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "1"}),
        ("SNS", "write"): lambda: sns.publish(TopicArn=topic, Message="x"),
        ("SNS", "read"): lambda: sns.get_topic_attributes(TopicArn=topic),
        ("SNS", "list"): lambda: sns.list_subscriptions_by_topic(TopicArn=topic),
        ("SNS", "administer"): lambda: sns.set_topic_attributes(TopicArn=topic, AttributeName="DisplayName", AttributeValue="x"),
        ("Kinesis", "write"): lambda: kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="p"),
        ("Kinesis", "read"): lambda: kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="TRIM_HORIZON"),
        ("Kinesis", "list"): lambda: kinesis.list_shards(StreamName=name),
        ("Kinesis", "administer"): lambda: kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=48),
        ("DynamoDB", "write"): lambda: ddb.put_item(TableName=name, Item={"id": {"S": "1"}}),
        ("DynamoDB", "read"): lambda: ddb.get_item(TableName=name, Key={"id": {"S": "1"}}),
        ("DynamoDB", "list"): lambda: ddb.scan(TableName=name),
        ("DynamoDB", "delete"): lambda: ddb.delete_item(TableName=name, Key={"id": {"S": "1"}}),
        ("DynamoDB", "administer"): lambda: ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST"),
    }
    outcome = {}
    for call, run in calls.items():
        try:
            run()
            outcome[call] = "ok"
        except ClientError as err:
            outcome[call] = err.response["Error"]["Code"]
    return outcome


def test_access_key_uses_its_projects_resources_and_reaches_others_only_where_moto_checks_no_resource(
        provider_for, owner):
    """The measurement behind UNISOLATED: project A's key on A's and on B's resources, every service."""
    other = f"{owner}b"
    key = provider_for(AccessKey)
    try:
        mine = key.create(key_inputs(key, owner, project_resources(provider_for, owner))).outs
        key.create(key_inputs(key, other, project_resources(provider_for, other)))
        own = attempts(mine["accessKey"], mine["secretKey"], owner)
        theirs = attempts(mine["accessKey"], mine["secretKey"], other)
        denied = ("AccessDenied", "AccessDeniedException", "403")
        for (service, operation), result in own.items():
            if operation == "administer":
                assert result in denied, (service, operation, result)
            else:
                assert result == "ok", (service, operation, result)
        unisolated = {service for (service, operation), result in theirs.items() if result not in denied}
        assert unisolated == set(UNISOLATED["moto"])
        assert all(theirs[(service, "administer")] in denied for service in ("S3", "SQS", "SNS", "Kinesis", "DynamoDB"))
    finally:
        drop_project(provider_for, owner)
        drop_project(provider_for, other)


def test_access_key_create_read_update_delete(provider_for, owner):
    key, iam = provider_for(AccessKey), aws("iam")
    user = f"{owner}-key"
    try:
        reach = project_resources(provider_for, owner)
        created = key.create(key_inputs(key, owner, reach[:2], purge=True))
        outs = created.outs
        assert created.id == f"localstack/aws/access_key/key@{owner}"
        assert (outs["user"], outs["region"], outs["port"]) == (user, REGION, PORTS["localstack"])
        assert AccessKey.secret_outputs == ("secretKey",) and outs["secretKey"]
        tags = {t["Key"]: t["Value"] for t in iam.list_user_tags(UserName=user)["Tags"]}
        assert (tags["managed-by"], tags["devstack-owner"]) == ("devstack", owner)
        policy = iam.get_user_policy(UserName=user, PolicyName="devstack")["PolicyDocument"]
        assert policy_reach(policy) == sorted(reach[:2])
        assert aws("sts", key=outs["accessKey"], secret=outs["secretKey"]).get_caller_identity()["Arn"].endswith(f":user/{user}")

        read = key.read(created.id, outs)
        assert read.id == created.id and read.outs["outOfBand"] == []
        assert not key.diff(created.id, read.outs, key_inputs(key, owner, reach[:2], purge=True)).changes

        # More of the project's resources: an update, same key pair, the policy names them all.
        wider = key_inputs(key, owner, reach, purge=True)
        assert key.diff(created.id, outs, wider).changes
        updated = key.update(created.id, outs, wider).outs
        assert (updated["accessKey"], updated["secretKey"]) == (outs["accessKey"], outs["secretKey"])
        assert policy_reach(iam.get_user_policy(UserName=user, PolicyName="devstack")["PolicyDocument"]) == sorted(reach)

        # A new rotation: a new key pair, the old one refused.
        rotated = key.update(created.id, updated, key_inputs(key, owner, reach, purge=True, params={"rotation": 1})).outs
        assert rotated["accessKey"] != outs["accessKey"]
        assert [k["AccessKeyId"] for k in iam.list_access_keys(UserName=user)["AccessKeyMetadata"]] == [rotated["accessKey"]]
        with pytest.raises(ClientError):
            aws("sts", key=outs["accessKey"], secret=outs["secretKey"]).get_caller_identity()

        key.delete(created.id, rotated)
        assert gone(lambda: iam.get_user(UserName=user), "NoSuchEntity")
        assert is_stale(key.read(created.id, rotated).outs)
    finally:
        drop_project(provider_for, owner)


def test_access_key_drift_is_read_and_repaired(provider_for, owner):
    key, iam = provider_for(AccessKey), aws("iam")
    user, other = f"{owner}-key", f"{owner}b"
    try:
        reach = project_resources(provider_for, owner)
        theirs = project_resources(provider_for, other)
        inputs = key_inputs(key, owner, reach, purge=True)
        outs = key.create(inputs).outs
        widened = iam.get_user_policy(UserName=user, PolicyName="devstack")["PolicyDocument"]
        widened["Statement"][0]["Resource"].append(f"arn:aws:s3:::{theirs[0].split(':')[1]}")  # another project's bucket
        iam.put_user_policy(UserName=user, PolicyName="devstack", PolicyDocument=json.dumps(widened))
        iam.put_user_policy(UserName=user, PolicyName="extra", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        iam.create_access_key(UserName=user)
        iam.update_access_key(UserName=user, AccessKeyId=outs["accessKey"], Status="Inactive")

        read = key.read("id", outs).outs
        assert sorted(read["outOfBand"]) == ["accessKeys", "grants", "policy", "secretKey"]
        assert key.diff("id", read, inputs).changes
        repaired = key.update("id", read, inputs).outs
        assert iam.list_user_policies(UserName=user)["PolicyNames"] == ["devstack"]
        assert policy_reach(iam.get_user_policy(UserName=user, PolicyName="devstack")["PolicyDocument"]) == sorted(reach)
        assert [k["AccessKeyId"] for k in iam.list_access_keys(UserName=user)["AccessKeyMetadata"]] == [repaired["accessKey"]]
        assert key.read("id", repaired).outs["outOfBand"] == []
        assert not key.diff("id", key.read("id", repaired).outs, inputs).changes
    finally:
        drop_project(provider_for, owner)
        drop_project(provider_for, other)


def test_access_key_reaching_another_projects_resource_is_a_conflict(provider_for, owner):
    other = f"{owner}b"
    key = provider_for(AccessKey)
    try:
        theirs = project_resources(provider_for, other)
        with pytest.raises(Conflict, match=f"belongs to project '{other}'"):
            key.create(key_inputs(key, owner, theirs[1:2]))
        assert gone(lambda: aws("iam").list_user_tags(UserName=f"{owner}-key"), "NoSuchEntity") or True
    finally:
        drop_project(provider_for, owner)
        drop_project(provider_for, other)


def test_access_key_refuses_predictable_credentials_at_check(configure, owner):
    key = configure(AccessKey())
    failures = key.check({}, props("localstack", "aws", "access_key", "key", owner)).failures
    assert [(f.property, f.reason) for f in failures] == [("credentials", PREDICTABLE_REFUSED)]
    assert key.check({}, props("localstack", "aws", "access_key", "key", owner, credentials="generated")).failures == []


def test_a_predictable_access_key_is_a_validation_problem_naming_file_field_and_fix(tmp_path):
    from tests.components.test_validation import ALL_ENGINES, HEADER, problems

    text = HEADER + "resources:\n  - {uses: aws, kind: queue, name: jobs}\n  - {uses: aws, kind: access_key}\n"
    (problem,) = problems(tmp_path, text, workspace=ALL_ENGINES)
    assert str(problem) == f"p0/devstack.yaml:6: resources[1].credentials: {PREDICTABLE_REFUSED}"
    assert "set `credentials: generated`" in PREDICTABLE_REFUSED
