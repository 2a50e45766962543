"""Every redis_index and acl_user in a Redis server, ours or not, from the two marker hashes.

Not seen: keys in db 0 (no index) belong to nobody we can tell; a marker in
`devstack:acl-owners` whose user is gone is not a resource.
"""

from __future__ import annotations

from typing import Any

from providers.engine import Found
from providers.instances import SharedInstance
from providers.markers import marker_field, marker_owner
from providers.redis.acl_user import marker_fits
from providers.redis.client import ACL_OWNERS_KEY, ALLOCATIONS_KEY, admin_client, marker_entry


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Index allocations and ACL users from the marker hashes; unmarked non-empty indexes and users are foreign."""
    found: list[Found] = []
    with admin_client(instance) as client:
        if "redis_index" in kinds:
            allocations = client.hgetall(ALLOCATIONS_KEY)
            taken = set()
            for field, text in sorted(allocations.items()):
                entry = marker_entry(text) or {}
                taken.add(entry.get("db"))
                found.append(Found("redis", instance.name, "redis_index", field, entry.get("owner"),
                                   entry.get("stack"), entry.get("name")))
            for db in sorted(_non_empty_dbs(client)):
                if db != 0 and db not in taken:
                    found.append(Found("redis", instance.name, "redis_index", f"db{db}", None))
        if "acl_user" in kinds:
            owners = client.hgetall(ACL_OWNERS_KEY)
            for user in sorted(client.acl_users()):
                text, live = owners.get(user), client.execute_command("ACL", "GETUSER", user)
                if live is None:
                    continue  # deleted while we look
                # The marker records the rules devstack set: a user made anew by hand has others.
                doubt = None if text is None or marker_fits(text, live) else \
                    "its marker (kept in a registry hash) records other rules (made anew by hand, or its rules changed)"
                found.append(Found("redis", instance.name, "acl_user", user, marker_owner(text),
                                   marker_field(text, "stack"), doubt=doubt))
    return found


def _non_empty_dbs(client: Any) -> set[int]:
    """Logical databases holding keys (INFO keyspace lists only those)."""
    return {int(name[2:]) for name in client.info("keyspace") if name.startswith("db")}
