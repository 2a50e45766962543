"""The nats `account` and `user` kinds against the real local nats-server in operator mode.

Each project has an account of its own, which devstack's admin reaches with the operator key of the
instance's admin secret; a project's services log in as a `user` of it. These tests connect as those
users the ways services do (the `creds` export, the JWT and seed) and try what a user may and may not do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

import nats
import nkeys
import pytest
from nats.aio.client import RawCredentials
from nats.js.api import ConsumerConfig, StreamConfig
from nats.js.errors import NotFoundError

from components.templates import engine_template
from providers import nats_auth
from providers.errors import Conflict
from providers.nats import (Account, AccountMissing, AccountSpec, Stream, User, account_claims, account_jwt, all_accounts, admin_credential,
                            push_account, run_private)
from tests.providers.conftest import props
from tests.providers.test_nats_provider import (NATS_URL, accounts, checked, consumer, js, kv,  # noqa: F401 - fixtures
                                              stream, stream_config)

#: How long a test waits for the server's word on a refused publish (it comes asynchronously, via error_cb).
REFUSAL_WAIT = 5.0


@pytest.fixture
def account(configure):
    return configure(Account())


@pytest.fixture
def user(configure):
    return configure(User())


@pytest.fixture
def system(admin) -> Callable[[Callable[[Any], Awaitable[Any]]], Any]:
    """Run one coroutine with devstack's admin connection in the system account: `system(lambda nc: ...)`."""

    def call(work):
        async def main():
            nc = await nats.connect(NATS_URL, **admin_credential(admin["nats"].password), allow_reconnect=False,
                                    connect_timeout=5)
            try:
                return await work(nc)
            finally:
                await nc.close()

        return run_private(main())

    return call


@pytest.fixture
def operator(admin) -> nats_auth.Operator:
    return nats_auth.Operator.from_secret(admin["nats"].password)


def account_inputs(account, owner: str, **params) -> dict:
    return checked(account, props("nats", "events", "account", owner, owner, params))


def user_inputs(user, owner: str, name: str = "svc", credentials: str = "predictable", **params) -> dict:
    return checked(user, props("nats", "events", "user", name, owner, params, credentials=credentials))


def public_key(operator: nats_auth.Operator, owner: str) -> str:
    return nats_auth.public(operator.account_key(owner))


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


# --- account ------------------------------------------------------------------


def test_account_create_twice_changes_nothing_and_has_the_default_limits(account, owner, operator, system, js):
    inputs = account_inputs(account, owner)
    first = account.create(inputs)
    key = public_key(operator, owner)
    before = system(lambda nc: account_claims(nc, key))
    second = account.create(inputs)
    assert first.id == second.id == f"nats/events/account/{owner}@{owner}"
    assert {k: second.outs[k] for k in Account.attributes} == {"host": "127.0.0.1", "port": 24222, "account": key}
    assert system(lambda nc: account_claims(nc, key)) == before  # not signed again: same iat, same jti
    assert json.loads(before["nats"]["description"])["owner"] == owner
    defaults = AccountSpec()
    limits = js(lambda j: j.account_info()).limits
    assert (limits.max_memory, limits.max_storage, limits.max_streams, limits.max_consumers) == (
        defaults.max_memory, defaults.max_storage, defaults.max_streams, defaults.max_consumers)
    assert account.read("id", second.outs).outs["params"] == defaults.model_dump()


def test_account_limits_change_in_place(account, stream, owner, js):
    outs = account.create(account_inputs(account, owner)).outs
    made = stream.create(checked(stream, props("nats", "events", "stream", owner, owner))).outs
    news = account_inputs(account, owner, maxMemory=1 << 20, maxStorage=1 << 24, maxStreams=3, maxConsumers=7)
    diff = account.diff("id", outs, news)
    assert diff.changes and diff.replaces == []
    outs = account.update("id", outs, news).outs
    limits = js(lambda j: j.account_info()).limits
    assert (limits.max_memory, limits.max_storage, limits.max_streams, limits.max_consumers) == (
        1 << 20, 1 << 24, 3, 7)
    assert account.read("id", outs).outs["params"]["max_streams"] == 3
    assert stream.read("id", made).id  # the account changed in place: its stream is still there
    assert account.diff("id", account.read("id", outs).outs, news).changes is False


