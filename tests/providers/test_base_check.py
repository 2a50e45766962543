"""check asks the engine about what a change sets, and refuses it only for that (no engine here: the
question's answer is given)."""

from __future__ import annotations

from providers.kafka.topic import Topic
from tests.conftest import configured
from tests.providers.conftest import props
from tools.engines.ports import PORTS

SHARED = {"kafka": {"engine": "kafka", "host": "127.0.0.1", "port": PORTS["kafka"], "adminUser": "admin",
                    "adminSecret": "kafkaAdmin"}}
#: What a cluster with a broker down answers for every question: it cannot hold 3 replicas.
HELD_BACK = [("replication_factor", "3 replicas need as many brokers and the cluster has 2", "set it to at most 2")]


def topic(monkeypatch, asked: list) -> Topic:
    provider = configured(Topic(), {"shared": SHARED}, {"kafka": "secret"})
    monkeypatch.setattr(provider, "refusals", lambda instance, ident, spec: asked.append(spec) or HELD_BACK)
    return provider


def test_a_change_is_not_refused_for_a_value_it_keeps(monkeypatch):
    asked: list = []
    provider = topic(monkeypatch, asked)
    olds = provider.check({}, props("kafka", "kafka", "topic", "t", "p", {"replicationFactor": 3})).inputs
    news = props("kafka", "kafka", "topic", "t", "p", {"replicationFactor": 3, "config": {"retention.ms": 1000}})
    assert provider.check(olds, news).failures == []  # its replication factor stays: not this change's business
    assert len(asked) == 2  # the create, and the config change, were asked about


def test_a_new_resource_or_a_changed_value_is_refused_saying_what_was_not_done(monkeypatch):
    provider = topic(monkeypatch, [])
    created = provider.check({}, props("kafka", "kafka", "topic", "t", "p", {"replicationFactor": 3}))
    assert [(f.property, "the topic was not made" in f.reason) for f in created.failures] == [
        ("params.replicationFactor", True)]
    olds = {**created.inputs, "purge": True, "params": {**created.inputs["params"], "replication_factor": 1}}
    changed = provider.check(olds, props("kafka", "kafka", "topic", "t", "p", {"replicationFactor": 3}, purge=True))
    assert [(f.property, "the topic was not replaced" in f.reason) for f in changed.failures] == [
        ("params.replicationFactor", True)]
