"""Fixtures of the NATS provider tests: the kinds configured for the local server, a project's JetStream
context, the accounts a test made (dropped at the end) and a private nats-server."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from typing import Any, Awaitable, Callable, Iterator

import nats
import pytest
from nats.js import JetStreamContext

from providers.base import KindProvider
from providers.lifecycle import is_stale
from providers.nats import auth as nats_auth
from providers.nats.account import Account
from providers.nats.consumer import Consumer
from providers.nats.jetstream import all_streams
from providers.nats.kv import Kv
from providers.nats.session import admin_credential, observed, run_private
from providers.nats.stream import Stream
from tests.providers.conftest import props
from tests.providers.nats.helpers import NATS_URL, PRIVATE_SECRET, PRIVATE_USER, checked
from tests.waiting import eventually


@pytest.fixture
def accounts(configure, owner) -> Iterator[list[str]]:
    """The projects whose accounts the test used, its owner's first: each dropped with purge at the end,
    and its streams (so its consumers and kv buckets) with it, so accounts do not pile up on the server.
    Every module of engine tests uses it (`pytestmark`)."""
    used = [owner]
    yield used
    account = configure(Account())
    instance = account._instances["events"]

    async def empty(session) -> None:  # streams made by hand too: an account purge refuses unmarked ones
        for info in await all_streams(session.js):
            await session.js.delete_stream(info.config.name or "")

    for project in used:
        inputs = {**props("nats", "events", "account", project, project), "purge": True}
        if not is_stale(account.read("id", inputs).outs):
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
            if is_stale(account.read("id", inputs).outs):  # an existing one keeps the limits the test gave it
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


@pytest.fixture
def stream(configure):
    return configure(Stream())


@pytest.fixture
def consumer(configure):
    return configure(Consumer())


@pytest.fixture
def kv(configure):
    return configure(Kv())


@pytest.fixture
def operator(admin) -> nats_auth.Operator:
    return nats_auth.Operator.from_secret(admin["nats"].password)


@pytest.fixture
def private_server(tmp_path_factory) -> Iterator[Callable[..., tuple[int, Callable[[KindProvider], KindProvider]]]]:
    """`private_server(*flags, on_log=...)`: a nats-server of the test's own on a free loopback port, in operator
    mode with the operator of the admin secret pw-1 (as the engine's config has it), stopped at the end;
    `on_log` sees each line it logs as it logs it. Returns the port and `configured_kind(provider)`: the
    provider configured with that server as its instance `events`."""
    from providers.nats import auth as nats_auth
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
        eventually(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10,
                   f"the private nats-server on port {port} to listen")
        shared = {"events": {"engine": "nats", "host": "127.0.0.1", "port": port, "adminUser": PRIVATE_USER,
                             "adminSecret": "natsAdmin"}}
        return port, lambda kind: configured(kind, {"shared": shared}, {"nats": PRIVATE_SECRET})

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=10)
