"""The nats `account` kind against the real local nats-server in operator mode.

Each project has an account of its own, which devstack's admin reaches with the operator key of the
instance's admin secret."""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

import nats
import pytest

from providers.errors import Conflict
from providers.lifecycle import is_stale
from providers.nats.account import Account
from providers.nats.claims import AccountSpec, account_claims, account_jwt, all_accounts, push_account
from providers.nats.session import admin_credential, run_private
from tests.providers.conftest import props
from tests.providers.nats.helpers import NATS_URL, checked, public_key, stream_config
from tools.engines.ports import PORTS


pytestmark = pytest.mark.usefixtures("accounts")


@pytest.fixture
def account(configure):
    return configure(Account())


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


def account_inputs(account, owner: str, **params) -> dict:
    return checked(account, props("nats", "events", "account", owner, owner, params))


def test_account_create_twice_changes_nothing_and_has_the_default_limits(account, owner, operator, system, js):
    inputs = account_inputs(account, owner)
    first = account.create(inputs)
    key = public_key(operator, owner)
    before = system(lambda nc: account_claims(nc, key))
    second = account.create(inputs)
    assert first.id == second.id == f"nats/events/account/{owner}@{owner}"
    assert {k: second.outs[k] for k in Account.attributes} == {"host": "127.0.0.1", "port": PORTS["nats"], "servers": None, "account": key}
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
    assert not is_stale(stream.read("id", made).outs)  # the account changed in place: its stream is still there
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
    assert is_stale(account.read("id", outs).outs)
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
    from providers.nats.claims import account_marker

    key = public_key(operator, owner)
    foreign = operator.account_jwt(operator.account_key(owner), owner, description=account_marker("intruder", "test"),
                                   jetstream={"mem_storage": 1 << 20, "disk_storage": 1 << 20})
    system(lambda nc: push_account(nc, foreign, owner))
    try:
        before = system(lambda nc: account_claims(nc, key))
        with pytest.raises(Conflict, match="belongs to project 'intruder'"):
            account.create(account_inputs(account, owner))
        assert is_stale(account.read("id", {**account_inputs(account, owner), "account": key}).outs)
        with pytest.raises(Conflict, match="carries no marker of this project.*nothing was dropped"):
            account.delete("id", {**account_inputs(account, owner), "purge": True})
        assert system(lambda nc: account_claims(nc, key)) == before
    finally:  # ours again, for the teardown to drop
        system(lambda nc: push_account(nc, account_jwt(operator, owner, "test"), owner))
