"""The nats `kv` kind against the real local nats-server (JetStream)."""

from __future__ import annotations

import pytest
from nats.js.api import KeyValueConfig, RePublish

from providers.errors import Conflict, InvalidSpec, Unsupported
from providers.identity import PREFIXED
from providers.lifecycle import is_stale
from providers.nats.kv import Kv
from tests.providers.conftest import props
from tests.providers.nats.helpers import checked, failures, stream_config
from tools.engines.ports import PORTS


pytestmark = pytest.mark.usefixtures("accounts")


def kv_inputs(kv, owner: str, name: str | None = None, **params) -> dict:
    return checked(kv, props("nats", "events", "kv", name or owner, owner, params))


def test_kv_create_then_create_again_adopts_and_works_as_a_bucket(kv, owner, js):
    inputs = kv_inputs(kv, owner, history=3, ttl=3600)
    first = kv.create(inputs)
    before = stream_config(js, f"KV_{owner}")
    second = kv.create(inputs)
    assert first.id == second.id == f"nats/events/kv/{owner}@{owner}"
    assert {k: second.outs[k] for k in Kv.attributes} == {"host": "127.0.0.1", "port": PORTS["nats"], "servers": None, "bucket": owner}
    assert stream_config(js, f"KV_{owner}") == before
    assert (before.max_msgs_per_subject, before.max_age) == (3, 3600)
    assert before.metadata["devstack.owner"] == owner

    async def use(j):
        bucket = await j.key_value(owner)
        for value in (b"1", b"2", b"3", b"4"):
            await bucket.put("greeting", value)
        return (await bucket.get("greeting")).value, len(await bucket.history("greeting"))

    assert js(use) == (b"4", 3)


def test_kv_update_in_place_then_drift(kv, owner, js):
    outs = kv.create(kv_inputs(kv, owner)).outs
    news = kv_inputs(kv, owner, history=5, ttl=60, maxBytes=1_000_000)
    diff = kv.diff("id", outs, news)
    assert diff.replaces == [] and diff.changes
    outs = kv.update("id", outs, news).outs
    live = stream_config(js, f"KV_{owner}")
    assert (live.max_msgs_per_subject, live.max_age, live.max_bytes) == (5, 60, 1_000_000)
    js(lambda j: j.update_stream(live.evolve(max_msgs_per_subject=2)))
    assert kv.read("id", outs).outs["params"]["history"] == 2
    js(lambda j: j.delete_key_value(owner))
    assert is_stale(kv.read("id", outs).outs)


@pytest.mark.parametrize("change", ["subjects", "republish"])
def test_kv_taking_in_or_publishing_out_is_drift_and_removed(kv, owner, js, change):
    """A subject beyond its keys' (another project's messages land in the bucket) or a republish
    (its values sent to another project's subjects): read reports it, the next update takes it out,
    and the bucket still works as one."""
    other = f"{owner}x"
    inputs = kv_inputs(kv, owner)
    outs = kv.create(inputs).outs
    assert outs["configInSync"] is True and kv.read("id", outs).outs["configInSync"] is True
    live = stream_config(js, f"KV_{owner}")
    leak = ({"subjects": [*live.subjects, f"{other}.>"]} if change == "subjects"
            else {"republish": RePublish(src=f"$KV.{owner}.>", dest=f"{other}.leak.>")})
    js(lambda j: j.update_stream(live.evolve(**leak)))
    refreshed = kv.read("id", outs).outs
    assert refreshed["configInSync"] is False
    diff = kv.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    kv.update("id", refreshed, inputs)
    live = stream_config(js, f"KV_{owner}")
    assert live.subjects == [f"$KV.{owner}.>"] and not live.republish
    assert kv.read("id", outs).outs["configInSync"] is True

    async def use(j):
        bucket = await j.key_value(owner)
        await bucket.put("k", b"v")
        return (await bucket.get("k")).value

    assert js(use) == b"v"


def test_kv_storage_replaces(kv, owner):
    outs = kv.create(kv_inputs(kv, owner)).outs
    news = kv_inputs(kv, owner, storage="memory")
    assert kv.diff("id", {**outs, "purge": True}, {**news, "purge": True}).replaces == ["params.storage"]
    with pytest.raises(Unsupported, match='exists with params.storage "file"'):
        kv.create(news)


def test_kv_retained_and_purged_delete(kv, owner, js):
    outs = kv.create(kv_inputs(kv, owner)).outs

    async def put(j):
        await (await j.key_value(owner)).put("k", b"v")

    js(put)
    kv.delete("id", outs)
    assert js(lambda j: j.stream_info(f"KV_{owner}")).state.messages == 1
    kv.delete("id", {**outs, "purge": True})
    assert stream_config(js, f"KV_{owner}") is None
    kv.delete("id", {**outs, "purge": True})


def test_foreign_kv_bucket_is_a_conflict_and_untouched(kv, owner, js):
    js(lambda j: j.create_key_value(KeyValueConfig(bucket=owner, history=2)))
    before = stream_config(js, f"KV_{owner}")
    with pytest.raises(Conflict, match="devstack does not manage"):
        kv.create(kv_inputs(kv, owner, history=7))
    assert stream_config(js, f"KV_{owner}") == before


def test_kv_buckets_of_two_projects_with_one_name_live_apart_in_their_accounts(kv, owner, js):
    """Project `<owner>_cache`'s default bucket and `<owner>`'s "cache" share an engine name; each lives in
    its project's account, with its own marker and values."""
    mine = kv.create(kv_inputs(kv, owner, name="cache")).outs
    other = f"{owner}_cache"
    theirs = kv.create(kv_inputs(kv, other)).outs
    assert mine["bucket"] == theirs["bucket"] == other

    async def put_get(j, value: bytes):
        bucket = await j.key_value(other)
        await bucket.put("k", value)
        return (await bucket.get("k")).value

    assert js(lambda j: put_get(j, b"mine")) == b"mine"
    assert js(lambda j: put_get(j, b"theirs"), other) == b"theirs"
    assert stream_config(js, f"KV_{other}").metadata["devstack.owner"] == owner
    assert stream_config(js, f"KV_{other}", project=other).metadata["devstack.owner"] == other
    assert js(lambda j: j.stream_info(f"KV_{other}")).state.messages == 1


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"history": 65}, "params.history", "less than or equal to 64"),
        ({"ttl": -1}, "params.ttl", "greater than or equal to 0"),
        ({"storage": "disk"}, "params.storage", "'file' or 'memory'"),
    ],
    ids=["history", "ttl", "storage"],
)
def test_kv_bad_params_fail_check_naming_the_field(kv, owner, params, field, reason):
    found = failures(kv, props("nats", "events", "kv", owner, owner, params))
    assert field in found and reason in found[field], found


def test_kv_bucket_name_rules(owner):
    with pytest.raises(InvalidSpec, match="no '.'"):
        Kv.engine_name("my.cache", owner, naming=PREFIXED)
    with pytest.raises(InvalidSpec, match="at most 252"):
        Kv.engine_name("x" * 260, owner, naming=PREFIXED)
