"""The nats `user` kind against the real local nats-server in operator mode.

A project's services log in as a `user` of its account. These tests connect as those users the ways
services do (the `creds` export, the JWT and seed) and try what a user may and may not do."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import nats
import nkeys
import pytest
from nats.aio.client import RawCredentials
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from components.templates import engine_template
from providers.nats import auth as nats_auth
from providers.nats.session import run_private
from providers.nats.user import User
from tests.providers.conftest import props
from tests.providers.nats.helpers import NATS_URL, checked, public_key, stream_config


pytestmark = pytest.mark.usefixtures("accounts")


#: How long a test waits for the server's word on a refused publish (it comes asynchronously, via error_cb).
REFUSAL_WAIT = 5.0


@pytest.fixture
def user(configure):
    return configure(User())


def user_inputs(user, owner: str, name: str = "svc", credentials: str = "predictable", **params) -> dict:
    return checked(user, props("nats", "events", "user", name, owner, params, credentials=credentials))


def creds_text(outs: dict) -> str:
    """The user's `creds` export as a service imports it (templates/nats.yaml renders it)."""
    return engine_template("nats").kinds["user"].exports["creds"].render(outs)


def as_user(outs: dict, work: Callable[[Any, list[Exception]], Awaitable[Any]], *, how: str = "creds") -> Any:
    """Run `work(nc, errors)` logged in as the user of `outs`: with the `creds` export (nats-py's
    RawCredentials) or its JWT and seed callbacks (`how="callbacks"`); `errors` collects what the server
    sends asynchronously (permission violations)."""
    auth: dict[str, Any] = {"user_credentials": RawCredentials(creds_text(outs))} if how == "creds" else {
        "user_jwt_cb": lambda: outs["jwt"].encode(), "signature_cb": nats_auth.signer(nkeys.from_seed(outs["seed"].encode()))}

    async def main():
        errors: list[Exception] = []

        async def remember(err: Exception) -> None:
            errors.append(err)

        nc = await nats.connect(NATS_URL, **auth, error_cb=remember, allow_reconnect=False, connect_timeout=5,
                                max_reconnect_attempts=0)
        try:
            return await work(nc, errors)
        finally:
            await nc.close()

    return run_private(main())


async def refused(errors: list[Exception], subject: str) -> str:
    """The server's permission violation for publishing to `subject`, once error_cb has it."""
    deadline = asyncio.get_running_loop().time() + REFUSAL_WAIT
    # nats-py hands the server's -ERR over lowercased.
    wanted = f'permissions violation for publish to "{subject}"'.lower()
    while not (found := [str(e) for e in errors if wanted in str(e)]):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no permission violation for publishing to {subject!r} reached error_cb within "
                                 f"{REFUSAL_WAIT}s (errors: {errors})")
        await asyncio.sleep(0.02)
    return found[0]


def logs_in(outs: dict) -> bool:
    async def nothing(nc, errors):
        return True

    try:
        return as_user(outs, nothing)
    except nats.errors.Error as err:
        assert "authorization violation" in str(err).lower(), err
        return False


def test_a_predictable_user_gets_the_same_derived_key_every_time(user, owner, operator, accounts):
    first = user.create(user_inputs(user, owner)).outs
    again = user.create(user_inputs(user, owner)).outs  # run twice (a killed run's state lost): same key
    assert first["seed"] == again["seed"] and first["user"] == again["user"]
    assert first["seed"].startswith("SU") and first["user"].startswith("U")
    claims = nats_auth.decode(first["jwt"])
    assert (claims["sub"], claims["iss"], claims["name"]) == (first["user"], public_key(operator, owner), f"{owner}_svc")
    assert first["account"] == public_key(operator, owner)
    # Derived from the project, the declaration and the rotation: each of them gives another key.
    accounts.append(f"{owner}x")
    assert user.create(user_inputs(user, f"{owner}x")).outs["seed"] != first["seed"]
    assert user.create(user_inputs(user, owner, name="other")).outs["seed"] != first["seed"]
    rotated = user.create(user_inputs(user, owner, rotation=1)).outs
    assert rotated["seed"] != first["seed"]
    assert user.create(user_inputs(user, owner, rotation=1)).outs["seed"] == rotated["seed"]
    assert logs_in(first) and logs_in(rotated)


