"""What the MinIO and LocalStack scanners share: buckets and lifecycle rules with their markers."""

from __future__ import annotations

from providers.engine import Found
from providers.instances import SharedInstance
from providers.s3.bucket import bucket_tags
from providers.s3.client import aws_client, boto_errors, error_code, reachable
from providers.s3.names import RULE_PREFIX
from providers.s3.rules import rules_of
from providers.s3.tags import STACK_TAG, tags_owner


def all_buckets(engine: str, instance: SharedInstance) -> list[tuple[str, dict[str, str]]]:
    """(bucket, tags) of every bucket; a bucket dropped while we look is skipped."""
    client, found = aws_client(instance, "s3"), []
    with reachable(instance, engine):
        for bucket in (b["Name"] for b in client.list_buckets().get("Buckets", [])):
            try:
                found.append((bucket, bucket_tags(client, bucket)))
            except boto_errors.ClientError as err:
                if error_code(err) != "NoSuchBucket":
                    raise
    return found


def tags_found(engine: str, instance: SharedInstance, kind: str, name: str, tags: dict[str, str]) -> Found:
    owner = tags_owner(tags)
    return Found(engine, instance.name, kind, name, owner, tags.get(STACK_TAG) if owner else None)


def lifecycle_rules(engine: str, instance: SharedInstance, buckets: list[tuple[str, dict[str, str]]]) -> list[Found]:
    """Every lifecycle rule: `devstack:<owner>:<name>` ids are ours (the bucket's stack tag is the rule's)."""
    client, found = aws_client(instance, "s3"), []
    with reachable(instance, engine):
        for bucket, tags in buckets:
            try:
                rules = rules_of(client, bucket)
            except boto_errors.ClientError as err:
                if error_code(err) == "NoSuchBucket":
                    continue
                raise
            for rule in rules:
                rule_id = str(rule.get("ID") or "")
                owner, _, name = rule_id.removeprefix(RULE_PREFIX).partition(":")
                ours = rule_id.startswith(RULE_PREFIX) and owner and name
                found.append(Found(engine, instance.name, "lifecycle", rule_id, owner if ours else None,
                                   tags.get(STACK_TAG) if ours else None, name if ours else None))
    return found
