"""The ownership marker as tags (`managed-by=devstack`, `devstack-owner`, `devstack-stack`).

Tag values cannot hold the JSON text of providers.markers.ownership_marker, so each fact is one tag.
S3 buckets and every LocalStack kind carry it; MinIO access keys keep theirs in their policy instead.
"""

from __future__ import annotations

from providers.identity import Identity

MANAGED_TAG, MANAGED_VALUE = "managed-by", "devstack"
OWNER_TAG, STACK_TAG = "devstack-owner", "devstack-stack"
RESERVED_TAGS = frozenset({MANAGED_TAG, OWNER_TAG, STACK_TAG})
#: S3 allows 50 tags on a bucket; the marker takes three of them.
MAX_USER_TAGS = 50 - len(RESERVED_TAGS)


def marker_tags(ident: Identity, stack: str | None) -> dict[str, str]:
    """The ownership marker as tags (empty tag values are dropped by some engines: never send one)."""
    return {MANAGED_TAG: MANAGED_VALUE, OWNER_TAG: ident.owner, STACK_TAG: stack or "unknown"}


def tags_owner(tags: dict[str, str]) -> str | None:
    """The owner the marker tags name, or None when the resource carries no marker of ours."""
    if tags.get(MANAGED_TAG) != MANAGED_VALUE:
        return None
    return tags.get(OWNER_TAG) or None


def tags_workspace(tags: dict[str, str]) -> str | None:
    """The workspace the marker tags name ("unknown": made where none was known), None when not ours."""
    stack = tags.get(STACK_TAG) if tags_owner(tags) else None
    return None if stack == "unknown" else stack


def user_tags(tags: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in tags.items() if key not in RESERVED_TAGS}


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    """Tags as the `[{"Key": .., "Value": ..}]` list most AWS APIs take."""
    return [{"Key": key, "Value": value} for key, value in sorted(tags.items())]


def tag_dict(tags: list[dict[str, str]]) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in tags}
