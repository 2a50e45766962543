"""The nats `stream`, `consumer` and `kv` kinds against the real local nats-server (JetStream)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import threading
import time
from typing import Any, Awaitable, Callable, Iterator

import nats
import pytest
from pydantic import SecretStr
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DiscardPolicy, KeyValueConfig, RePublish, StorageType, StreamConfig, StreamConsumerLimits, StreamSource
from nats.js.errors import NotFoundError

from providers.base import KindProvider
from providers.errors import Conflict, DevstackError, EngineUnavailable, InvalidSpec, NotFound, Unsupported
from providers.nats import (API_TIMEOUT, STORE_ATTEMPTS, Account, Consumer, Kv, Stream, add_stream, admin_credential,
                            all_streams, observed, run_private, subject_within)
from providers.nats import run as nats_run
from providers.identity import PREFIXED
from tests.providers.conftest import props, stopped_answering

NATS_URL = "nats://127.0.0.1:24222"


@pytest.fixture(autouse=True)
def accounts(configure, owner) -> Iterator[list[str]]:
    """The projects whose accounts the test used, its owner's first: each dropped with purge at the end,
    and its streams (so its consumers and kv buckets) with it, so accounts do not pile up on the server."""
    used = [owner]
    yield used
    account = configure(Account())
    instance = account._instances["events"]

    async def empty(session) -> None:  # streams made by hand too: an account purge refuses unmarked ones
        for info in await all_streams(session.js):
            await session.js.delete_stream(info.config.name or "")

    for project in used:
        inputs = {**props("nats", "events", "account", project, project), "purge": True}
        if account.read("id", inputs).id:
            observed(instance, project, empty)
            account.delete("id", inputs)


@pytest.fixture
def js(admin, owner, accounts, configure) -> Callable[..., Any]:
    """Run one coroutine with devstack's admin JetStream context in a project's account (the test's owner's
    unless `project` names another): `js(lambda j: j.stream_info(name))`. The first call for a project
    makes its account when it has none, as a provider's first create does.

    A test's own streams go through the provider's add_stream, which tries again when a create meets the
    server's removal of the account's streams directory (a drop may just have emptied it)."""

    def call(work: Callable[[JetStreamContext], Awaitable[Any]], project: str | None = None) -> Any:
        project = project or owner
        if project not in made:
            account, inputs = configure(Account()), props("nats", "events", "account", project, project)
            if not account.read("id", inputs).id:  # an existing one keeps the limits the test gave it
                account.create(checked(account, inputs))
            made.add(project)
            if project not in accounts:
                accounts.append(project)

        async def main():
            nc = await nats.connect(NATS_URL, **admin_credential(admin["nats"].password, project),
                                    allow_reconnect=False, connect_timeout=5)
            try:
                return await work(nc.jetstream())
            finally:
                await nc.close()

        return run_private(main())

    made: set[str] = set()
    return call


def stream_config(js, name: str, project: str | None = None) -> StreamConfig | None:
    """The stream's config in project `project`'s account (the test's owner's by default), or None."""
    async def work(j):
        try:
            return (await j.stream_info(name)).config
        except NotFoundError:
            return None

    return js(work, project)


def consumer_config(js, stream: str, name: str, project: str | None = None) -> ConsumerConfig | None:
    async def work(j):
        try:
            return (await j.consumer_info(stream, name)).config
        except NotFoundError:
            return None

    return js(work, project)


@pytest.fixture
def stream(configure):
    return configure(Stream())


@pytest.fixture
def consumer(configure):
    return configure(Consumer())


@pytest.fixture
def kv(configure):
    return configure(Kv())


def checked(provider, inputs: dict, olds: dict | None = None) -> dict:
    """Inputs after check(), which must pass (it fills in owner-derived defaults)."""
    result = provider.check(olds or {}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def failures(provider, inputs: dict) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check({}, inputs).failures}


# --- pure rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "pattern", "inside"),
    [
        ("shop.orders", "shop.>", True),
        ("shop.>", "shop.>", True),
        ("shop.*.created", "shop.>", True),
        ("shop", "shop.>", False),
        (">", "shop.>", False),
        ("*.orders", "shop.>", False),
        ("shop.orders.x", "shop.orders.*", True),
        ("shop.*", "shop.orders", False),
        ("shopping.x", "shop.>", False),
    ],
    ids=["literal", "same-wildcard", "star-inside", "bare-prefix", "everything", "star-owner", "star-pattern",
         "star-vs-literal", "longer-owner"],
)
def test_subject_within(subject, pattern, inside):
    assert subject_within(subject, pattern) is inside


# --- stream -------------------------------------------------------------------------


def test_stream_create_then_create_again_adopts_without_change(stream, owner, js):
    inputs = checked(stream, props("nats", "events", "stream", owner, owner))
    first = stream.create(inputs)
    before = stream_config(js, owner)
    second = stream.create(inputs)  # run twice: adopted, nothing sent to the server
    assert first.id == second.id == f"nats/events/stream/{owner}@{owner}"
    assert {k: second.outs[k] for k in Stream.attributes} == {
        "host": "127.0.0.1", "port": 24222, "stream": owner, "subjects": f"{owner}.>"}
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
    assert stream.read("id", outs).id == ""


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
    assert provider.read("id", outs).id  # untouched
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


@pytest.mark.parametrize("kind, tampered", [
    ("stream", {"max_msgs_per_subject": 1, "discard": DiscardPolicy.NEW, "max_msg_size": 100, "max_consumers": 1}),
    ("kv", {"allow_rollup_hdrs": False, "discard": DiscardPolicy.OLD, "allow_direct": False}),
])
def test_settings_beyond_the_params_are_drift_and_put_back(kind, tampered, stream, kv, owner, js):
    """Set outside Pulumi they drop messages (one per subject), refuse them, or break the kv layout clients
    rely on (purging a key rolls it up): refresh reports configInSync false and the next up puts them back.
    What NATS cannot undo (deny purge, a seal) is refused, naming it."""
    provider = {"stream": stream, "kv": kv}[kind]
    name = owner if kind == "stream" else f"KV_{owner}"
    inputs = checked(provider, props("nats", "events", kind, owner, owner))
    outs = provider.create(inputs).outs
    before = stream_config(js, name)
    js(lambda j: j.update_stream(before.evolve(**tampered)))
    read = provider.read("id", outs).outs
    assert read["configInSync"] is False and provider.diff("id", read, inputs).changes
    repaired = provider.update("id", read, inputs).outs
    after = stream_config(js, name)
    assert {field: getattr(after, field) for field in tampered} == {field: getattr(before, field) for field in tampered}
    assert provider.read("id", repaired).outs["configInSync"] is True

    # A kv's roll-ups need purges: the server takes deny purge there only without them.
    js(lambda j: j.update_stream(after.evolve(deny_purge=True, allow_rollup_hdrs=False)))
    read = provider.read("id", repaired).outs
    assert read["configInSync"] is False
    with pytest.raises(Unsupported, match="it is set deny_purge .*which NATS cannot undo"):
        provider.update("id", read, inputs)


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


PRIVATE_USER, PRIVATE_SECRET = "boss", "pw-1"


@pytest.fixture
def private_server(tmp_path_factory) -> Iterator[Callable[..., tuple[int, Callable[[KindProvider], KindProvider]]]]:
    """`private_server(*flags, on_log=...)`: a nats-server of the test's own on a free loopback port, in operator
    mode with the operator of the admin secret pw-1 (as the engine's config has it), stopped at the end;
    `on_log` sees each line it logs as it logs it. Returns the port and `configured_kind(provider)`: the
    provider configured with that server as its instance `events`."""
    from providers import nats_auth
    from tests.conftest import configured
    from tools.engines.base import closed_port
    from tools.engines.nats import _binary, operator_config

    servers: list[subprocess.Popen] = []
    operator = nats_auth.Operator.from_secret(PRIVATE_SECRET)

    def start(*flags: str, on_log: Callable[[str], None] = lambda line: None):
        port, home = closed_port(), tmp_path_factory.mktemp("nats-server")
        config = operator_config(operator.operator_jwt(), nats_auth.public(operator.system),
                                 operator.system_account_jwt(), home / "accounts")
        (home / "accounts").mkdir()
        (home / "nats.json").write_text(json.dumps(config))
        server = subprocess.Popen([_binary(), "-c", str(home / "nats.json"), "-a", "127.0.0.1", "-p", str(port),
                                   *flags], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        servers.append(server)
        threading.Thread(target=lambda: [on_log(line) for line in server.stderr], daemon=True).start()
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)):
            assert time.monotonic() < deadline, f"the private nats-server on port {port} did not listen within 10s"
            time.sleep(0.05)
        shared = {"events": {"engine": "nats", "host": "127.0.0.1", "port": port, "adminUser": PRIVATE_USER,
                             "adminSecret": "natsAdmin"}}
        return port, lambda kind: configured(kind, {"shared": shared}, {"nats": PRIVATE_SECRET})

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=10)


def test_a_server_without_jetstream_is_named_by_the_provider_and_the_doctor(owner, private_server):
    """It had failed the up with a raw ServiceUnavailableError ('None') per resource, and passed the doctor."""
    from devstack import doctor
    from providers.instances import SharedInstance

    port, configured_kind = private_server()  # no -js
    provider = configured_kind(Stream())
    with pytest.raises(Unsupported, match="no JetStream answered.*start nats-server with -js"):
        provider.create(checked(provider, props("nats", "events", "stream", owner, owner)))
    instance = SharedInstance(name="events", engine="nats", host="127.0.0.1", port=port, adminUser=PRIVATE_USER,
                              adminSecret="natsAdmin", admin_password=SecretStr(PRIVATE_SECRET))
    health = doctor.check_instance(instance, ["stream"], local_port=None)
    assert (health.ok, health.admin) == (False, False) and "no JetStream answered" in health.problem
    assert "-js" in health.fix


@pytest.mark.parametrize("kind", [Stream, Kv])
@pytest.mark.parametrize("lasting", [False, True], ids=["passing", "lasting"])
def test_a_create_the_server_fails_to_store_is_tried_again(kind, lasting, owner, tmp_path, private_server):
    """The server fails a create with "error creating store for stream" when the create meets the server's
    removal of the account's emptied streams directory (CI hit it once, after a test deleted the account's
    last stream). A file where the account's streams directory goes fails a create the same way, and the
    server removes it with the failed stream's remains, as it does the directory: the next try succeeds. Put
    back after every failure, it fails them all: the error then says the server failed, not the declaration."""
    from providers import nats_auth

    account = nats_auth.public(nats_auth.Operator.from_secret(PRIVATE_SECRET).account_key(owner))
    blocker = tmp_path / "jetstream" / account / "streams"
    failures_logged = []

    def on_log(line: str) -> None:
        if "Stream create failed" in line:
            failures_logged.append(line)
            if lasting:
                time.sleep(0.02)  # the server removes the file just after it fails (its own goroutine) ...
                blocker.parent.mkdir(parents=True, exist_ok=True)  # ... and the account's directory with it
                blocker.touch()

    _, configured_kind = private_server("-js", "-sd", str(tmp_path), on_log=on_log)
    configured_kind(Account()).create(props("nats", "events", "account", owner, owner))  # its JetStream dir first
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.touch()
    provider = configured_kind(kind())
    inputs = checked(provider, props("nats", "events", provider.kind, owner, owner))
    if lasting:
        with pytest.raises(DevstackError, match=r"the server failed: error creating store for stream "
                                                r"\(the nats-server log says why; run the command again\)") as failed:
            provider.create(inputs)
        assert not isinstance(failed.value, InvalidSpec)
        deadline = time.monotonic() + 5  # the server logs the last failure as it answers: the log may lag
        while len(failures_logged) < STORE_ATTEMPTS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(failures_logged) == STORE_ATTEMPTS
    else:
        outs = provider.create(inputs).outs
        assert len(failures_logged) == 1
        assert provider.read("id", outs).outs["configInSync"] is True


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


def test_stream_name_too_long_is_invalid(owner):
    with pytest.raises(InvalidSpec, match="at most 255 characters"):
        Stream.engine_name("x" * 260, owner, naming=PREFIXED)


# --- consumer ------------------------------------------------------------------------


def consumer_inputs(consumer, owner: str, name: str = "worker", **params) -> dict:
    return checked(consumer, props("nats", "events", "consumer", name, owner, {"stream": owner, **params}))


@pytest.fixture
def owned_stream(stream, owner):
    return stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs


def test_consumer_create_then_create_again_adopts_without_change(consumer, owner, owned_stream, js):
    inputs = consumer_inputs(consumer, owner, filterSubject=f"{owner}.orders")
    first = consumer.create(inputs)
    before = consumer_config(js, owner, f"{owner}_worker")
    second = consumer.create(inputs)
    assert first.id == second.id == f"nats/events/consumer/worker@{owner}"
    assert {k: second.outs[k] for k in Consumer.attributes} == {
        "host": "127.0.0.1", "port": 24222, "stream": owner, "consumer": f"{owner}_worker"}
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
    assert consumer.read("id", outs).id == ""


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


# --- kv ------------------------------------------------------------------------------------


def kv_inputs(kv, owner: str, name: str | None = None, **params) -> dict:
    return checked(kv, props("nats", "events", "kv", name or owner, owner, params))


def test_kv_create_then_create_again_adopts_and_works_as_a_bucket(kv, owner, js):
    inputs = kv_inputs(kv, owner, history=3, ttl=3600)
    first = kv.create(inputs)
    before = stream_config(js, f"KV_{owner}")
    second = kv.create(inputs)
    assert first.id == second.id == f"nats/events/kv/{owner}@{owner}"
    assert {k: second.outs[k] for k in Kv.attributes} == {"host": "127.0.0.1", "port": 24222, "bucket": owner}
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
    assert kv.read("id", outs).id == ""


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


# --- engine down --------------------------------------------------------------------------


def test_engine_down_names_engine_address_and_fix(configure, owner):
    provider = configure(Stream())
    provider._instances["events"] = provider._instances["events"].model_copy(update={"port": 1})
    with pytest.raises(EngineUnavailable, match=r"nats instance 'events' at 127\.0\.0\.1:1.*tools\.engines start nats"):
        provider.create(checked(provider, props("nats", "events", "stream", owner, owner)))


def test_a_server_gone_in_the_middle_of_a_call_is_named_at_once(through_proxy, owner):
    """Not only at the connect, and not one API timeout later: a request in flight when the connection
    closes is the engine's error as soon as it closes."""
    instance, proxy = through_proxy(Stream(), "events")

    async def cut_then_ask(session):
        proxy.stall()  # the server cannot answer it before the cut (it had, now and then, in CI)
        reply = asyncio.ensure_future(session.js.stream_info(owner))  # in flight ...
        await asyncio.sleep(0)
        await asyncio.get_running_loop().run_in_executor(None, proxy.stop)  # ... when the server goes
        return await reply

    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=stopped_answering("nats", "events", proxy.port)):
        nats_run(instance, cut_then_ask)
    assert time.monotonic() - started < API_TIMEOUT / 2


