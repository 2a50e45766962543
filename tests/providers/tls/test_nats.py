"""NATS over TLS: each kind's lifecycle against the nats-server that serves TLS only, the `user` kind's
exports logging in over a verified `tls://` connection, and a wrong CA or server name said at once."""

from __future__ import annotations

import re
import ssl
import time

import nats
import pytest
from nats.aio.client import RawCredentials
from nats.js.errors import NotFoundError

from components.templates import engine_template
from providers.errors import EngineUnavailable
from providers.lifecycle import is_stale
from providers.nats.account import Account
from providers.nats.consumer import Consumer
from providers.nats.kv import Kv
from providers.nats.session import run_private
from providers.nats.stream import Stream
from providers.nats.user import User
from tests.conftest import configured
from tests.providers.conftest import props
from tests.providers.tls.conftest import CA, OFFSET
from tools.engines.base import TlsFiles
from tools.engines.nats import tls_answers
from tools.engines.ports import PORTS

ADDRESS = f"127.0.0.1:{PORTS['nats'] + OFFSET}"
KINDS = {"account": Account, "stream": Stream, "consumer": Consumer, "kv": Kv, "user": User}


def checked(provider, kind: str, name: str, owner: str, params: dict | None = None, **policy) -> dict:
    result = provider.check({}, props("nats", "events", kind, name, owner, params, **policy))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def exports(provider, kind: str, outs: dict) -> dict[str, str]:
    """The kind's exports as a service receives them: rendered with the instance's TLS values."""
    known = {**provider._instances["events"].template_values(), **outs}
    return {name: export.render(known) for name, export in engine_template("nats").kinds[kind].exports.items()}


@pytest.fixture
def purged(over_tls):
    """Projects whose accounts (and all in them) are purged from the TLS server at the end."""
    owners: list[str] = []
    yield owners
    account = over_tls(Account(), "events")
    for owner in owners:
        inputs = checked(account, "account", owner, owner, purge=True)
        if not is_stale(account.read("id", inputs).outs):
            account.delete("id", inputs)


# kind, params at create, params of the update
CASES = [
    ("account", {}, {"maxStreams": 10}),
    ("stream", {}, {"maxMsgs": 100}),
    ("consumer", {"stream": "main"}, {"stream": "main", "ackWait": 60}),
    ("kv", {}, {"history": 5}),
    ("user", {}, {"rotation": 1}),
]


@pytest.mark.parametrize("kind, params, changed", CASES, ids=[case[0] for case in CASES])
def test_each_kind_lives_and_dies_over_tls(over_tls, owner, purged, kind, params, changed):
    purged.append(owner)
    provider = over_tls(KINDS[kind](), "events")
    if kind == "consumer":  # its stream first, the declaration it names
        stream = over_tls(Stream(), "events")
        stream.create(checked(stream, "stream", "main", owner))
    inputs = checked(provider, kind, owner if kind != "consumer" else "worker", owner, params, purge=True)
    outs = provider.create(inputs).outs
    assert not is_stale(provider.read("id", outs).outs)

    news = {**inputs, "params": checked(provider, kind, inputs["name"], owner, changed, purge=True)["params"]}
    assert provider.diff("id", outs, news).changes
    outs = provider.update("id", outs, news).outs
    read = provider.read("id", outs).outs
    assert read["params"] == news["params"] and read.get("loginInSync", True) is True

    provider.delete("id", outs)
    after = provider.read("id", outs).outs
    # The server stores no users: a purged one is a credential it refuses (the read logs in over TLS to know).
    assert (after["loginInSync"] is False) if kind == "user" else is_stale(after)


