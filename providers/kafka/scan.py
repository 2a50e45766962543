"""Every topic and acl in a Kafka cluster, ours or not, owners from the `__devstack_owners` registry.

Not seen: a registry marker whose topic or principal does not exist (the
provider writes the marker first) is not a resource; a principal with ACL
bindings but no SCRAM credential reads as gone, as the provider's observe says.
"""

from __future__ import annotations

from providers.engine import Found
from providers.instances import SharedInstance
from providers.kafka import client  # client.REQUEST_TIMEOUT: one setting, read at each call
from providers.kafka.client import admin_client, broker_failures_named, result
from providers.kafka.owners import read_markers
from providers.markers import marker_field, marker_owner


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Topics (internal `__*` ones skipped) and SCRAM principals, owners from the `__devstack_owners` registry."""
    admin = admin_client(instance)
    found: list[Found] = []
    with broker_failures_named(instance):  # a broker lost after the connect, as in a provider's verbs
        markers = read_markers(instance, admin)
        if "topic" in kinds:
            topics = admin.list_topics(timeout=client.REQUEST_TIMEOUT).topics
            found += [_found(instance, "topic", t, markers.get(f"topic:{t}"))
                      for t in sorted(topics) if not t.startswith("__")]
        if "acl" in kinds:
            future = admin.describe_user_scram_credentials(request_timeout=client.REQUEST_TIMEOUT)
            users = result(future, "list", "SCRAM users") or {}
            found += [_found(instance, "acl", u, markers.get(f"acl:{u}")) for u in sorted(users)]
    return found


def _found(instance: SharedInstance, kind: str, name: str, marker: str | None) -> Found:
    return Found("kafka", instance.name, kind, name, marker_owner(marker), marker_field(marker, "stack"))
