"""LocalStack (moto): project A's access key (AWS_* as `devstack env` gives them) against B's bucket, queue,
topic, stream and table, through boto3.

A's key is an IAM user whose policy names A's resources by ARN. moto
authorizes S3 and SQS calls against the resource, so B's bucket and queue
answer AccessDenied; it authorizes SNS, Kinesis and DynamoDB calls by action
alone, so the data calls A may make on its own topic, stream and table it
may also make on B's: those are the matrix's named gaps (docs/engines.md,
`devstack doctor` says so too). Administering any of them is refused
everywhere: the policy grants no management action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.isolation.conftest import Matrix, Op, Tenants, cases

ENGINE = "localstack"
#: Why the emulator lets A's data calls on B's topic, stream and table through.
BY_ACTION_ONLY = "moto authorizes SNS, Kinesis and DynamoDB by action, not resource"


def client(tenants: Tenants, service: str) -> Any:
    """A's service's client, as its AWS_* variables give it."""
    env = tenants.env(tenants.a, ENGINE)
    return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_REGION"],
                        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10))


def denied(err: BaseException) -> str | None:
    code = err.response.get("Error", {}).get("Code") if isinstance(err, ClientError) else None
    return code if code in ("AccessDenied", "AccessDeniedException", "AuthorizationError", "403") else None


def on(tenants: Tenants, project: str, var: str) -> str:
    return tenants.env(project, ENGINE)[var]


def s3(act: Callable[[Any, str], object]) -> Callable[[Tenants, str], None]:
    return lambda tenants, project: act(client(tenants, "s3"), on(tenants, project, "S3_BUCKET"))


def sqs(act: Callable[[Any, str], object]) -> Callable[[Tenants, str], None]:
    return lambda tenants, project: act(client(tenants, "sqs"), on(tenants, project, "SQS_QUEUE_URL"))


def sns(act: Callable[[Any, str], object]) -> Callable[[Tenants, str], None]:
    return lambda tenants, project: act(client(tenants, "sns"), on(tenants, project, "SNS_TOPIC_ARN"))


def kinesis(act: Callable[[Any, str], object]) -> Callable[[Tenants, str], None]:
    return lambda tenants, project: act(client(tenants, "kinesis"), on(tenants, project, "KINESIS_STREAM_NAME"))


def dynamodb(act: Callable[[Any, str], object]) -> Callable[[Tenants, str], None]:
    return lambda tenants, project: act(client(tenants, "dynamodb"), on(tenants, project, "DYNAMODB_TABLE_NAME"))


def put_then_get(c: Any, bucket: str) -> None:
    c.put_object(Bucket=bucket, Key="matrix.txt", Body=b"x")
    assert c.get_object(Bucket=bucket, Key="matrix.txt")["Body"].read() == b"x"


def shard_iterator(c: Any, stream: str) -> None:
    shard = c.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    c.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")


ENFORCED = [
    Op("S3 read: GetObject", s3(put_then_get)),
    Op("S3 write: PutObject", s3(lambda c, b: c.put_object(Bucket=b, Key="w.txt", Body=b"x"))),
    Op("S3 list: ListObjectsV2", s3(lambda c, b: c.list_objects_v2(Bucket=b))),
    Op("S3 delete: DeleteObject", s3(lambda c, b: c.delete_object(Bucket=b, Key="w.txt"))),
    Op("S3 administer: PutBucketVersioning", s3(lambda c, b: c.put_bucket_versioning(
        Bucket=b, VersioningConfiguration={"Status": "Enabled"})), own=False),
    Op("S3 administer: DeleteBucket", s3(lambda c, b: c.delete_bucket(Bucket=b)), own=False),
    Op("SQS write: SendMessage", sqs(lambda c, url: c.send_message(QueueUrl=url, MessageBody="x"))),
    Op("SQS read: ReceiveMessage", sqs(lambda c, url: c.receive_message(QueueUrl=url, WaitTimeSeconds=0))),
    Op("SQS list: GetQueueAttributes", sqs(lambda c, url: c.get_queue_attributes(QueueUrl=url))),
    Op("SQS delete: PurgeQueue", sqs(lambda c, url: c.purge_queue(QueueUrl=url))),
    Op("SQS administer: SetQueueAttributes", sqs(lambda c, url: c.set_queue_attributes(
        QueueUrl=url, Attributes={"VisibilityTimeout": "7"})), own=False),
    Op("SQS administer: DeleteQueue", sqs(lambda c, url: c.delete_queue(QueueUrl=url)), own=False),
    Op("SNS administer: DeleteTopic", sns(lambda c, arn: c.delete_topic(TopicArn=arn)), own=False),
    Op("Kinesis administer: DeleteStream", kinesis(lambda c, s: c.delete_stream(StreamName=s)), own=False),
    Op("DynamoDB administer: DeleteTable", dynamodb(lambda c, t: c.delete_table(TableName=t)), own=False),
]

#: Data calls moto lets through on B's resources: each must work on A's own, and is recorded as a gap on B's.
BY_ACTION = [
    Op("SNS write: Publish", sns(lambda c, arn: c.publish(TopicArn=arn, Message="x"))),
    Op("SNS read: GetTopicAttributes", sns(lambda c, arn: c.get_topic_attributes(TopicArn=arn))),
    Op("Kinesis write: PutRecord", kinesis(lambda c, s: c.put_record(StreamName=s, Data=b"x", PartitionKey="k"))),
    Op("Kinesis read: GetShardIterator", kinesis(shard_iterator)),
    Op("DynamoDB write: PutItem", dynamodb(lambda c, t: c.put_item(TableName=t, Item={"id": {"S": "m"}}))),
    Op("DynamoDB read: GetItem", dynamodb(lambda c, t: c.get_item(TableName=t, Key={"id": {"S": "m"}}))),
    Op("DynamoDB list: Scan", dynamodb(lambda c, t: c.scan(TableName=t))),
    Op("DynamoDB delete: DeleteItem", dynamodb(lambda c, t: c.delete_item(TableName=t, Key={"id": {"S": "m"}}))),
]


@pytest.mark.parametrize("op,target", cases(ENFORCED))
def test_localstack(tenants: Tenants, matrix: Matrix, op: Op, target: str) -> None:
    project = tenants.a if target == "own" else tenants.b
    matrix.check(ENGINE, op.name, target, lambda: op.run(tenants, project), denied)


@pytest.mark.parametrize("op", BY_ACTION, ids=[op.name for op in BY_ACTION])
def test_localstack_gaps(tenants: Tenants, matrix: Matrix, op: Op) -> None:
    matrix.check(ENGINE, op.name, "own", lambda: op.run(tenants, tenants.a), denied)
    matrix.gap(ENGINE, op.name, lambda: op.run(tenants, tenants.b), BY_ACTION_ONLY)
