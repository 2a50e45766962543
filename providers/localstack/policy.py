"""The one inline policy of a LocalStack access key: exactly the project's resources, by ARN, and on
each only the actions that use its data."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

#: The kinds whose resources a project's access key reaches, each by its exact ARN.
REACHED_KINDS = ("bucket", "queue", "topic", "stream", "table")
#: What a project's key may do on its own resources: use their data (read, write, list, delete), never create,
#: drop, retag or reconfigure them. IAM's action names, and beside them the API operation's where it differs:
#: moto checks `s3:<operation>` (`s3:ListObjectsV2` where IAM says `s3:ListBucket`).
DATA_ACTIONS: dict[str, tuple[str, ...]] = {
    "bucket": ("s3:GetObject", "s3:HeadObject", "s3:PutObject", "s3:CopyObject", "s3:DeleteObject", "s3:DeleteObjects",
               "s3:GetObjectVersion", "s3:DeleteObjectVersion", "s3:GetObjectTagging", "s3:PutObjectTagging",
               "s3:DeleteObjectTagging", "s3:GetObjectAttributes", "s3:ListBucket", "s3:ListObjects",
               "s3:ListObjectsV2", "s3:ListBucketVersions", "s3:ListObjectVersions", "s3:HeadBucket",
               "s3:GetBucketLocation", "s3:CreateMultipartUpload", "s3:UploadPart", "s3:UploadPartCopy",
               "s3:CompleteMultipartUpload", "s3:AbortMultipartUpload", "s3:ListBucketMultipartUploads",
               "s3:ListMultipartUploads", "s3:ListMultipartUploadParts", "s3:ListParts"),
    "queue": ("sqs:SendMessage", "sqs:SendMessageBatch", "sqs:ReceiveMessage", "sqs:DeleteMessage",
              "sqs:DeleteMessageBatch", "sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibilityBatch",
              "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:PurgeQueue"),
    "topic": ("sns:Publish", "sns:PublishBatch", "sns:GetTopicAttributes", "sns:Subscribe", "sns:ConfirmSubscription",
              "sns:Unsubscribe", "sns:ListSubscriptionsByTopic"),
    "stream": ("kinesis:PutRecord", "kinesis:PutRecords", "kinesis:GetRecords", "kinesis:GetShardIterator",
               "kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:ListShards"),
    "table": ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
              "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:Query", "dynamodb:Scan",
              "dynamodb:ConditionCheckItem", "dynamodb:TransactGetItems", "dynamodb:TransactWriteItems",
              "dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"),
}
#: Per emulator, the actions it authorizes against no resource at all, so that a grant naming resources never
#: matches them (on moto: every SNS, Kinesis and DynamoDB call, and SQS's GetQueueUrl). The key gets those on
#: "*", or it could not use its own resources either.
UNSCOPED_ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "moto": {"queue": ("sqs:GetQueueUrl",), "topic": DATA_ACTIONS["topic"], "stream": DATA_ACTIONS["stream"],
             "table": DATA_ACTIONS["table"]},
    "localstack": {},
}
#: Per emulator, the services where a project's key reaches other projects' resources too (docs/engines.md);
#: devstack doctor names them.
UNISOLATED: dict[str, tuple[str, ...]] = {"moto": ("SNS", "Kinesis", "DynamoDB"), "localstack": ()}
_SERVICE_KINDS = {"s3": "bucket", "sqs": "queue", "sns": "topic", "kinesis": "stream", "dynamodb": "table"}


def resource_arns(kind: str, name: str, region: str, account: str) -> list[str]:
    """The ARNs a grant on the `kind` called `name` names: the resource, and what lives in it."""
    if kind == "bucket":
        return [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]
    if kind == "queue":
        return [f"arn:aws:sqs:{region}:{account}:{name}"]
    if kind == "topic":
        return [f"arn:aws:sns:{region}:{account}:{name}"]
    if kind == "stream":
        return [f"arn:aws:kinesis:{region}:{account}:stream/{name}"]
    return [f"arn:aws:dynamodb:{region}:{account}:table/{name}", f"arn:aws:dynamodb:{region}:{account}:table/{name}/index/*"]


def reach_entry(arn: str) -> str | None:
    """`<kind>:<name>` of a resource ARN as `resource_arns` writes it, None for any other text."""
    parts = str(arn).split(":", 5)
    if len(parts) < 6 or parts[0] != "arn" or parts[2] not in _SERVICE_KINDS:
        return None
    service, rest = parts[2], parts[5]
    name = {"s3": rest.split("/")[0], "kinesis": rest.removeprefix("stream/"),
            "dynamodb": rest.removeprefix("table/").split("/")[0]}.get(service, rest)
    return f"{_SERVICE_KINDS[service]}:{name}" if name and "*" not in name else None


def key_policy(reach: Iterable[str], region: str, account: str, server: str) -> dict[str, Any] | None:
    """The inline policy of a key reaching `reach` (`<kind>:<name>` entries) on emulator `server`; None
    when it reaches nothing (the key then may do nothing)."""
    arns: dict[str, list[str]] = {}
    for entry in sorted(set(reach)):
        kind, _, name = entry.partition(":")
        if kind in DATA_ACTIONS and name:
            arns.setdefault(kind, []).extend(resource_arns(kind, name, region, account))
    statements: list[dict[str, Any]] = [
        {"Sid": f"Data{kind.title()}", "Effect": "Allow", "Action": list(DATA_ACTIONS[kind]), "Resource": names}
        for kind, names in sorted(arns.items())]
    unscoped = sorted({action for kind in arns for action in UNSCOPED_ACTIONS.get(server, {}).get(kind, ())})
    if unscoped:
        statements.append({"Sid": "UncheckedResources", "Effect": "Allow", "Action": unscoped, "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements} if statements else None


def policy_reach(document: Mapping[str, Any] | None) -> list[str]:
    """The `<kind>:<name>` entries a key's live policy names."""
    found = set()
    for statement in (document or {}).get("Statement", []):
        resources = statement.get("Resource") or []
        for arn in [resources] if isinstance(resources, str) else resources:
            entry = reach_entry(arn)
            if entry:
                found.add(entry)
    return sorted(found)
