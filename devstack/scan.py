"""Complete scans of shared engines: every resource of the scanned kinds, ours or not.

Providers answer "does this one resource exist"; garbage collection needs
"list everything in the engine". One small scanner per engine does that
with the provider module's own helpers (admin connections, marker parsing,
engine names), so a scan reads markers exactly as the providers write them.

A scan yields `Found(engine, instance, kind, engine_name, owner, stack,
name)`: `owner` is read from the ownership marker (None = no marker of
ours: foreign), `stack` is the workspace recorded in the marker when the
engine keeps it, `name` the declaration name when the marker records it.

What a scan cannot see (by design of the markers):
- minio: a `devstack-<key>` policy left without its user is not listed. A
  bucket's own key (`<bucket>~key`) is part of its bucket, not an access
  key; one left behind by its bucket is listed as that bucket.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from providers.markers import marker_field, marker_owner
from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING, PREFIXED
from providers.engine import Found
from providers.instances import SharedInstance


# --- declaration names back from engine names ------------------------------------------


def declaration_name(engine: str, kind: str, engine_name: str, owner: str, hints: Iterable[str | None] = ()) -> str | None:
    """A declaration name that maps to `engine_name` for `owner`, or None.

    Engine names are `<owner>`, `<owner><sep><name>` (sep '-', '_' or '.'),
    the name itself (postgres databases) or `devstack:<owner>:<name>`
    (lifecycle rules); a FIFO name keeps `.fifo` last.
    Each candidate is verified with the kind's own `engine_name`.
    """
    candidates = [h for h in hints if h] + [owner]
    for prefix in dict.fromkeys((owner, owner.replace("-", "_"))):
        for sep in "-_.":
            if engine_name.startswith(prefix + sep):
                candidates.append(engine_name[len(prefix) + len(sep):])
    if engine_name.endswith(".fifo"):
        candidates.append(owner + ".fifo")
    candidates.append(engine_name.removeprefix(f"devstack:{owner}:"))  # lifecycle rule ids
    candidates.append(engine_name)  # an explicit name is the engine name itself
    for candidate in dict.fromkeys(candidates):
        if naming_mapping(engine, kind, candidate, owner, engine_name) is not None:
            return candidate
    return None


def naming_mapping(engine: str, kind: str, name: str, owner: str, engine_name: str) -> int | None:
    """The naming (providers.identity) under which declaration `name` of `owner` maps to `engine_name`, or None."""
    from providers import registry

    kind_class = registry.provider_class(engine, kind)
    for naming in (PREFIXED, CURRENT_NAMING):
        try:
            if kind_class.engine_name(name, owner, naming=naming) == engine_name:
                return naming
        except (InvalidSpec, ValueError):
            continue
    return None


# --- S3 (minio, localstack) ------------------------------------------------------------------


def _s3_buckets(engine: str, instance: SharedInstance) -> list[tuple[str, dict[str, str]]]:
    """(bucket, tags) of every bucket; a bucket dropped while we look is skipped."""
    from botocore.exceptions import ClientError

    from providers import s3

    client, found = s3.aws_client(instance, "s3"), []
    with s3.reachable(instance, engine):
        for bucket in (b["Name"] for b in client.list_buckets().get("Buckets", [])):
            try:
                found.append((bucket, s3.bucket_tags(client, bucket)))
            except ClientError as err:
                if s3.error_code(err) != "NoSuchBucket":
                    raise
    return found


def _tags_found(engine: str, instance: SharedInstance, kind: str, name: str, tags: dict[str, str]) -> Found:
    from providers import s3

    owner = s3.tags_owner(tags)
    return Found(engine, instance.name, kind, name, owner, tags.get(s3.STACK_TAG) if owner else None)


def _lifecycle_rules(engine: str, instance: SharedInstance, buckets: list[tuple[str, dict[str, str]]]) -> list[Found]:
    """Every lifecycle rule: `devstack:<owner>:<name>` ids are ours (the bucket's stack tag is the rule's)."""
    from botocore.exceptions import ClientError

    from providers import s3

    client, found = s3.aws_client(instance, "s3"), []
    with s3.reachable(instance, engine):
        for bucket, tags in buckets:
            try:
                rules = s3._rules(client, bucket)
            except ClientError as err:
                if s3.error_code(err) == "NoSuchBucket":
                    continue
                raise
            for rule in rules:
                rule_id = str(rule.get("ID") or "")
                owner, _, name = rule_id.removeprefix(s3.RULE_PREFIX).partition(":")
                ours = rule_id.startswith(s3.RULE_PREFIX) and owner and name
                found.append(Found(engine, instance.name, "lifecycle", rule_id, owner if ours else None,
                                   tags.get(s3.STACK_TAG) if ours else None, name if ours else None))
    return found


def scan_minio(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Buckets (tags), lifecycle rules (reserved id prefix) and access keys (their policy's ID marker)."""
    from providers import minio, s3

    found: list[Found] = []
    buckets = _s3_buckets("minio", instance) if kinds & {"bucket", "lifecycle", "access_key"} else []
    if "bucket" in kinds:
        found += [_tags_found("minio", instance, "bucket", b, tags) for b, tags in buckets]
    if "lifecycle" in kinds:
        found += _lifecycle_rules("minio", instance, buckets)
    if kinds & {"bucket", "access_key"}:
        admin = minio.admin_client(instance)
        with s3.reachable(instance, "minio"):
            users = json.loads(admin.user_list() or "{}")
            policies = json.loads(admin.policy_list() or "{}")
        found += _minio_users(instance, kinds, users, policies, {b for b, _ in buckets})
    return found