def test_the_user_exports_log_in_over_verified_tls_and_reach_only_its_account(over_tls, owner, purged):
    other = f"{owner}b"
    purged += [owner, other]
    stream, user = over_tls(Stream(), "events"), over_tls(User(), "events")
    for project in (owner, other):
        stream.create(checked(stream, "stream", project, project))
    given = exports(user, "user", user.create(checked(user, "user", "svc", owner)).outs)
    assert given["url"] == f"tls://{ADDRESS}" and given["caFile"] == str(CA)

    async def connect(context: ssl.SSLContext):
        return await nats.connect(given["url"], user_credentials=RawCredentials(given["creds"]), tls=context,
                                  allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=5)

    async def main() -> list[str]:
        nc = await connect(ssl.create_default_context(cafile=given["caFile"]))
        try:
            js = nc.jetstream()
            await js.publish(f"{owner}.orders", b"mine")
            seen = [f"own:{(await js.stream_info(owner)).state.messages}"]
            try:
                await js.stream_info(other)
            except NotFoundError:
                seen.append("other:not found")
            return seen
        finally:
            await nc.close()

    assert run_private(main()) == ["own:1", "other:not found"]
    # The server's certificate is checked: the system's CAs do not vouch for it.
    with pytest.raises(ssl.SSLCertVerificationError):
        run_private(connect(ssl.create_default_context()))



@pytest.mark.parametrize("tls, said", [
    ({"caFile": "stranger"}, "certificate verify failed"),
    ({"serverName": "elsewhere.example"}, "certificate verify failed: Hostname mismatch"),
], ids=["wrong-ca", "wrong-server-name"])
def test_a_certificate_the_client_does_not_trust_is_said_at_once(over_tls, owner, stranger_ca, tls, said):
    tls = {key: str(stranger_ca) if value == "stranger" else value for key, value in tls.items()}
    stream = over_tls(Stream(), "events", **tls)
    began = time.monotonic()
    with pytest.raises(EngineUnavailable) as info:
        stream.read("id", checked(stream, "stream", owner, owner))
    assert time.monotonic() - began < 10
    assert re.match(rf"cannot connect to nats instance 'events' at {ADDRESS}: .*{said}.*check shared\.events\.tls",
                    str(info.value)), str(info.value)


def test_a_plaintext_instance_at_a_tls_server_is_told_to_set_tls(tls_engines, admin, local_workspace, owner):
    tls_engines.start("nats")
    shared = {**local_workspace["shared"], "events": {**local_workspace["shared"]["events"], "port": PORTS["nats"] + OFFSET}}
    stream = configured(Stream(), {**local_workspace, "shared": shared}, {e: c.password for e, c in admin.items()})
    with pytest.raises(EngineUnavailable, match=r"the server requires TLS: give shared\.events a tls block"):
        stream.read("id", checked(stream, "stream", owner, owner))


@pytest.mark.parametrize("tls", [{"caFile": "stranger", "verify": False}, {"serverName": "localhost"}],
                         ids=["verify-off", "server-name"])
def test_unverified_or_named_tls_connects(over_tls, owner, stranger_ca, tls):
    tls = {key: str(stranger_ca) if value == "stranger" else value for key, value in tls.items()}
    stream = over_tls(Stream(), "events", **tls)
    assert is_stale(stream.read("id", checked(stream, "stream", owner, owner)).outs)


def test_plaintext_exports_are_unchanged_and_tls_ones_say_tls():
    template = engine_template("nats")
    plain = {"host": "127.0.0.1", "port": 24222.0, "servers": None, "tls": False, "caFile": "", "jwt": "J", "seed": "S"}
    for kind in KINDS:
        assert template.kinds[kind].exports["url"].render(plain) == "nats://127.0.0.1:24222"
    assert template.kinds["user"].exports["caFile"].render(plain) == ""
    secure = {**plain, "servers": "127.0.0.1:4,[::1]:5", "tls": True, "caFile": "/ca.pem"}
    assert template.kinds["stream"].exports["url"].render(secure) == "tls://127.0.0.1:4,tls://[::1]:5"
    assert template.kinds["user"].vars["NATS_CA"] == "caFile"
    assert template.kinds["user"].exports["caFile"].render(secure) == "/ca.pem"


def test_the_health_check_needs_a_verified_handshake(over_tls, stranger_ca):
    over_tls(Stream(), "events")  # starts the TLS server
    port = PORTS["nats"] + OFFSET
    assert tls_answers(port, TlsFiles(CA.parent))
    assert not tls_answers(port, TlsFiles(stranger_ca.parent))
