"""Every bucket, lifecycle rule and access key on a MinIO server, with the owner its marker names.

A `devstack-<key>` policy left without its user is not listed. A bucket's own key (`<bucket>~key`) is
part of its bucket, not an access key; one left behind by its bucket is listed as that bucket.
"""

from __future__ import annotations

import json
from typing import Any

from providers.engine import Found
from providers.instances import SharedInstance
from providers.markers import marker_field, marker_owner
from providers.minio.client import ENGINE_NAME, admin_client
from providers.minio.keys import key_bucket, policy_name
from providers.s3.client import reachable
from providers.s3.scan import all_buckets, lifecycle_rules, tags_found


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Buckets (tags), lifecycle rules (reserved id prefix) and access keys (their policy's ID marker)."""
    found: list[Found] = []
    buckets = all_buckets(ENGINE_NAME, instance) if kinds & {"bucket", "lifecycle", "access_key"} else []
    if "bucket" in kinds:
        found += [tags_found(ENGINE_NAME, instance, "bucket", b, tags) for b, tags in buckets]
    if "lifecycle" in kinds:
        found += lifecycle_rules(ENGINE_NAME, instance, buckets)
    if kinds & {"bucket", "access_key"}:
        admin = admin_client(instance)
        with reachable(instance, ENGINE_NAME):
            users = json.loads(admin.user_list() or "{}")
            policies = json.loads(admin.policy_list() or "{}")
        found += _users(instance, kinds, users, policies, {b for b, _ in buckets})
    return found


def _users(instance: SharedInstance, kinds: set[str], users: dict[str, Any], policies: dict[str, Any],
           buckets: set[str]) -> list[Found]:
    """Access keys; a bucket's own key only when its bucket is gone, listed as that bucket."""
    found = []
    for user in sorted(users):
        marker = (policies.get(policy_name(user)) or {}).get("ID")
        bucket = key_bucket(user)
        if bucket is not None and (bucket in buckets or marker_owner(marker)):
            if bucket not in buckets and "bucket" in kinds:
                found.append(Found(ENGINE_NAME, instance.name, "bucket", bucket, marker_owner(marker),
                                   marker_field(marker, "stack")))
            continue
        if "access_key" not in kinds:
            continue
        # The marker is the policy devstack attaches: a user made anew by hand does not have it.
        attached = str((users[user] or {}).get("policyName") or "").split(",")
        doubt = None if policy_name(user) in attached else \
            "its marker policy is not attached to it (made anew by hand, or the policy detached)"
        found.append(Found(ENGINE_NAME, instance.name, "access_key", user, marker_owner(marker),
                           marker_field(marker, "stack"), doubt=doubt))
    return found