def test_account_drop_with_purge_takes_its_streams_and_leaves_the_resolver(account, stream, kv, owner, operator,
                                                                           system, js, admin):
    from tools.engines.nats import ENGINE

    outs = account.create(account_inputs(account, owner)).outs
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    kv.create(checked(kv, props("nats", "events", "kv", "cache", owner)))
    js(lambda j: j.publish(f"{owner}.orders", b"o-1", stream=owner))
    key = public_key(operator, owner)
    streams_dir = ENGINE.data_dir / "jetstream" / key / "streams"  # the shared engine's store, only read
    assert sorted(p.name for p in streams_dir.iterdir()) == [f"KV_{owner}_cache", owner]
    account.delete("id", outs)  # purge not asked for: it stays, with its streams
    assert key in system(all_accounts) and stream_config(js, owner) is not None

    account.delete("id", {**outs, "purge": True})
    assert key not in system(all_accounts)
    assert account.read("id", outs).id == ""
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        run_private(nats.connect(NATS_URL, **admin_credential(admin["nats"].password, owner), allow_reconnect=False,
                                 max_reconnect_attempts=0, connect_timeout=5))
    # Its streams went with it, not only out of sight: the server keeps a deleted account's files otherwise.
    assert not streams_dir.exists() or list(streams_dir.iterdir()) == []
    account.delete("id", {**outs, "purge": True})  # already gone is fine


def test_an_account_holding_a_stream_not_of_its_project_is_not_purged(account, stream, owner, operator, system, js):
    """A purge drops the project's streams with the account; one without its marker (made by hand in the
    account) stops it: nothing is dropped."""
    outs = account.create(account_inputs(account, owner)).outs
    stream.create(checked(stream, props("nats", "events", "stream", owner, owner)))
    js(lambda j: j.add_stream(name=f"{owner}_byhand", subjects=[f"{owner}byhand.>"]))
    with pytest.raises(Conflict, match=f"'{owner}_byhand'"):
        account.delete("id", {**outs, "purge": True})
    assert public_key(operator, owner) in system(all_accounts)
    assert stream_config(js, owner) is not None and stream_config(js, f"{owner}_byhand") is not None
    js(lambda j: j.delete_stream(f"{owner}_byhand"))


def test_a_purged_account_can_be_made_again(account, owner, js):
    """nats-server 2.15 takes an account pushed again within about a second of its deletion (listed, looked
    up) but refuses every login to it until a later update: the create signs and pushes it again."""
    outs = account.create(account_inputs(account, owner)).outs
    account.delete("id", {**outs, "purge": True})
    account.create(account_inputs(account, owner))
    assert js(lambda j: j.streams_info()) == []


def test_an_account_whose_marker_names_another_project_is_a_conflict_and_untouched(account, owner, operator,
                                                                                  system):
    from providers.nats import account_marker

    key = public_key(operator, owner)
    foreign = operator.account_jwt(operator.account_key(owner), owner, description=account_marker("intruder", "test"),
                                   jetstream={"mem_storage": 1 << 20, "disk_storage": 1 << 20})
    system(lambda nc: push_account(nc, foreign, owner))
    try:
        before = system(lambda nc: account_claims(nc, key))
        with pytest.raises(Conflict, match="belongs to project 'intruder'"):
            account.create(account_inputs(account, owner))
        assert account.read("id", {**account_inputs(account, owner), "account": key}).id == ""
        with pytest.raises(Conflict, match="carries no marker of this project.*nothing was dropped"):
            account.delete("id", {**account_inputs(account, owner), "purge": True})
        assert system(lambda nc: account_claims(nc, key)) == before
    finally:  # ours again, for the teardown to drop
        system(lambda nc: push_account(nc, account_jwt(operator, owner, "test"), owner))


# --- user ---------------------------------------------------------------------


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
