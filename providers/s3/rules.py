"""A bucket's lifecycle configuration: one document that the rules of many declarations share.

Rules carry no tags: the reserved id prefix `devstack:<owner>:` is their marker (providers.s3.names.rule_id).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from providers.instances import SharedInstance
from providers.s3.client import boto_errors, error_code
from providers.s3.names import RULE_PREFIX

if TYPE_CHECKING:
    from botocore.client import BaseClient

_bucket_locks: dict[tuple[str, str], threading.Lock] = {}
_bucket_locks_guard = threading.Lock()


@contextmanager
def bucket_lock(instance: SharedInstance, bucket: str) -> Iterator[None]:
    """Serialize read-modify-write of one bucket's lifecycle configuration within this process.

    A bucket's rules are one document; two lifecycle declarations on one
    bucket are applied in parallel by Pulumi's workers and must not lose each
    other's rule.
    """
    with _bucket_locks_guard:
        lock = _bucket_locks.setdefault((instance.address, bucket), threading.Lock())
    with lock:
        yield


def rules_of(s3: BaseClient, bucket: str) -> list[dict[str, Any]]:
    try:
        return list(s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", []))
    except boto_errors.ClientError as err:
        if error_code(err) == "NoSuchLifecycleConfiguration":
            return []
        raise


def foreign_rules(rules: list[dict[str, Any]], owner: str) -> list[dict[str, Any]]:
    """The lifecycle rules no lifecycle of the project made: one set outside devstack may expire every object."""
    return [r for r in rules if not str(r.get("ID") or "").startswith(f"{RULE_PREFIX}{owner}:")]


def put_rules(s3: BaseClient, bucket: str, rules: list[dict[str, Any]]) -> None:
    if rules:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    else:
        s3.delete_bucket_lifecycle(Bucket=bucket)


def expiry_rule(rule_id: str, expire_days: int | None, prefix: str, enabled: bool) -> dict[str, Any]:
    """A rule as devstack writes it: expiry after some days, for one prefix, and nothing else."""
    return {"ID": rule_id, "Status": "Enabled" if enabled else "Disabled",
            "Filter": {"Prefix": prefix}, "Expiration": {"Days": expire_days}}


def rule_params(rule: dict[str, Any]) -> dict[str, Any]:
    rule_filter = rule.get("Filter") or {}
    prefix = rule_filter.get("Prefix", (rule_filter.get("And") or {}).get("Prefix", rule.get("Prefix", "")))
    return {"expire_days": (rule.get("Expiration") or {}).get("Days"), "prefix": prefix or "",
            "enabled": rule.get("Status") == "Enabled"}
