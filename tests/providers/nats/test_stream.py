"""The nats `stream` kind against the real local nats-server (JetStream)."""

from __future__ import annotations

import re

import nats
import pytest
from nats.js.api import RePublish, StorageType, StreamConfig, StreamSource

from providers.errors import Conflict, InvalidSpec, Unsupported
from providers.identity import PREFIXED
from providers.lifecycle import is_stale
from providers.nats.consumer import Consumer
from providers.nats.jetstream import add_stream
from providers.nats.stream import Stream
from tests.providers.conftest import props
from tests.providers.nats.helpers import checked, failures, stream_config
from tools.engines.ports import PORTS


pytestmark = pytest.mark.usefixtures("accounts")


def test_stream_create_then_create_again_adopts_without_change(stream, owner, js):
    inputs = checked(stream, props("nats", "events", "stream", owner, owner))
    first = stream.create(inputs)
    before = stream_config(js, owner)
    second = stream.create(inputs)  # run twice: adopted, nothing sent to the server
    assert first.id == second.id == f"nats/events/stream/{owner}@{owner}"
    assert {k: second.outs[k] for k in Stream.attributes} == {
        "host": "127.0.0.1", "port": PORTS["nats"], "servers": None, "stream": owner, "subjects": f"{owner}.>"}
    after = stream_config(js, owner)
    assert after == before
    assert after.metadata["devstack.owner"] == owner
    assert after.metadata["devstack.managed-by"] == "devstack"
    assert after.metadata["devstack.stack"] == "test"


