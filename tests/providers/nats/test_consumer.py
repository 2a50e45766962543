"""The nats `consumer` kind against the real local nats-server (JetStream)."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import ConsumerConfig, StreamConfig, StreamConsumerLimits
from nats.js.errors import NotFoundError

from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.lifecycle import is_stale
from providers.nats.consumer import Consumer
from providers.nats.jetstream import add_stream
from tests.providers.conftest import props
from tests.providers.nats.helpers import checked, failures, stream_config
from tools.engines.ports import PORTS


pytestmark = pytest.mark.usefixtures("accounts")


def consumer_config(js, stream: str, name: str, project: str | None = None) -> ConsumerConfig | None:
    async def work(j):
        try:
            return (await j.consumer_info(stream, name)).config
        except NotFoundError:
            return None

    return js(work, project)


def consumer_inputs(consumer, owner: str, name: str = "worker", **params) -> dict:
    return checked(consumer, props("nats", "events", "consumer", name, owner, {"stream": owner, **params}))


@pytest.fixture
def owned_stream(stream, owner):
    return stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs


@pytest.mark.parametrize("ack", ["none", "all"])
def test_a_work_queue_takes_explicit_acks_only_as_validation_says(owner, js, ack):
    stream, consumer = {"retention": "workqueue"}, {"stream": "orders", "ackPolicy": ack}
    assert Consumer.misfit("stream", consumer, "orders", stream, owner)[0] == "params.ackPolicy"
    assert Consumer.misfit("stream", {**consumer, "ackPolicy": "explicit"}, "orders", stream, owner) is None
    js(lambda j: add_stream(j, StreamConfig(name=owner, subjects=[f"{owner}.>"], retention="workqueue")))
    with pytest.raises(nats.js.errors.APIError, match="explicit ack"):
        js(lambda j: j.add_consumer(owner, ConsumerConfig(durable_name="w", ack_policy=ack)))


@pytest.mark.parametrize("retention", ["workqueue", "limits"])
@pytest.mark.parametrize("pair", [(None, None), (None, "{o}.a"), ("{o}.a", "{o}.*"), ("{o}.a.>", "{o}.*.b"),
                                  ("{o}.a", "{o}.b")])
def test_consumers_of_one_stream_clash_where_the_server_refuses_the_second(owner, js, retention, pair):
    first, second = ({"stream": "orders", **({"filterSubject": s.format(o=owner)} if s else {})} for s in pair)
    declared = {("stream", "orders"): {"retention": retention}, ("consumer", "a"): first, ("consumer", "b"): second}
    clash = Consumer.clash("b", second, "a", first, owner, declared)
    js(lambda j: add_stream(j, StreamConfig(name=owner, subjects=[f"{owner}.>"], retention=retention)))
    js(lambda j: j.add_consumer(owner, ConsumerConfig(durable_name="a", filter_subject=first.get("filterSubject"))))
    try:
        js(lambda j: j.add_consumer(owner, ConsumerConfig(durable_name="b", filter_subject=second.get("filterSubject"))))
    except nats.js.errors.APIError as err:
        assert "workqueue" in str(err) and clash is not None and clash[0] == "params.filterSubject"
    else:
        assert clash is None
    assert Consumer.clash("b", {**second, "stream": "other"}, "a", first, owner, declared) is None


def test_consumer_create_then_create_again_adopts_without_change(consumer, owner, owned_stream, js):
    inputs = consumer_inputs(consumer, owner, filterSubject=f"{owner}.orders")
    first = consumer.create(inputs)
    before = consumer_config(js, owner, f"{owner}_worker")
    second = consumer.create(inputs)
    assert first.id == second.id == f"nats/events/consumer/worker@{owner}"
    assert {k: second.outs[k] for k in Consumer.attributes} == {
        "host": "127.0.0.1", "port": PORTS["nats"], "servers": None, "stream": owner, "consumer": f"{owner}_worker"}
    after = consumer_config(js, owner, f"{owner}_worker")
    assert after == before
    assert after.durable_name == f"{owner}_worker" and after.filter_subject == f"{owner}.orders"
    assert after.metadata["devstack.owner"] == owner
    assert Consumer.references == {"stream": "stream"}


def test_consumer_delivers_messages_of_its_filter(consumer, owner, owned_stream, js):
    consumer.create(consumer_inputs(consumer, owner, filterSubject=f"{owner}.orders"))

    async def work(j):
        await j.publish(f"{owner}.orders", b"o-1")
        await j.publish(f"{owner}.audit", b"a-1")
        sub = await j.pull_subscribe_bind(f"{owner}_worker", stream=owner)
        return [m.data for m in await sub.fetch(5, timeout=2)]

    assert js(work) == [b"o-1"]


def test_consumer_update_in_place_then_drift(consumer, owner, owned_stream, js):
    outs = consumer.create(consumer_inputs(consumer, owner, filterSubject=f"{owner}.orders")).outs
    news = consumer_inputs(consumer, owner, filterSubject=f"{owner}.payments", description="payments worker",
                           maxDeliver=5, ackWait=10)
    diff = consumer.diff("id", outs, news)
    assert diff.replaces == [] and diff.changes
    outs = consumer.update("id", outs, news).outs
    live = consumer_config(js, owner, f"{owner}_worker")
    assert (live.filter_subject, live.description, live.max_deliver, live.ack_wait) == (
        f"{owner}.payments", "payments worker", 5, 10)
    # Changed behind Pulumi's back: read reports it.
    js(lambda j: j.add_consumer(owner, live.evolve(max_deliver=9)))
    assert consumer.read("id", outs).outs["params"]["max_deliver"] == 9
    # Dropped behind Pulumi's back: blank id.
    js(lambda j: j.delete_consumer(owner, f"{owner}_worker"))
    assert is_stale(consumer.read("id", outs).outs)


@pytest.mark.parametrize("setting", [
    {"max_ack_pending": 1},  # one message in flight: the consumer stalls
    {"headers_only": True},  # messages arrive without their payload
    {"inactive_threshold": 5.0},  # the server deletes the durable consumer when idle
    {"backoff": [1.0, 2.0], "max_deliver": 3},
    {"sample_freq": "50%"},
], ids=lambda setting: next(iter(setting)))
def test_consumer_settings_beyond_its_params_are_drift_and_put_back(consumer, owner, owned_stream, js, setting):
    inputs = consumer_inputs(consumer, owner, maxDeliver=3)
    outs = consumer.create(inputs).outs
    assert outs["configInSync"] is True
    live = consumer_config(js, owner, f"{owner}_worker")
    js(lambda j: j.add_consumer(owner, live.evolve(**setting)))
    refreshed = consumer.read("id", outs).outs
    assert refreshed["configInSync"] is False
    assert consumer.diff("id", refreshed, inputs).changes is True
    assert consumer.update("id", refreshed, inputs).outs["configInSync"] is True
    assert consumer_config(js, owner, f"{owner}_worker") == live
    assert consumer.read("id", outs).outs["configInSync"] is True


def test_consumer_limits_set_on_the_stream_outside_are_its_drift_and_its_update_takes_them_off(
        stream, consumer, owner, js):
    """The server gives a stream's consumers its consumer_limits as defaults: an inactive threshold (idle
    durable consumers deleted) a consumer update could never override, or a max ack pending below the
    consumer's own, which refuses its create."""
    stream_inputs = checked(stream, props("nats", "events", "stream", owner, owner))
    stream_outs = stream.create(stream_inputs).outs
    inputs = consumer_inputs(consumer, owner)
    outs = consumer.create(inputs).outs
    live = stream_config(js, owner)
    js(lambda j: j.update_stream(live.evolve(consumer_limits=StreamConsumerLimits(inactive_threshold=3600.0))))
    with pytest.raises(Unsupported, match="has consumer limits set outside devstack.*pulumi refresh"):
        consumer.create(consumer_inputs(consumer, owner, name="late"))
    refreshed = stream.read("id", stream_outs).outs
    assert refreshed["configInSync"] is False and stream.diff("id", refreshed, stream_inputs).changes
    stream.update("id", refreshed, stream_inputs)  # Pulumi updates the stream before its consumers
    assert stream.read("id", stream_outs).outs["configInSync"] is True
    consumer.update("id", consumer.read("id", outs).outs, inputs)
    assert consumer.read("id", outs).outs["configInSync"] is True
    assert consumer_config(js, owner, f"{owner}_worker").inactive_threshold is None