def _minio_users(instance: SharedInstance, kinds: set[str], users: dict[str, Any], policies: dict[str, Any],
                 buckets: set[str]) -> list[Found]:
    """Access keys; a bucket's own key only when its bucket is gone, listed as that bucket."""
    from providers import minio

    found = []
    for user in sorted(users):
        marker = (policies.get(minio.policy_name(user)) or {}).get("ID")
        bucket = minio.key_bucket(user)
        if bucket is not None and (bucket in buckets or marker_owner(marker)):
            if bucket not in buckets and "bucket" in kinds:
                found.append(Found("minio", instance.name, "bucket", bucket, marker_owner(marker),
                                   marker_field(marker, "stack")))
            continue
        if "access_key" not in kinds:
            continue
        # The marker is the policy devstack attaches: a user made anew by hand does not have it.
        attached = str((users[user] or {}).get("policyName") or "").split(",")
        doubt = None if minio.policy_name(user) in attached else \
            "its marker policy is not attached to it (made anew by hand, or the policy detached)"
        found.append(Found("minio", instance.name, "access_key", user, marker_owner(marker),
                           marker_field(marker, "stack"), doubt=doubt))
    return found


# --- localstack -------------------------------------------------------------------------


def _pages(call: Callable[..., dict[str, Any]], items: str, token_in: str, token_out: str, **args: Any) -> Iterator[Any]:
    """Every item of a paginated AWS list call."""
    token = None
    while True:
        page = call(**args, **({token_in: token} if token else {}))
        yield from page.get(items, [])
        token = page.get(token_out)
        if not token:
            return


