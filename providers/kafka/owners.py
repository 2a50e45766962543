"""Kafka's ownership registry: the compacted topic `__devstack_owners`.

Kafka topics have no comment or tag, topic configs accept no custom keys and
SCRAM users carry no metadata. A name prefix alone cannot tell a topic we
created from one someone made by hand under the same name, so the marker lives
in a registry: one record per managed resource keyed `topic:<name>` or
`acl:<principal>`, whose value is the ownership marker (a tombstone when
purged). Only the admin can read it (the broker's authorizer grants tenants
nothing there). It is written before a resource is created, so a crash in
between leaves a harmless marker for a resource that does not exist, never an
unmarked one.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from providers.instances import SharedInstance
from providers.kafka import client  # client.REQUEST_TIMEOUT: one setting, read at each call
from providers.kafka.client import MARKER_TOPIC, clients, error_code, refusal, unavailable
from providers.kafka.names import within_prefix
from providers.markers import marker_owner


def ensure_registry(admin: AdminClient) -> None:
    """Create the compacted marker topic once; concurrent creators are fine."""
    topic = NewTopic(MARKER_TOPIC, 1, 1, config={"cleanup.policy": "compact"})
    try:
        future = admin.create_topics([topic], request_timeout=client.REQUEST_TIMEOUT)[MARKER_TOPIC]
        future.result(timeout=client.REQUEST_TIMEOUT)
    except KafkaException as err:
        if error_code(err) != KafkaError.TOPIC_ALREADY_EXISTS:
            raise refusal(err, "create", f"the ownership registry {MARKER_TOPIC}") from err


def read_markers(instance: SharedInstance, admin: AdminClient) -> dict[str, str]:
    """Every live marker in the registry: key -> marker text (latest record per key wins)."""
    return clients(instance).markers.current(admin)


def write_marker(instance: SharedInstance, key: str, marker: str | None) -> None:
    """Record (or, with None, tombstone) one marker; returns once the broker has it."""
    failed: list[KafkaError] = []
    delivered = threading.Event()

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err:
            failed.append(err)
        delivered.set()

    producer = clients(instance).producer
    producer.produce(MARKER_TOPIC, key=key.encode(), value=marker.encode() if marker else None, on_delivery=report)
    # flush() serves delivery reports for every thread's records; wait for this one's.
    deadline = time.monotonic() + client.REQUEST_TIMEOUT
    while not delivered.is_set() and time.monotonic() < deadline:
        producer.flush(0.5)
    if failed or not delivered.is_set():
        cause = failed[0].str() if failed else "delivery did not finish"
        raise unavailable(instance, f"cannot record ownership in {MARKER_TOPIC}: {cause}")


def project_principals(markers: Mapping[str, str], owner: str) -> set[str]:
    """`User:<principal>` of every acl the registry gives to `owner`: its explicitly named ones included."""
    return {f"User:{key.removeprefix('acl:')}" for key, marker in markers.items()
            if key.startswith("acl:") and marker_owner(marker) == owner}


def marked_topic_owner(markers: Mapping[str, str], topic: str) -> str | None:
    return marker_owner(markers.get(f"topic:{topic}"))


def reaching_acls(markers: Mapping[str, str], topic: str, owner: str) -> list[str]:
    """The projects other than `owner` whose acls' prefixed grants would reach `topic`."""
    return sorted({o for key, marker in markers.items() if key.startswith("acl:")
                   and (o := marker_owner(marker)) and o != owner and within_prefix(topic, o)})


def foreign_topics_in_reach(markers: Mapping[str, str], owner: str) -> list[str]:
    """Topics of other projects that `owner`'s prefixed grants would reach."""
    return sorted(key.removeprefix("topic:") for key, marker in markers.items() if key.startswith("topic:")
                  and (o := marker_owner(marker)) and o != owner and within_prefix(key.removeprefix("topic:"), owner))
