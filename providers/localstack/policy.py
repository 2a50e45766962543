"""The one inline policy of a LocalStack access key: exactly the project's resources, by ARN, and on
each only the actions that use its data; on the secret store's instance, reading the project's own entries."""

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
#: The reach entry of a project's own entries in the workspace's secret store: `store:<kind>:<prefix><project>/`.
STORE = "store"
#: What a project's key may do on its store entries: read them, nothing else. No `kms:Decrypt`: entries use the
#: account's default keys (aws/secretsmanager, aws/ssm), whose key policies let every principal of the account
#: decrypt through the service; an IAM grant of its own would only matter for a customer-managed key.
STORE_ACTIONS: dict[str, tuple[str, ...]] = {
    "aws-sm": ("secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"),
    "aws-ssm": ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"),
}
#: Per emulator, the actions it authorizes against no resource at all, so that a grant naming resources never
#: matches them (on moto: every SNS, Kinesis, DynamoDB, Secrets Manager and SSM call, and SQS's GetQueueUrl).
#: The key gets those on "*", or it could not use its own resources (or read its store entries) either.
UNSCOPED_ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "moto": {"queue": ("sqs:GetQueueUrl",), "topic": DATA_ACTIONS["topic"], "stream": DATA_ACTIONS["stream"],
             "table": DATA_ACTIONS["table"], "aws-sm": STORE_ACTIONS["aws-sm"], "aws-ssm": STORE_ACTIONS["aws-ssm"]},
    "localstack": {},
}
#: Per emulator, the services where a project's key reaches other projects' resources too (docs/engines.md);
#: devstack doctor names them.
UNISOLATED: dict[str, tuple[str, ...]] = {"moto": ("SNS", "Kinesis", "DynamoDB"), "localstack": ()}
#: Likewise for the secret store's services: a key on the store's instance reads every project's entries.
UNISOLATED_STORE: dict[str, tuple[str, ...]] = {"moto": ("Secrets Manager", "SSM"), "localstack": ()}
_SERVICE_KINDS = {"s3": "bucket", "sqs": "queue", "sns": "topic", "kinesis": "stream", "dynamodb": "table"}
_STORE_SERVICES = {"secretsmanager": "aws-sm", "ssm": "aws-ssm"}
_STORE_SIDS = {"aws-sm": "ReadSecretsManager", "aws-ssm": "ReadParameterStore"}


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


def store_entry(store: str, path: str) -> str:
    """The reach entry of the store entries under `path` (`<prefix><project>/`) of store `store`."""
    return f"{STORE}:{store}:{path}"


def store_arns(store: str, path: str, region: str, account: str) -> list[str]:
    """The ARNs a grant on the store entries under `path` names. An SSM ARN is `parameter` and the name,
    with a '/' between only when the name has no leading one; GetParametersByPath is checked on the path."""
    if store == "aws-sm":
        return [f"arn:aws:secretsmanager:{region}:{account}:secret:{path}*"]  # * also takes the ARN's random suffix
    name = path if path.startswith("/") else f"/{path}"
    return [f"arn:aws:ssm:{region}:{account}:parameter{name.rstrip('/')}", f"arn:aws:ssm:{region}:{account}:parameter{name}*"]


def _store_reach(service: str, rest: str) -> str | None:
    """`store:<kind>:<path>` of a store ARN as `store_arns` writes it, None for any other text."""
    if service == "secretsmanager":
        path = rest.removeprefix("secret:").removesuffix("*") if rest.startswith("secret:") and rest.endswith("/*") else ""
    else:
        name = rest.removeprefix("parameter") if rest.startswith("parameter/") else ""
        path = name.removesuffix("*") if name.endswith("/*") else f"{name}/" if name else ""
    wild = not path or any(char in path for char in "*?")
    return None if wild else store_entry(_STORE_SERVICES[service], path)


def reach_entry(arn: str) -> str | None:
    """`<kind>:<name>` of a resource ARN as `resource_arns` writes it (`store:<kind>:<path>` of one
    `store_arns` writes), None for any other text."""
    parts = str(arn).split(":", 5)
    if len(parts) == 6 and parts[0] == "arn" and parts[2] in _STORE_SERVICES:
        return _store_reach(parts[2], parts[5])
    if len(parts) < 6 or parts[0] != "arn" or parts[2] not in _SERVICE_KINDS:
        return None
    service, rest = parts[2], parts[5]
    name = {"s3": rest.split("/")[0], "kinesis": rest.removeprefix("stream/"),
            "dynamodb": rest.removeprefix("table/").split("/")[0]}.get(service, rest)
    return f"{_SERVICE_KINDS[service]}:{name}" if name and "*" not in name else None


def key_policy(reach: Iterable[str], region: str, account: str, server: str) -> dict[str, Any] | None:
    """The inline policy of a key reaching `reach` (`<kind>:<name>` entries, and `store:<kind>:<path>` ones)
    on emulator `server`; None when it reaches nothing (the key then may do nothing)."""
    arns: dict[str, list[str]] = {}
    stored: dict[str, list[str]] = {}
    for entry in sorted(set(reach)):
        kind, _, name = entry.partition(":")
        if kind in DATA_ACTIONS and name:
            arns.setdefault(kind, []).extend(resource_arns(kind, name, region, account))
        store, _, path = name.partition(":")
        if kind == STORE and store in STORE_ACTIONS and path:
            stored.setdefault(store, []).extend(store_arns(store, path, region, account))
    statements: list[dict[str, Any]] = [
        {"Sid": f"Data{kind.title()}", "Effect": "Allow", "Action": list(DATA_ACTIONS[kind]), "Resource": names}
        for kind, names in sorted(arns.items())]
    statements += [{"Sid": _STORE_SIDS[store], "Effect": "Allow", "Action": list(STORE_ACTIONS[store]), "Resource": names}
                   for store, names in sorted(stored.items())]
    unscoped = sorted({action for kind in [*arns, *stored] for action in UNSCOPED_ACTIONS.get(server, {}).get(kind, ())})
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