def test_named_streams_get_their_own_subjects_and_coexist(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", "orders", owner))).outs
    stream.create(checked(stream, props("nats", "events", "stream", "audit", owner)))
    assert (outs["stream"], outs["subjects"]) == (f"{owner}_orders", f"{owner}.orders.>")
    assert stream_config(js, f"{owner}_audit").subjects == [f"{owner}.audit.>"]
    # The default stream takes the whole prefix, so it cannot share it: a clear refusal, nothing created.
    with pytest.raises(InvalidSpec, match="subjects overlap .* give each stream its own subjects"):
        stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    assert stream_config(js, owner) is None


def test_an_update_the_server_refuses_says_update_and_changes_nothing(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    news = checked(stream, props("nats", "events", "stream", owner, owner, {"maxMsgs": 10}), outs)
    news["params"]["replicas"] = 3  # past check, which refuses it (a provider called by hand, say)
    with pytest.raises(InvalidSpec, match=f"cannot update stream .*@{owner}: the server refused"):
        stream.update("id", outs, news)
    assert stream_config(js, owner).max_msgs == -1


def test_stream_update_in_place_then_drift(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    params = {"subjects": [f"{owner}.a.>", f"{owner}.b"], "maxAge": 60, "maxBytes": 1_000_000, "maxMsgs": 10}
    news = checked(stream, props("nats", "events", "stream", owner, owner, params), outs)
    diff = stream.diff("id", outs, news)
    assert diff.replaces == [] and diff.changes
    outs = stream.update("id", outs, news).outs
    live = stream_config(js, owner)
    assert (live.subjects, live.max_age, live.max_bytes, live.max_msgs) == ([f"{owner}.a.>", f"{owner}.b"], 60, 1_000_000, 10)
    assert outs["subjects"] == f"{owner}.a.>,{owner}.b"
    # Changed behind Pulumi's back: read shows the live value and the next diff is an update.
    js(lambda j: j.update_stream(live.evolve(max_msgs=99)))
    refreshed = stream.read("id", outs).outs
    assert refreshed["params"]["max_msgs"] == 99
    assert stream.diff("id", refreshed, news).replaces == [] and stream.diff("id", refreshed, news).changes
    # Dropped behind Pulumi's back: read returns a blank id.
    js(lambda j: j.delete_stream(owner))
    assert is_stale(stream.read("id", outs).outs)


def test_stream_copying_in_or_publishing_out_is_drift_and_removed(stream, owner, js):
    """Sources (another project's stream copied in) and republish (messages sent to its subjects)
    cross the project's boundary: read reports them, the next update takes them out."""
    other = f"{owner}x"
    js(lambda j: add_stream(j, StreamConfig(name=other, subjects=[f"{other}.>"])))
    try:
        inputs = checked(stream, props("nats", "events", "stream", owner, owner))
        outs = stream.create(inputs).outs
        assert outs["configInSync"] is True and stream.read("id", outs).outs["configInSync"] is True
        live = stream_config(js, owner)
        js(lambda j: j.update_stream(live.evolve(sources=[StreamSource(name=other)],
                                                 republish=RePublish(src=">", dest=f"{other}.injected.>"))))
        refreshed = stream.read("id", outs).outs
        assert refreshed["configInSync"] is False
        diff = stream.diff("id", refreshed, inputs)
        assert diff.changes and diff.replaces == []
        stream.update("id", refreshed, inputs)
        live = stream_config(js, owner)
        assert not live.sources and not live.republish
        assert stream.read("id", outs).outs["configInSync"] is True
    finally:
        js(lambda j: j.delete_stream(other))


@pytest.mark.parametrize("param, value", [("retention", "workqueue"), ("storage", "memory")])
def test_stream_retention_and_storage_replace(stream, owner, js, param, value):
    inputs = checked(stream, props("nats", "events", "stream", owner, owner, purge=True))
    outs = stream.create(inputs).outs
    news = checked(stream, props("nats", "events", "stream", owner, owner, {param: value}, purge=True), outs)
    diff = stream.diff("id", outs, news)
    assert diff.replaces == [f"params.{param}"] and diff.delete_before_replace
    # Adopting the old stream under the new spec refuses and names the field and its live value.
    with pytest.raises(Unsupported, match=f"{param} .* cannot change in place"):
        stream.create(news)
    # The replacement as Pulumi runs it: purge-delete the old, create the new.
    stream.delete("id", {**outs, "purge": True})
    stream.create(news)
    assert getattr(stream_config(js, owner), param) == value


def test_stream_retained_delete_keeps_messages_and_purged_delete_drops(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    js(lambda j: j.publish(f"{owner}.orders", b"order-1", stream=owner))
    stream.delete("id", outs)  # purge not asked for
    assert stream_config(js, owner) is not None
    assert js(lambda j: j.stream_info(owner)).state.messages == 1
    stream.delete("id", {**outs, "purge": True})
    assert stream_config(js, owner) is None
    stream.delete("id", {**outs, "purge": True})  # already gone is fine


def test_streams_of_two_projects_with_one_name_live_apart_in_their_accounts(stream, owner, js):
    """Project `<owner>` declares "b" -> `<owner>_b`; project `<owner>_b`'s default stream maps there too.
    Each project's stream lives in its own account, so both exist, each with its own marker, and neither
    sees the other's."""
    stream.create(checked(stream, props("nats", "events", "stream", "b", owner)))
    before = stream_config(js, f"{owner}_b")
    other = f"{owner}_b"
    made = stream.create(checked(stream, props("nats", "events", "stream", other, other))).outs
    assert made["stream"] == other
    assert stream_config(js, f"{owner}_b") == before
    assert before.metadata["devstack.owner"] == owner
    theirs = stream_config(js, other, project=other)
    assert theirs.metadata["devstack.owner"] == other and theirs != before
    stream.delete("id", {**made, "purge": True})  # B's purge drops B's stream, not A's of the same name
    assert stream_config(js, other, project=other) is None
    assert stream_config(js, f"{owner}_b") == before


def test_foreign_stream_is_a_conflict_and_untouched(stream, owner, js):
    js(lambda j: add_stream(j, StreamConfig(name=owner, subjects=[f"{owner}.>"])))
    before = stream_config(js, owner)
    with pytest.raises(Conflict, match="devstack does not manage"):
        stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    assert stream_config(js, owner) == before
    assert not any(k.startswith("devstack.") for k in before.metadata)


@pytest.mark.parametrize(
    ("name", "params", "field", "reason"),
    [
        ("{o}", {"subjects": ["other.>"]}, "params.subjects", "outside the project's subjects"),
        ("{o}", {"subjects": [">"]}, "params.subjects", "outside the project's subjects"),
        ("{o}", {"subjects": ["{o}"]}, "params.subjects", "outside the project's subjects"),
        ("{o}", {"subjects": ["{o}.a.>.b"]}, "params.subjects", "'>' may only be the last token"),
        ("{o}", {"subjects": ["{o}..a"]}, "params.subjects", "no empty tokens"),
        ("{o}", {"subjects": []}, "params.subjects", "at least 1 item"),
        ("Orders", {}, "name", "lowercase"),
        ("a.b", {}, "name", "no '.', '\\*', '>'"),
        ("a b", {}, "name", "names use letters"),
        ("{o}", {"maxBytes": -2}, "params.maxBytes", "greater than or equal to -1"),
        ("{o}", {"retention": "forever"}, "params.retention", "'limits', 'interest' or 'workqueue'"),
        ("{o}", {"replica": 1}, "params.replica", "Extra inputs are not permitted"),
    ],
    ids=["other-prefix", "everything", "bare-owner", "inner-gt", "empty-token", "no-subjects", "uppercase",
         "dot", "space", "max-bytes", "retention", "unknown-param"],
)
def test_stream_bad_params_fail_check_naming_the_field(stream, owner, name, params, field, reason):
    params = {k: ([s.format(o=owner) for s in v] if k == "subjects" else v) for k, v in params.items()}
    found = failures(stream, props("nats", "events", "stream", name.format(o=owner), owner, params))
    assert field in found and re.search(reason, found[field]), found


def test_a_project_cannot_claim_another_projects_subjects(stream, owner, js):
    """The NATS tenant check: B's declarations naming A's subjects are refused before anything is created."""
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    other = f"{owner}x"  # shares A's name as a string prefix, not its subject prefix
    for subjects in ([f"{owner}.orders"], [f"{owner}.>"], ["*.orders"], [">"]):
        found = failures(stream, props("nats", "events", "stream", other, other, {"subjects": subjects}))
        assert "outside the project's subjects" in found["params.subjects"], subjects
    consumer = Consumer()
    found = failures(consumer, props("nats", "events", "consumer", "spy", other, {"stream": other, "filterSubject": f"{owner}.orders"}))
    assert "outside the project's subjects" in found["params.filterSubject"]
    assert stream_config(js, other, project=other) is None


@pytest.mark.parametrize("pair", [("{o}.*.x", "{o}.a.*"), ("{o}.a", "{o}.*"), ("{o}.a", "{o}.a"), ("{o}.a.>", "{o}.*.b")])
def test_subjects_overlapping_within_a_stream_are_refused_by_check_as_by_the_server(stream, owner, js, pair):
    subjects = [s.format(o=owner) for s in pair]
    found = failures(stream, props("nats", "events", "stream", owner, owner, {"subjects": subjects}))
    assert "overlap: list each subject once" in found["params.subjects"]
    with pytest.raises(nats.js.errors.APIError, match="overlaps with"):
        js(lambda j: j.add_stream(name=owner, subjects=subjects))
    assert failures(stream, props("nats", "events", "stream", owner, owner, {"subjects": subjects[:1]})) == {}


def test_subjects_another_live_stream_holds_fail_check_as_the_server_would_refuse_them(stream, owner, js):
    """A renamed stream's old one lives until the end of the up (Pulumi makes the new one first), and a
    removed, retained one for good: validation sees neither, and the create failed part-way through the up."""
    held = [f"{owner}.orders.>"]
    made = stream.create(checked(stream, props("nats", "events", "stream", "orders", owner, {"subjects": held}))).outs
    found = failures(stream, props("nats", "events", "stream", "order-events", owner, {"subjects": held}))
    assert f"overlaps {held[0]!r} of stream {owner}_orders on the server" in found["params.subjects"]
    assert "the stream was not made" in found["params.subjects"] and "purge: true" in found["params.subjects"]
    with pytest.raises(nats.js.errors.APIError, match="overlap with an existing stream"):  # what the up met
        js(lambda j: j.add_stream(name=f"{owner}_order-events", subjects=[f"{owner}.orders.new"]))
    # Its own subjects are no obstacle to the stream itself (a re-check, an adoption), nor others' to disjoint ones.
    assert failures(stream, props("nats", "events", "stream", "orders", owner, {"subjects": held})) == {}
    assert failures(stream, props("nats", "events", "stream", "order-events", owner,
                                  {"subjects": [f"{owner}.order-events.>"]})) == {}
    # Moved onto another live stream's subjects in place: refused too, the stream unchanged.
    others = checked(stream, props("nats", "events", "stream", "audit", owner, {"subjects": [f"{owner}.audit"]}))
    stream.create(others)
    news = props("nats", "events", "stream", "audit", owner, {"subjects": [f"{owner}.audit", f"{owner}.orders.x"]})
    found = {f.property: f.reason for f in stream.check(others, news).failures}
    assert f"of stream {owner}_orders" in found["params.subjects"] and "was not changed" in found["params.subjects"]
    assert stream_config(js, f"{owner}_audit").subjects == [f"{owner}.audit"]
    assert stream.read("id", made).outs["subjects"] == held[0]


def test_stream_name_too_long_is_invalid(owner):
    with pytest.raises(InvalidSpec, match="at most 255 characters"):
        Stream.engine_name("x" * 260, owner, naming=PREFIXED)


def test_purge_never_drops_a_stream_relabelled_for_another_project(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    live = stream_config(js, owner)
    js(lambda j: j.update_stream(live.evolve(metadata={**live.metadata, "devstack.owner": "intruder"})))
    assert is_stale(stream.read("id", outs).outs)  # another project's now: stale in this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was changed"):
        stream.update("id", outs, {**outs, "params": {**outs["params"], "max_age": 60}})
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was dropped"):
        stream.delete("id", {**outs, "purge": True})
    assert stream_config(js, owner) is not None


def test_memory_storage_stream(stream, owner, js):
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner, {"storage": "memory"})))
    assert stream_config(js, owner).storage == StorageType.MEMORY