def scan_localstack(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Buckets, SQS queues, SNS topics, Kinesis streams, DynamoDB tables and IAM users (access keys) with
    their marker tags."""
    from providers import s3

    found: list[Found] = []
    if "bucket" in kinds:
        found += [_tags_found("localstack", instance, "bucket", b, tags) for b, tags in _s3_buckets("localstack", instance)]
    with s3.reachable(instance, "localstack"):
        for kind, scanner in (("queue", _queues), ("topic", _topics), ("stream", _streams), ("table", _tables)):
            if kind in kinds:
                found += [_tags_found("localstack", instance, kind, name, tags) for name, tags in scanner(instance)]
        if "access_key" in kinds:
            found += [_tags_found("localstack", instance, "access_key", name, tags) for name, tags in _iam_users(instance)]
    return found


def _iam_users(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    """IAM users and their tags; not the instance's admin, which is no project's resource."""
    from providers import s3

    iam = s3.aws_client(instance, "iam")
    for user in _pages(iam.list_users, "Users", "Marker", "Marker"):
        if user["UserName"] != instance.admin_user:
            yield from _unless_vanished(user["UserName"], lambda name=user["UserName"]: s3.tag_dict(
                iam.list_user_tags(UserName=name).get("Tags", [])))


#: Error codes meaning "it was deleted after the list call returned it": skip it, it is gone.
_VANISHED = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NotFound", "NotFoundException",
             "ResourceNotFoundException", "NoSuchBucket", "NoSuchEntity")


def _unless_vanished(name: str, read: Callable[[], dict[str, str]]) -> Iterator[tuple[str, dict[str, str]]]:
    """(name, tags) of one listed resource, nothing when it disappeared meanwhile (others work on these engines)."""
    from botocore.exceptions import ClientError

    from providers import s3

    try:
        tags = read()
    except ClientError as err:
        if s3.error_code(err) in _VANISHED:
            return
        raise
    yield name, tags


def _queues(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    from providers import s3

    sqs = s3.aws_client(instance, "sqs")
    for url in _pages(sqs.list_queues, "QueueUrls", "NextToken", "NextToken", MaxResults=1000):
        yield from _unless_vanished(urlparse(url).path.rsplit("/", 1)[-1],
                                    lambda url=url: sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))


def _topics(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    from providers import s3

    sns = s3.aws_client(instance, "sns")
    for topic in _pages(sns.list_topics, "Topics", "NextToken", "NextToken"):
        arn = topic["TopicArn"]
        yield from _unless_vanished(arn.rsplit(":", 1)[-1], lambda arn=arn: s3.tag_dict(
            sns.list_tags_for_resource(ResourceArn=arn).get("Tags", [])))


def _streams(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    from providers import s3

    kinesis = s3.aws_client(instance, "kinesis")
    for name in _pages(kinesis.list_streams, "StreamNames", "NextToken", "NextToken"):
        yield from _unless_vanished(name, lambda name=name: s3.tag_dict(
            kinesis.list_tags_for_stream(StreamName=name).get("Tags", [])))


def _tables(instance: SharedInstance) -> Iterator[tuple[str, dict[str, str]]]:
    from providers import localstack, s3

    ddb = s3.aws_client(instance, "dynamodb")

    def tags(name: str) -> dict[str, str]:
        arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
        return localstack.table_tags(ddb, arn)

    for name in _pages(ddb.list_tables, "TableNames", "ExclusiveStartTableName", "LastEvaluatedTableName"):
        yield from _unless_vanished(name, lambda name=name: tags(name))


# --- entry point ------------------------------------------------------------------------

SCANNERS: dict[str, Callable[[SharedInstance, set[str]], list[Found]]] = {
    "minio": scan_minio,
    "localstack": scan_localstack,
}


def scan(instance: SharedInstance, kinds: Iterable[str] | None = None) -> list[Found]:
    """Every resource of `kinds` (default: all the engine's kinds) in one instance.

    Raises the provider's EngineUnavailable when the engine does not answer.
    Declaration names are filled in for resources carrying our marker.
    """
    from providers import registry

    wanted = set(kinds) if kinds is not None else set(registry.kinds(instance.engine))
    scanner = SCANNERS.get(instance.engine) or registry.engine(instance.engine).scan
    found = scanner(instance, wanted)
    return sorted(_named(f) for f in found)


def _named(found: Found) -> Found:
    if found.owner is None:
        return found
    name = declaration_name(found.engine, found.kind, found.engine_name, found.owner, [found.name])
    return replace(found, name=name)

