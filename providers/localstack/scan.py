"""Every bucket, queue, topic, stream, table and IAM user (access key) on a LocalStack (or moto) server,
with the owner its marker tags name."""

from __future__ import annotations

from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from providers.engine import Found
from providers.instances import SharedInstance
from providers.localstack.client import ENGINE_NAME
from providers.localstack.table import table_tags
from providers.s3.client import aws_client, boto_errors, error_code, reachable
from providers.s3.scan import all_buckets, tags_found
from providers.s3.tags import tag_dict

#: Error codes meaning "it was deleted after the list call returned it": skip it, it is gone.
_VANISHED = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NotFound", "NotFoundException",
             "ResourceNotFoundException", "NoSuchBucket", "NoSuchEntity")


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Buckets, SQS queues, SNS topics, Kinesis streams, DynamoDB tables and IAM users (access keys) with
    their marker tags."""
    found: list[Found] = []
    if "bucket" in kinds:
        found += [tags_found(ENGINE_NAME, instance, "bucket", b, tags)
                  for b, tags in all_buckets(ENGINE_NAME, instance)]
    with reachable(instance, ENGINE_NAME):
        for kind, scanner in (("queue", _queues), ("topic", _topics), ("stream", _streams), ("table", _tables)):
            if kind in kinds:
                found += [tags_found(ENGINE_NAME, instance, kind, name, tags) for name, tags in scanner(instance)]
        if "access_key" in kinds:
            found += [tags_found(ENGINE_NAME, instance, "access_key", name, tags)
                      for name, tags in _iam_users(instance)]
    return found


def _pages(call: Callable[..., dict[str, Any]], items: str, token_in: str, token_out: str, **args: Any) -> Iterator[Any]:
    """Every item of a paginated AWS list call."""
    token = None
    while True:
        page = call(**args, **({token_in: token} if token else {}))
        yield from page.get(items, [])
        token = page.get(token_out)
        if not token:
            return


def _unless_vanished(name: str, read: Callable[[], dict[str, str]]) -> Iterator[tuple[str, dict[str, str]]]:
    """(name, tags) of one listed resource, nothing when it disappeared meanwhile (others work on these engines)."""
    try:
        tags = read()
    except boto_errors.ClientError as err:
        if error_code(err) in _VANISHED:
            return
        raise
    yield name, tags


def _iam_users(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    """IAM users and their tags; not the instance's admin, which is no project's resource."""
    iam = aws_client(instance, "iam")
    for user in _pages(iam.list_users, "Users", "Marker", "Marker"):
        if user["UserName"] != instance.admin_user:
            yield from _unless_vanished(user["UserName"], lambda name=user["UserName"]: tag_dict(
                iam.list_user_tags(UserName=name).get("Tags", [])))


def _queues(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    sqs = aws_client(instance, "sqs")
    for url in _pages(sqs.list_queues, "QueueUrls", "NextToken", "NextToken", MaxResults=1000):
        yield from _unless_vanished(urlparse(url).path.rsplit("/", 1)[-1],
                                    lambda url=url: sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))


def _topics(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    sns = aws_client(instance, "sns")
    for topic in _pages(sns.list_topics, "Topics", "NextToken", "NextToken"):
        arn = topic["TopicArn"]
        yield from _unless_vanished(arn.rsplit(":", 1)[-1], lambda arn=arn: tag_dict(
            sns.list_tags_for_resource(ResourceArn=arn).get("Tags", [])))


def _streams(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    kinesis = aws_client(instance, "kinesis")
    for name in _pages(kinesis.list_streams, "StreamNames", "NextToken", "NextToken"):
        yield from _unless_vanished(name, lambda name=name: tag_dict(
            kinesis.list_tags_for_stream(StreamName=name).get("Tags", [])))


def _tables(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    ddb = aws_client(instance, "dynamodb")

    def tags(name: str) -> dict[str, str]:
        arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
        return table_tags(ddb, arn)

    for name in _pages(ddb.list_tables, "TableNames", "ExclusiveStartTableName", "LastEvaluatedTableName"):
        yield from _unless_vanished(name, lambda name=name: tags(name))
