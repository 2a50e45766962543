"""`devstack doctor`'s check of a Kafka cluster: the admin principal logs in and the cluster answers."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from providers.engine import PROBE_TIMEOUT, NoAnswer, Probed, Rejected
from providers.instances import SharedInstance
from providers.kafka.client import client_settings, unavailable


def probe(instance: SharedInstance) -> Probed:
    problems: list[KafkaError] = []
    admin = AdminClient({**client_settings(instance), "error_cb": problems.append})
    refused = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
    deadline = time.monotonic() + 2 * PROBE_TIMEOUT
    while True:  # short rounds, so a refused login ends the wait at once
        try:
            admin.list_topics(timeout=0.5)
            break
        except KafkaException as err:
            admin.poll(0.1)  # delivers error_cb, where a refused login shows up
            rejected = [p for p in problems if p.code() in refused]
            if rejected:
                raise Rejected(rejected[-1].str()) from err
            handshake = [p for p in problems if p.code() == KafkaError._SSL]
            if handshake:  # not the broker's fault: the instance's TLS settings, said at once
                raise unavailable(instance, handshake[-1].str(), tls_failed=True) from err
            if time.monotonic() > deadline:
                raise NoAnswer(f"no answer within {2 * PROBE_TIMEOUT:.0f}s: "
                               f"{err.args[0].str() if err.args else err}") from err
    # Brokers do not report their release over the protocol; the workspace says which it is.
    return Probed(f"{instance.version} (declared)" if instance.version else "unknown (brokers do not report it)")
