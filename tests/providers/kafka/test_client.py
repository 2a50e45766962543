"""The Kafka clients against the real local broker: the registry reader, and every way the broker can fail named."""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager

import confluent_kafka
import pytest
from pydantic import SecretStr

import providers.kafka.client
from devstack import scan, state
from providers.errors import EngineUnavailable
from providers.identity import Identity
from providers.kafka.client import MarkerView
from providers.kafka.owners import write_marker
from providers.kafka.topic import Topic
from providers.lifecycle import is_stale
from tests.providers.conftest import props, stopped_answering
from tests.providers.kafka.helpers import acl_inputs, instance, topic_inputs
from tools.engines import load
from tools.engines.ports import PORTS


def test_the_registry_reader_asks_the_broker_nothing_between_reads(topic, kadmin, owner, monkeypatch):
    """An assigned consumer fetches on its own while nothing is new, one request per fetch.wait.max.ms (some
    90 a second here), which cost the broker about 0.14 CPU-seconds per second for as long as a provider
    ran. The registry's reader is assigned only while it reads; the next read sees a marker written since."""
    fetches: list[int] = []  # the reader's Fetch requests so far, from librdkafka's statistics

    class CountingConsumer(confluent_kafka.Consumer):
        def __init__(self, config: dict) -> None:
            super().__init__({**config, "statistics.interval.ms": 100, "stats_cb": lambda stats: fetches.append(
                sum(b.get("req", {}).get("Fetch", 0) for b in json.loads(stats)["brokers"].values()))})

    monkeypatch.setattr(providers.kafka.client, "Consumer", CountingConsumer)
    view, key = MarkerView(instance(topic)), f"topic:{owner}"
    write_marker(instance(topic), key, "first")
    assert view.current(kadmin)[key] == "first"

    def fetched_by_now() -> int:
        time.sleep(0.3)  # a statistics interval or more, served by poll
        view._consumer.poll(0.1)
        return fetches[-1]

    before = fetched_by_now()
    time.sleep(1.0)
    assert fetched_by_now() - before <= 1
    write_marker(instance(topic), key, "second")
    assert view.current(kadmin)[key] == "second"


def test_engine_down_names_engine_address_and_fix(configure, owner):
    provider = configure(Topic())
    provider._instances["kafka"] = provider._instances["kafka"].model_copy(update={"port": 1})
    with pytest.raises(EngineUnavailable, match=r"kafka instance 'kafka' at 127\.0\.0\.1:1.*tools\.engines start kafka"):
        provider.create(topic_inputs(provider, owner))


@contextmanager
def broker_stalled():
    """The local broker stopped (SIGSTOP) with its connections open, as a machine that hangs. Kept short:
    under the broker's 9 s session, so it comes back with its registration whole."""
    pid = load("kafka").running_pid()
    assert pid, "the kafka engine is not running from this checkout (`python -m tools.engines start kafka`)"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_broker_that_stops_answering_after_the_connect_is_named_with_its_fix(topic, acl, owner, monkeypatch):
    """Every wait on it had failed as a bare TimeoutError or a raw KafkaException traceback, after 30 s."""
    outs = topic.create(topic_inputs(topic, owner)).outs
    acl_outs = acl.create(acl_inputs(acl, owner)).outs
    monkeypatch.setattr(providers.kafka.client, "REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(state, "configured_provider", lambda config, engine, kind: topic)
    stalled = stopped_answering("kafka", "kafka", PORTS["kafka"])
    wider = props("kafka", "kafka", "topic", "wide", owner, {"replicationFactor": 2})
    with broker_stalled():
        with pytest.raises(EngineUnavailable, match=stalled) as described:
            topic.read("id", outs)  # the topic's describe
        assert described.value.cause.endswith("(no answer within 1s)")
        with pytest.raises(EngineUnavailable, match=stalled):
            acl.read("id", acl_outs)  # the registry's metadata
        with pytest.raises(EngineUnavailable, match=stalled):
            topic.check({}, wider)  # the cluster's brokers, for a replication factor
        with pytest.raises(state.EngineError, match=stalled.removeprefix("cannot ")):
            state.drop_data({}, Identity.from_props(outs), {**outs, "purge": True})  # `devstack rm --purge-data`
        with pytest.raises(EngineUnavailable, match=stalled):
            scan.scan(instance(topic), {"topic"})  # `devstack resource gc`
    assert not is_stale(topic.read("id", outs).outs)  # nothing was lost meanwhile


def test_wrong_admin_password_says_the_credential_is_rejected(configure, owner):
    provider = configure(Topic())
    provider._instances["kafka"] = provider._instances["kafka"].model_copy(update={"admin_password": SecretStr("wrong")})
    with pytest.raises(EngineUnavailable, match="SASL authentication error.*admin credential in the stack config"):
        provider.create(topic_inputs(provider, owner))
