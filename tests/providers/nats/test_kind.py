"""What the NATS kinds share: replicas a single server cannot hold fail check."""

from __future__ import annotations

import pytest

from providers.lifecycle import is_stale
from tests.providers.conftest import props
from tests.providers.nats.helpers import checked, failures


pytestmark = pytest.mark.usefixtures("accounts")


@pytest.mark.parametrize("kind", ["stream", "kv"])
def test_replicas_a_single_server_cannot_hold_fail_check_before_the_replace_drops_anything(kind, stream, kv, owner, js):
    """A purging replacement deletes first: a new storage with replicas > 1 on this single server must
    stop at check (preview), not at the create after the messages are gone."""
    provider = {"stream": stream, "kv": kv}[kind]
    inputs = checked(provider, props("nats", "events", kind, owner, owner, purge=True))
    outs = provider.create(inputs).outs
    news = props("nats", "events", kind, owner, owner, {"storage": "memory", "replicas": 3}, purge=True)
    found = {f.property: f.reason for f in provider.check(inputs, news).failures}
    assert "3 replicas need a clustered server" in found["params.replicas"] and "not changed" in found["params.replicas"]
    assert not is_stale(provider.read("id", outs).outs)  # untouched
    checked(provider, {**news, "params": {"storage": "memory"}}, inputs)  # one replica: fine


@pytest.mark.parametrize("kind", ["stream", "kv"])
def test_a_new_one_with_replicas_a_single_server_cannot_hold_fails_check(kind, stream, kv, owner, js):
    """Said at the preview, not half-way through the up after the workspace's other creates."""
    provider = {"stream": stream, "kv": kv}[kind]
    found = failures(provider, props("nats", "events", kind, owner, owner, {"replicas": 3}))
    assert "3 replicas need a clustered server" in found["params.replicas"]
    assert f"the {kind} was not made (set replicas: 1)" in found["params.replicas"]
    checked(provider, props("nats", "events", kind, owner, owner, {"replicas": 1}))


@pytest.mark.parametrize("kind", ["stream", "kv"])
def test_replicas_changed_in_place_beyond_a_single_server_fail_check(kind, stream, kv, owner, js):
    """The update would fail part-way through an up, after other resources changed."""
    provider = {"stream": stream, "kv": kv}[kind]
    inputs = checked(provider, props("nats", "events", kind, owner, owner))
    outs = provider.create(inputs).outs
    news = props("nats", "events", kind, owner, owner, {"replicas": 2})
    found = {f.property: f.reason for f in provider.check(inputs, news).failures}
    assert "2 replicas need a clustered server" in found["params.replicas"]
    assert provider.diff("id", outs, checked(provider, props("nats", "events", kind, owner, owner), inputs)).changes is False
