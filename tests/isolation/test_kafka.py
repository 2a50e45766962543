"""Kafka: project A's SCRAM principal (KAFKA_* as `devstack env` gives them) against B's topic and group.

A's acl grants its principal what the project declared on topics and
consumer groups named `<project>` or `<project>.*`; the broker answers
everything on B's (fetch, produce, metadata, describe, delete, offsets)
with TOPIC_ or GROUP_AUTHORIZATION_FAILED, and ACL changes with
CLUSTER_AUTHORIZATION_FAILED (a tenant's principal has no cluster rights).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer,
                             TopicCollection)
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewPartitions, NewTopic,
                                   ResourcePatternType, ResourceType)

from tests.isolation.conftest import Matrix, Op, Tenants, cases
from tests.kafka_clients import next_message

ENGINE = "kafka"
#: Seconds any one broker answer may take.
WAIT = 30
DENIALS = {KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
           KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP_AUTHORIZATION_FAILED",
           KafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER_AUTHORIZATION_FAILED"}


def settings(tenants: Tenants, project: str) -> dict[str, Any]:
    """`project`'s service's client settings, as its KAFKA_* variables give them (the local listener is
    SASL over plaintext)."""
    env = tenants.env(project, ENGINE)
    return {"bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": env["KAFKA_SASL_MECHANISM"], "sasl.username": env["KAFKA_SASL_USERNAME"],
            "sasl.password": env["KAFKA_SASL_PASSWORD"], "log_level": 0}


def topic(tenants: Tenants, project: str) -> str:
    return tenants.env(project, ENGINE)["KAFKA_TOPIC"]


def group(tenants: Tenants, project: str) -> str:
    """A consumer group within the project's prefix (its acl's grants cover it)."""
    return f"{tenants.resource(project, f'kafka/acl/{project}')['prefix']}iso"


def denied(err: BaseException) -> str | None:
    code = err.args[0].code() if isinstance(err, KafkaException) and isinstance(err.args[0], KafkaError) else None
    return DENIALS.get(code)


def produce(tenants: Tenants, project: str, name: str) -> None:
    """One message to `name` with `project`'s principal; KafkaException with the delivery error."""
    reports: list = []
    producer = Producer({**settings(tenants, project), "message.timeout.ms": WAIT * 1000})
    producer.produce(name, project.encode(), on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(WAIT + 5)
    assert reports, f"no delivery report for {name} within {WAIT + 5}s"
    if reports[0] is not None:
        raise KafkaException(reports[0])


@pytest.fixture(scope="module")
def seeded(tenants: Tenants) -> Tenants:
    """Each project's service produces one message to its own topic with its own principal."""
    for project in (tenants.a, tenants.b):
        produce(tenants, project, topic(tenants, project))
    return tenants


def admin_of_a(tenants: Tenants) -> AdminClient:
    return AdminClient(settings(tenants, tenants.a))


def settle(admin: AdminClient, futures: dict) -> None:
    """Wait for every future of `admin` (kept referenced until then: a collected client fails its futures)."""
    for future in futures.values():
        future.result(timeout=WAIT)


def consume(tenants: Tenants, target: str) -> None:
    """A reads the target's topic from the beginning in a group of its own prefix: the first message is the
    target's seed, or the consumer's error is raised."""
    name = topic(tenants, target)
    consumer = Consumer({**settings(tenants, tenants.a), "group.id": group(tenants, tenants.a),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([name])
        msg = next_message(consumer, WAIT, f"a message or an error from {name}")
        if msg.error():
            raise KafkaException(msg.error())
        assert msg.value() == target.encode()
    finally:
        consumer.close()


def metadata(tenants: Tenants, target: str) -> None:
    name = topic(tenants, target)
    found = admin_of_a(tenants).list_topics(topic=name, timeout=WAIT).topics[name]
    if found.error is not None:
        raise KafkaException(found.error)


def describe(tenants: Tenants, target: str) -> None:
    name = topic(tenants, target)
    settle(admin := admin_of_a(tenants), admin.describe_topics(TopicCollection([name]), request_timeout=WAIT))


def group_offsets(tenants: Tenants, target: str) -> None:
    settle(admin := admin_of_a(tenants), admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group(tenants, target))], request_timeout=WAIT))


def delete_scratch(tenants: Tenants, target: str) -> None:
    """A makes a topic within the target's prefix and deletes it (A's acl grants create and delete on its own)."""
    admin = admin_of_a(tenants)
    name = f"{tenants.resource(target, f'kafka/acl/{target}')['prefix']}scratch"
    settle(admin, admin.create_topics([NewTopic(name, 1, 1)], request_timeout=WAIT))
    settle(admin, admin.delete_topics([name], request_timeout=WAIT))


def delete(tenants: Tenants, target: str) -> None:
    settle(admin := admin_of_a(tenants), admin.delete_topics([topic(tenants, target)], request_timeout=WAIT))


def grant_self(tenants: Tenants, target: str) -> None:
    """An ACL letting A's principal read the target's topic."""
    binding = AclBinding(ResourceType.TOPIC, topic(tenants, target), ResourcePatternType.LITERAL,
                         f"User:{tenants.env(tenants.a, ENGINE)['KAFKA_SASL_USERNAME']}", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    settle(admin := admin_of_a(tenants), admin.create_acls([binding], request_timeout=WAIT))


def add_partitions(tenants: Tenants, target: str) -> None:
    settle(admin := admin_of_a(tenants),
           admin.create_partitions([NewPartitions(topic(tenants, target), 2)], request_timeout=WAIT))



OPS = [
    Op("read: consume", consume),
    Op("read: group offsets", group_offsets),
    Op("write: produce", lambda tenants, target: produce(tenants, tenants.a, topic(tenants, target))),
    Op("list: topic metadata", metadata),
    Op("list: DescribeTopics", describe),
    Op("write+delete: topic in prefix", delete_scratch),
    Op("delete: DeleteTopics existing", delete, own=False),
    Op("administer: CreateAcls", grant_self, own=False),
    Op("administer: CreatePartitions", add_partitions, own=False),
]


@pytest.mark.parametrize("op,target", cases(OPS))
def test_kafka(seeded: Tenants, matrix: Matrix, op: Op, target: str) -> None:
    matrix.run(ENGINE, seeded, op, target, denied)
