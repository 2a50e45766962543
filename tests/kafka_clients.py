"""Kafka clients for tests: one message produced or consumed as a given principal would.

On the local broker's client listener (tools.engines.kafka.client_config), so
the broker's authentication and ACLs decide what a tenant may do.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from tools.engines.kafka import client_config

TIMEOUT = 30


def settings(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {**client_config(user, password, mechanism), "log_level": 0}


def produce(user: str, password: str, topic: str, value: bytes = b"m") -> KafkaError | None:
    """Produce one message; the delivery error, or None when delivered."""
    reports: list = []
    producer = Producer({**settings(user, password), "message.timeout.ms": 15000})
    producer.produce(topic, value, on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(20)
    assert reports, "no delivery report within 20s"
    return reports[0]


def consume_one(user: str, password: str, topic: str, group: str) -> bytes | KafkaError:
    """The first message from the beginning of the topic, or the first error."""
    consumer = Consumer({**settings(user, password), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error() or msg.value()
        raise AssertionError(f"nothing consumed from {topic} within {TIMEOUT}s")
    finally:
        consumer.close()
