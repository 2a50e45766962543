"""diff is pure and classifies every change: identity or create-only = replace, the rest = update."""

from __future__ import annotations

import pytest

from providers.postgres.database import Database
from tests.conftest import configured
from tools.engines.ports import PORTS

BASE = {
    "engine": "postgres", "instance": "pg", "kind": "database", "name": "shop", "owner": "shop",
    # As check stores them (news always are).
    "params": Database.normalized_params({"encoding": "UTF8", "locale": "C.UTF-8"}, "shop", "shop"),
    "credentials": "predictable", "purge": False, "stack": "local",
}
OUTPUTS = {**BASE, "host": "127.0.0.1", "port": PORTS["postgres"], "user": "shop", "database": "shop", "password": "x"}


def changed(**overrides):
    news = {**BASE, **overrides}
    if "params" in overrides:
        news["params"] = {**BASE["params"], **overrides["params"]}
    return news


@pytest.mark.parametrize(
    "news, replaces, changes",
    [
        pytest.param(BASE, [], False, id="unchanged"),
        pytest.param(changed(name="shop2"), ["name"], True, id="name-replaces"),
        pytest.param(changed(owner="blog"), ["owner"], True, id="owner-replaces"),
        pytest.param(changed(instance="pg2"), ["instance"], True, id="instance-replaces"),
        pytest.param(changed(params={"connection_limit": 5}), [], True, id="limit-updates"),
        pytest.param(changed(credentials="generated"), [], True, id="credentials-update"),
        pytest.param(changed(purge=True), [], True, id="purge-updates"),
    ],
)
def test_diff_classifies_changes(news, replaces, changes):
    result = Database().diff("id", OUTPUTS, news)
    assert result.replaces == replaces
    assert result.changes is changes
    assert result.delete_before_replace is True


@pytest.mark.parametrize("param, value", [("encoding", "LATIN1"), ("locale", "C")])
def test_a_create_only_param_replaces_under_purge(param, value):
    result = Database().diff("id", {**OUTPUTS, "purge": True}, changed(params={param: value}, purge=True))
    assert (result.replaces, result.changes) == ([f"params.{param}"], True)


def test_a_refresh_that_finds_a_create_only_value_drifted_shows_a_replace_and_fails_nothing():
    """Pulumi's refresh diffs the live outputs against the stored inputs: an error there fails the refresh."""
    drifted = {**OUTPUTS, "params": {**OUTPUTS["params"], "locale": "C"}}
    assert Database().diff("id", drifted, BASE).replaces == ["params.locale"]


def test_diff_reports_owner_role_drift_as_update():
    refreshed = {**OUTPUTS, "user": "intruder"}
    result = Database().diff("id", refreshed, BASE)
    assert result.changes is True
    assert result.replaces == []


def test_diff_makes_no_engine_call():
    # A provider that was never configured has no instances: any engine call would raise.
    provider = Database()
    assert provider._instances == {}
    assert provider.diff("id", OUTPUTS, changed(params={"connection_limit": 3})).changes is True


def test_purge_turned_off_in_the_replacing_up_is_refused_before_anything_happens():
    """Pulumi deletes the replaced resource with its old settings: purge: true, whatever the new one says."""
    from providers.errors import Unsupported

    purged = {**OUTPUTS, "purge": True}
    with pytest.raises(Unsupported, match="sets purge: false.*its data would be dropped") as refused:
        Database().diff("id", purged, changed(params={"encoding": "LATIN1"}, purge=False))
    assert "set purge: false alone and run `pulumi up` first" in str(refused.value)
    assert Database().diff("id", purged, changed(purge=False)).replaces == []  # alone: an update
    assert Database().diff("id", purged, changed(params={"locale": "C"}, purge=True)).replaces == ["params.locale"]


def test_setting_a_create_only_param_that_was_unset_replaces():
    """Pulumi drops null outputs: an unset range key is stored as nothing, and setting one cannot be an update."""
    from providers.localstack.table import Table

    table = Table()
    ident = {"engine": "localstack", "instance": "aws", "kind": "table", "name": "orders", "owner": "shop",
             "credentials": "predictable", "purge": True, "stack": "local"}
    made = {key: value for key, value in table.normalized_params({"hashKey": "id"}, "orders", "shop").items()
            if value is not None}
    ranged = table.normalized_params({"hashKey": "id", "rangeKey": "sk"}, "orders", "shop")
    assert table.diff("id", {**ident, "params": made}, {**ident, "params": ranged}).replaces == ["params.range_key"]
    unchanged = table.normalized_params({"hashKey": "id"}, "orders", "shop")
    assert table.diff("id", {**ident, "params": made}, {**ident, "params": unchanged}).changes is False


def test_pinning_an_unpinned_redis_index_to_another_number_replaces():
    from providers.redis.redis_index import RedisIndex

    ident = {"engine": "redis", "instance": "cache", "kind": "redis_index", "name": "shop", "owner": "shop",
             "credentials": "predictable", "purge": True, "stack": "local"}
    unpinned = {**ident, "params": {}, "db": 3}  # `index: None` is not stored
    assert RedisIndex().diff("id", unpinned, {**ident, "params": {"index": 8}}).replaces == ["params.index"]
    assert RedisIndex().diff("id", unpinned, {**ident, "params": {"index": 3}}).replaces == []


@pytest.mark.parametrize("purge", [True, False])
def test_params_an_older_release_stored_unnormalized_are_no_change(purge):
    """An older release stored `encoding: utf8` as declared; this one stores the server's `UTF8`. Compared
    raw, an unchanged database was replaced at the first up after an upgrade (dropped, with purge) or,
    retained, refused at every preview."""
    stored = {**OUTPUTS, "purge": purge, "params": {"encoding": "utf8", "locale": "C.UTF-8", "connection_limit": -1}}
    news = {**BASE, "purge": purge}
    result = Database().diff("id", stored, news)
    assert (result.replaces, result.changes) == ([], False)
    assert Database().check({k: v for k, v in stored.items() if k in BASE}, news).failures == []


@pytest.mark.parametrize("host, port", [("127.0.0.1", PORTS["postgres"] + 1), ("localhost", PORTS["postgres"])])
def test_an_instance_moved_in_the_config_updates_its_resources_address(host, port):
    """A plain up after the server moved had left a service's imports (from the resource's outputs) on the
    old address and its ${ref}s (from the config) on the new one."""
    shared = {"pg": {"engine": "postgres", "host": host, "port": port, "adminUser": "admin", "adminSecret": "pgAdmin"}}
    provider = configured(Database(), {"shared": shared}, {"postgres": "secret"})
    assert provider.diff("id", OUTPUTS, BASE).changes is True
    assert provider.diff("id", {**OUTPUTS, "host": host, "port": float(port)}, BASE).changes is False
    assert Database().diff("id", OUTPUTS, BASE).changes is False  # unconfigured (offline validation): no address