@pytest.mark.parametrize(
    "params", [{"deliverPolicy": "new"}, {"ackPolicy": "all"}, {"stream": "other"}],
    ids=["deliver-policy", "ack-policy", "stream"],
)
def test_consumer_create_only_params_replace(consumer, owner, owned_stream, params):
    outs = consumer.create(consumer_inputs(consumer, owner)).outs
    news = checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": owner, **params}))
    (key,) = [k for k in news["params"] if news["params"][k] != outs["params"][k]]
    diff = consumer.diff("id", {**outs, "purge": True}, {**news, "purge": True})
    assert diff.replaces == [f"params.{key}"] and diff.delete_before_replace


def test_consumer_replace_as_pulumi_runs_it(consumer, owner, owned_stream, js):
    outs = consumer.create(consumer_inputs(consumer, owner)).outs
    news = consumer_inputs(consumer, owner, deliverPolicy="new")
    with pytest.raises(Unsupported, match='exists with params.deliverPolicy "all"'):
        consumer.create(news)  # adopting would need an in-place change the server refuses
    consumer.delete("id", {**outs, "purge": True})
    consumer.create(news)
    assert consumer_config(js, owner, f"{owner}_worker").deliver_policy == "new"


def test_consumer_retained_and_purged_delete(consumer, owner, owned_stream, js):
    outs = consumer.create(consumer_inputs(consumer, owner)).outs
    consumer.delete("id", outs)
    assert consumer_config(js, owner, f"{owner}_worker") is not None
    consumer.delete("id", {**outs, "purge": True})
    assert consumer_config(js, owner, f"{owner}_worker") is None
    assert stream_config(js, owner) is not None  # the stream is not the consumer's to drop
    consumer.delete("id", {**outs, "purge": True})


