"""providers.nats.jetstream through the stream and kv kinds: the layout devstack keeps, a create
the server fails to store, and the API's refusals."""

from __future__ import annotations

import time

import pytest
from nats.js.api import DiscardPolicy

from providers.errors import DevstackError, InvalidSpec, Unsupported
from providers.nats.account import Account
from providers.nats.jetstream import STORE_ATTEMPTS
from providers.nats.kv import Kv
from providers.nats.stream import Stream
from tests.providers.conftest import props
from tests.providers.nats.helpers import PRIVATE_SECRET, checked, stream_config
from tests.waiting import eventually


pytestmark = pytest.mark.usefixtures("accounts")


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


@pytest.mark.parametrize("kind", [Stream, Kv])
@pytest.mark.parametrize("lasting", [False, True], ids=["passing", "lasting"])
def test_a_create_the_server_fails_to_store_is_tried_again(kind, lasting, owner, tmp_path, private_server):
    """The server fails a create with "error creating store for stream" when the create meets the server's
    removal of the account's emptied streams directory (CI hit it once, after a test deleted the account's
    last stream). A file where the account's streams directory goes fails a create the same way, and the
    server removes it with the failed stream's remains, as it does the directory: the next try succeeds. Put
    back after every failure, it fails them all: the error then says the server failed, not the declaration."""
    from providers.nats import auth as nats_auth

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
        # The server logs the last failure as it answers: the log may lag.
        eventually(lambda: len(failures_logged) >= STORE_ATTEMPTS, 5, f"{STORE_ATTEMPTS} store failures in the server's log")
        assert len(failures_logged) == STORE_ATTEMPTS
    else:
        outs = provider.create(inputs).outs
        assert len(failures_logged) == 1
        assert provider.read("id", outs).outs["configInSync"] is True


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