def test_wrong_admin_password_says_the_credential_is_rejected(configure, owner):
    provider = configure(Stream())
    provider._instances["events"] = provider._instances["events"].model_copy(update={"admin_password": SecretStr("wrong")})
    with pytest.raises(EngineUnavailable, match="Authorization Violation.*admin secret is not the one the server trusts"):
        provider.create(checked(provider, props("nats", "events", "stream", owner, owner)))


def test_purge_never_drops_a_stream_relabelled_for_another_project(stream, owner, js):
    outs = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    live = stream_config(js, owner)
    js(lambda j: j.update_stream(live.evolve(metadata={**live.metadata, "devstack.owner": "intruder"})))
    assert stream.read("id", outs).id == ""  # another project's now: gone from this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was changed"):
        stream.update("id", outs, {**outs, "params": {**outs["params"], "max_age": 60}})
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was dropped"):
        stream.delete("id", {**outs, "purge": True})
    assert stream_config(js, owner) is not None


def test_memory_storage_stream(stream, owner, js):
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner, {"storage": "memory"})))
    assert stream_config(js, owner).storage == StorageType.MEMORY


@pytest.mark.parametrize("kind", [Stream, Kv])
@pytest.mark.parametrize("storage, resource, room", [("file", "storage", "file storage"), ("memory", "memory", "memory")])
def test_a_size_beyond_the_servers_room_names_max_bytes_and_makes_nothing(configure, owner, js, kind, storage,
                                                                          resource, room):
    """The server reserves maxBytes when it makes the stream and refuses more than it has ("insufficient
    storage resources available"); the refusal had named no field."""
    provider = configure(kind())
    inputs = checked(provider, props("nats", "events", provider.kind, owner, owner,
                                     {"storage": storage, "maxBytes": 10**15}))
    with pytest.raises(InvalidSpec, match=rf"the server refused: insufficient {resource} resources available "
                                          rf"\(params\.maxBytes is more than the server's {room} holds"):
        provider.create(inputs)
    assert stream_config(js, owner) is None and stream_config(js, f"KV_{owner}") is None