def test_foreign_consumer_in_the_stream_is_a_conflict_and_untouched(consumer, owner, owned_stream, js):
    js(lambda j: j.add_consumer(owner, ConsumerConfig(durable_name=f"{owner}_worker", max_deliver=3)))
    with pytest.raises(Conflict, match="devstack does not manage"):
        consumer.create(consumer_inputs(consumer, owner))
    assert consumer_config(js, owner, f"{owner}_worker").max_deliver == 3


def test_consumer_marked_for_another_project_is_a_conflict(consumer, owner, owned_stream, js):
    marker = {"devstack.managed-by": "devstack", "devstack.owner": "intruder", "devstack.stack": "x"}
    js(lambda j: j.add_consumer(owner, ConsumerConfig(durable_name=f"{owner}_worker", metadata=marker)))
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        consumer.create(consumer_inputs(consumer, owner))


def test_consumer_cannot_bind_to_a_stream_in_another_projects_account(consumer, stream, owner, js):
    """`<owner>`'s stream "b" names the engine object project `<owner>_b`'s default stream has, but that
    stream is in `<owner>_b`'s account, out of `<owner>`'s sight: the consumer's stream does not exist,
    and nothing is made in either account."""
    other = f"{owner}_b"
    stream.create(checked(stream, props("nats", "events", "stream", other, other)))
    with pytest.raises(NotFound, match=r"its stream 'b' \(" + other + r"\) does not exist"):
        consumer.create(checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": "b"})))
    assert consumer_config(js, other, f"{owner}_worker", project=other) is None
    assert stream_config(js, other) is None


def test_consumer_on_a_stream_marked_for_another_project_is_a_conflict(consumer, owner, js):
    marker = {"devstack.managed-by": "devstack", "devstack.owner": "intruder", "devstack.stack": "test"}
    js(lambda j: add_stream(j, StreamConfig(name=f"{owner}_b", subjects=[f"{owner}.b.>"], metadata=marker)))
    with pytest.raises(Conflict, match="does not belong to project"):
        consumer.create(checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": "b"})))
    assert consumer_config(js, f"{owner}_b", f"{owner}_worker") is None


def test_consumer_filter_outside_its_stream_is_refused_and_nothing_created(consumer, stream, owner, js):
    stream.create(checked(stream, props("nats", "events", "stream", "orders", owner)))
    inputs = checked(consumer, props("nats", "events", "consumer", "worker", owner,
                                     {"stream": "orders", "filterSubject": f"{owner}.audit"}))
    with pytest.raises(InvalidSpec, match="filterSubject .* is outside the subjects of stream"):
        consumer.create(inputs)
    assert consumer_config(js, f"{owner}_orders", f"{owner}_worker") is None


def test_consumer_update_outside_its_stream_says_update_and_changes_nothing(consumer, stream, owner, js):
    stream.create(checked(stream, props("nats", "events", "stream", "orders", owner)))
    made = consumer.create(checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": "orders"})))
    before = consumer_config(js, f"{owner}_orders", f"{owner}_worker")
    news = checked(consumer, props("nats", "events", "consumer", "worker", owner,
                                   {"stream": "orders", "filterSubject": f"{owner}.audit"}))
    with pytest.raises(InvalidSpec, match=r"cannot update consumer .*filterSubject .* is outside the subjects"):
        consumer.update(made.id, made.outs, news)
    assert consumer_config(js, f"{owner}_orders", f"{owner}_worker") == before


def test_consumer_without_its_stream_says_so(consumer, owner):
    with pytest.raises(NotFound, match="its stream 'missing'"):
        consumer.create(checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": "missing"})))


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({}, "params.stream", "Field required"),
        ({"stream": "{o}", "filterSubject": "other.orders"}, "params.filterSubject", "outside the project's subjects"),
        ({"stream": "a b"}, "params.stream", "names no declaration"),
        ({"stream": "{o}", "deliverPolicy": "sometimes"}, "params.deliverPolicy", "'all', 'last'"),
        ({"stream": "{o}", "ackWait": 0}, "params.ackWait", "greater than or equal to 1"),
    ],
    ids=["no-stream", "filter-other-prefix", "stream-name", "deliver-policy", "ack-wait"],
)
def test_consumer_bad_params_fail_check_naming_the_field(consumer, owner, params, field, reason):
    params = {k: v.format(o=owner) if isinstance(v, str) else v for k, v in params.items()}
    found = failures(consumer, props("nats", "events", "consumer", "worker", owner, params))
    assert field in found and reason in found[field], found