def test_a_generated_user_keeps_its_key_until_its_rotation_changes(user, owner):
    inputs = user_inputs(user, owner, credentials="generated")
    outs = user.create(inputs).outs
    assert user.create(inputs).outs["seed"] != outs["seed"]  # drawn anew on each create
    kept = user.update("id", outs, user_inputs(user, owner, credentials="generated")).outs
    assert (kept["seed"], kept["user"]) == (outs["seed"], outs["user"])
    assert user.diff("id", outs, inputs).changes is False

    news = user_inputs(user, owner, credentials="generated", rotation=1)
    assert user.diff("id", outs, news).changes
    rotated = user.update("id", outs, news).outs
    assert rotated["seed"] != outs["seed"] and rotated["user"] != outs["user"]
    assert logs_in(rotated) and not logs_in(outs)  # the replaced key is revoked in the account
    assert user.read("id", outs).outs["loginInSync"] is False
    assert user.read("id", rotated).outs["loginInSync"] is True
    refreshed = user.read("id", rotated).outs  # what a refresh records: no change for the next up
    assert refreshed["params"] == rotated["params"] and user.diff("id", refreshed, news).changes is False
    again = user.update("id", rotated, user_inputs(user, owner, credentials="generated", rotation=1)).outs
    assert again["seed"] == rotated["seed"]


@pytest.mark.parametrize("how", ["creds", "callbacks"])
def test_a_user_publishes_and_uses_its_projects_stream_and_kv(user, stream, consumer, kv, owner, how):
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    consumer.create(checked(consumer, props("nats", "events", "consumer", "worker", owner, {"stream": owner})))
    kv.create(checked(kv, props("nats", "events", "kv", "cache", owner)))
    outs = user.create(user_inputs(user, owner)).outs

    async def use(nc, errors):
        j = nc.jetstream(timeout=5)
        ack = await j.publish(f"{owner}.orders", b"o-1")
        sub = await j.pull_subscribe_bind(f"{owner}_worker", stream=owner)
        messages = await sub.fetch(1, timeout=5)
        await messages[0].ack()
        bucket = await j.key_value(f"{owner}_cache")
        await bucket.put("k", b"v")
        await nc.flush()
        return ack.stream, [m.data for m in messages], (await bucket.get("k")).value, errors

    assert as_user(outs, use, how=how) == (owner, [b"o-1"], b"v", [])


def test_a_user_cannot_publish_outside_its_project_nor_make_or_delete_streams(user, stream, owner):
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    outs = user.create(user_inputs(user, owner)).outs

    async def trespass(nc, errors):
        await nc.publish("elsewhere.orders", b"x")
        outside = await refused(errors, "elsewhere.orders")
        j = nc.jetstream(timeout=1)
        with pytest.raises(nats.errors.TimeoutError):  # the request never reaches JetStream
            await j.add_stream(StreamConfig(name=f"{owner}_own", subjects=[f"{owner}.own.>"]))
        created = await refused(errors, f"$JS.API.STREAM.CREATE.{owner}_own")
        with pytest.raises(nats.errors.TimeoutError):
            await j.delete_stream(owner)
        deleted = await refused(errors, f"$JS.API.STREAM.DELETE.{owner}")
        return outside, created, deleted, (await nc.jetstream().stream_info(owner)).config.name

    *violations, still = as_user(outs, trespass)
    assert len(violations) == 3, violations
    assert still == owner


def test_a_user_cannot_see_another_projects_stream(user, stream, owner, js):
    other = f"{owner}x"
    stream.create(checked(stream, props("nats", "events", "stream", other, other)))
    outs = user.create(user_inputs(user, owner)).outs

    async def look(nc, errors):
        with pytest.raises(NotFoundError):
            await nc.jetstream().stream_info(other)
        return [info.config.name for info in await nc.jetstream().streams_info()]

    assert as_user(outs, look) == []
    assert stream_config(js, other, project=other).metadata["devstack.owner"] == other  # there, in its own account


def test_a_dropped_user_is_revoked(user, owner):
    outs = user.create(user_inputs(user, owner)).outs
    assert logs_in(outs) and user.read("id", outs).outs["loginInSync"] is True
    user.delete("id", {**outs, "purge": True})
    assert user.read("id", outs).outs["loginInSync"] is False
    assert user.diff("id", user.read("id", outs).outs, user_inputs(user, owner)).changes
    assert not logs_in(outs)
    again = user.create(user_inputs(user, owner)).outs  # declared again: its key is lifted from the revocations
    assert again["seed"] == outs["seed"] and logs_in(again)
