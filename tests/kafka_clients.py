"""Kafka clients for tests: one message produced or consumed as a given principal would.

On the local broker's client listener (tools.engines.kafka.client_config), so
the broker's authentication and ACLs decide what a tenant may do.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer

from tests.waiting import eventually
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
        msg = next_message(consumer, TIMEOUT, f"a message or an error from {topic}")
        return msg.error() or msg.value()
    finally:
        consumer.close()


def next_message(consumer: Consumer, timeout: float, what: str) -> Message:
    """The consumer's next message or error, polled for up to `timeout` seconds."""
    def polled() -> list[Message] | None:
        msg = consumer.poll(0.5)
        return None if msg is None else [msg]  # a Message with an empty value is falsy

    return eventually(polled, timeout, what)[0]
