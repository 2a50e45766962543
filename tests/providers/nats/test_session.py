"""providers.nats.session: a server that is down, goes away or refuses the admin."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import SecretStr

from providers.errors import EngineUnavailable
from providers.nats.claims import API_TIMEOUT
from providers.nats.session import run as nats_run
from providers.nats.stream import Stream
from tests.providers.conftest import props, stopped_answering
from tests.providers.nats.helpers import checked


pytestmark = pytest.mark.usefixtures("accounts")


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
