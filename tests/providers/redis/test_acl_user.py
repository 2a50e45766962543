"""The redis `acl_user` kind against the real local server.

Create; create again (adoption, no change); update in place; drift through
read; retained and purged delete; identity conflicts that change nothing; bad
params; tenant isolation (project A's credentials against B's keys, channels
and index).
"""

from __future__ import annotations

import json

import pytest
import redis

from providers.credentials import hashed_password
from providers.errors import Conflict, InvalidSpec
from providers.identity import PREFIXED, Identity
from providers.lifecycle import is_stale, without_clocks
from providers.redis.acl_user import AclUser, AclUserSpec
from providers.redis.client import ACL_OWNERS_KEY
from tests.providers.conftest import props
from tests.providers.redis.helpers import ACL_FILE, REDIS, check_failures, getuser, in_db, tenant


def test_user_create_adopt_and_persisted(acl_user, owner, admin_redis):
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    first = acl_user.create(inputs)
    assert first.outs["user"] == owner and first.outs["keyPrefix"] == f"{owner}:"
    live = getuser(admin_redis, owner)
    assert live["enabled"] is True and live["keys"] == [f"~{owner}:*"] and live["channels"] == [f"&{owner}:*"]
    marker = json.loads(admin_redis.hget(ACL_OWNERS_KEY, owner))
    assert marker["owner"] == owner and marker["kind"] == "acl_user" and len(marker["fingerprint"]) == 64
    # Run twice: same password, nothing changes.
    assert without_clocks(acl_user.create(inputs).outs) == without_clocks(first.outs)
    assert getuser(admin_redis, owner)["passwords"] == live["passwords"]
    assert f"user {owner} on" in ACL_FILE.read_text()  # ACL SAVE: survives a restart of the server
    with tenant(first.outs) as client:
        client.set(f"{owner}:greeting", "hi")
        assert client.get(f"{owner}:greeting") == "hi"
    named = acl_user.create(props("redis", "cache", "acl_user", "worker", owner)).outs
    assert named["user"] == f"{owner}-worker" and named["keyPrefix"] == f"{owner}:"


def test_user_purge_cut_before_acl_save_saves_when_run_again(acl_user, owner, admin_redis):
    """Otherwise the ACL file keeps the user, and a restart brings it back without its marker."""
    outs = acl_user.create(acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs).outs
    assert f"user {owner} on" in ACL_FILE.read_text()
    admin_redis.acl_deluser(owner)  # the first drop, cut before ACL SAVE
    acl_user.delete("id", {**outs, "purge": True})
    assert f"user {owner} " not in ACL_FILE.read_text()


def test_a_refresh_right_after_a_create_or_an_update_finds_what_they_stored(acl_user, owner):
    """Otherwise every refresh after an up shows an update of each acl_user it made or changed."""
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    outs = acl_user.create(inputs).outs
    assert without_clocks(acl_user.read("id", outs).outs) == without_clocks(outs)
    updated = acl_user.update("id", outs, {**inputs, "params": {**inputs["params"], "rotation": 1}}).outs
    assert without_clocks(acl_user.read("id", updated).outs) == without_clocks(updated)


def test_user_password_the_ledger_lost_is_drift_and_set_again(acl_user, owner):
    """An up killed after ACL SETUSER: the engine has the new password (and a fingerprint that
    matches it), the ledger the old one. Refresh must notice, and the next up set the ledger's."""
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner, credentials="generated")).inputs
    outs = acl_user.create(inputs).outs
    assert acl_user.read("id", outs).outs["passwordInSync"] is True
    acl_user.update("id", outs, {**inputs, "params": {**inputs["params"], "rotation": 2}})  # its outputs lost
    refreshed = acl_user.read("id", outs).outs
    assert refreshed["passwordInSync"] is False and refreshed["aclInSync"] is True
    diff = acl_user.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    repaired = acl_user.update("id", refreshed, inputs).outs
    assert repaired["password"] == outs["password"]
    with tenant(outs) as client:
        assert client.ping()
    assert acl_user.read("id", repaired).outs["passwordInSync"] is True


def test_user_update_in_place_never_disables(acl_user, owner, admin_redis):
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    outs = acl_user.create(inputs).outs
    with tenant(outs) as before:
        before.set(f"{owner}:k", "v")
        changed = {**inputs, "params": {**inputs["params"], "read_only": True, "allow_scan": True}}
        diff = acl_user.diff("id", outs, changed)
        assert diff.changes and diff.replaces == []
        outs = acl_user.update("id", outs, changed).outs
        assert before.get(f"{owner}:k") == "v"  # the open connection keeps working, now read-only
        with pytest.raises(redis.exceptions.NoPermissionError):
            before.set(f"{owner}:k", "w")
        # One SCAN call walks a slice of the keyspace only: follow its cursor to the end.
        assert list(before.scan_iter(match=f"{owner}:*")) == [f"{owner}:k"]
    live = getuser(admin_redis, owner)
    assert live["enabled"] is True and live["keys"] == [f"%R~{owner}:*"]
    assert acl_user.read("id", outs).outs["aclInSync"] is True


@pytest.mark.parametrize("policy", ["predictable", "generated"])
def test_user_rotation_changes_the_password_in_place(acl_user, owner, policy):
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner, credentials=policy)).inputs
    outs = acl_user.create(inputs).outs
    kept = acl_user.update("id", outs, {**inputs, "params": {**inputs["params"], "allow_scan": True}}).outs
    assert kept["password"] == outs["password"]
    rotated_inputs = {**inputs, "params": {**inputs["params"], "allow_scan": True, "rotation": 2}}
    assert acl_user.diff("id", kept, rotated_inputs).replaces == []
    rotated = acl_user.update("id", kept, rotated_inputs).outs
    assert rotated["password"] != outs["password"]
    assert tenant(rotated).ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        tenant(outs).ping()
    assert acl_user.update("id", rotated, rotated_inputs).outs["password"] == rotated["password"]


def test_user_logs_in_with_the_project_name_and_keeps_an_earlier_hashed_password(acl_user, owner):
    """Predictable is the project's name. A user an earlier release made holds `dev-<sha256>`, which its
    services hold too: a re-up, a refresh and an update keep it; a `rotation` moves it to the project's name."""
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    outs = acl_user.create(inputs).outs
    assert outs["password"] == owner and tenant(outs).ping()
    ident = Identity.from_props(inputs)
    hashed = hashed_password(ident, owner)
    # What an earlier release's create ran, with its password: the server and the state as it left them.
    earlier = {**outs, **acl_user._apply(acl_user._instances["cache"], ident, AclUserSpec(), hashed, inputs["stack"])}
    assert acl_user.diff("id", earlier, inputs).changes is False
    assert without_clocks(acl_user.read("id", earlier).outs) == without_clocks(earlier)  # no drift
    changed = {**inputs, "params": {**inputs["params"], "allow_scan": True}}
    kept = acl_user.update("id", earlier, changed).outs
    assert kept["password"] == hashed and tenant(kept).ping()
    opted = acl_user.update("id", kept, {**changed, "params": {**changed["params"], "rotation": 0}}).outs
    assert opted["password"] == owner and tenant(opted).ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        tenant(kept).ping()


def test_user_drift_through_read(acl_user, owner, admin_redis):
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    outs = acl_user.create(inputs).outs
    assert acl_user.read("id", outs).outs["aclInSync"] is True
    for out_of_band in (["+flushall"], ["off"], [">changed-password"], ["resetkeys", "%R~" + owner + ":*"]):
        admin_redis.execute_command("ACL", "SETUSER", owner, *out_of_band)
        refreshed = acl_user.read("id", outs).outs
        assert refreshed["aclInSync"] is False, out_of_band
        diff = acl_user.diff("id", refreshed, inputs)
        assert diff.changes and diff.replaces == []
        acl_user.update("id", refreshed, inputs)  # the next up converges it
        assert acl_user.read("id", outs).outs["aclInSync"] is True
    assert acl_user.read("id", outs).outs["params"]["read_only"] is False
    live = getuser(admin_redis, owner)
    assert live["enabled"] is True and "+flushall" not in live["commands"]
    marker = json.loads(admin_redis.hget(ACL_OWNERS_KEY, owner))
    admin_redis.hset(ACL_OWNERS_KEY, owner, json.dumps({**marker, "owner": "intruder"}))
    assert is_stale(acl_user.read("id", outs).outs)  # another project's now: stale in this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        acl_user.update("id", outs, inputs)
    admin_redis.acl_deluser(owner)
    assert is_stale(acl_user.read("id", outs).outs)


def test_user_retained_then_purged(acl_user, owner, admin_redis):
    outs = acl_user.create(props("redis", "cache", "acl_user", owner, owner)).outs
    acl_user.delete("id", outs)
    assert tenant(outs).ping()  # retained: still works
    with tenant(outs) as open_connection:
        open_connection.ping()
        acl_user.delete("id", {**outs, "purge": True})
        with pytest.raises(redis.exceptions.ConnectionError):
            open_connection.ping()  # DELUSER closes the user's connections
    assert getuser(admin_redis, owner) is None and admin_redis.hget(ACL_OWNERS_KEY, owner) is None
    assert f"user {owner} " not in ACL_FILE.read_text()
    acl_user.delete("id", {**outs, "purge": True})  # already gone is fine


def test_user_conflicts_change_nothing(acl_user, owner, admin_redis):
    acl_user.create(props("redis", "cache", "acl_user", "b-c", owner))
    before = getuser(admin_redis, f"{owner}-b-c")
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
        acl_user.create(props("redis", "cache", "acl_user", "c", f"{owner}-b"))
    assert getuser(admin_redis, f"{owner}-b-c") == before
    admin_redis.acl_setuser(f"{owner}-foreign", enabled=True, passwords=["+theirs"], keys=["*"], categories=["+@all"])
    foreign = getuser(admin_redis, f"{owner}-foreign")
    with pytest.raises(Conflict, match="devstack does not manage"):
        acl_user.create(props("redis", "cache", "acl_user", "foreign", owner))
    with pytest.raises(Conflict):
        acl_user.delete("id", {**props("redis", "cache", "acl_user", "foreign", owner), "purge": True})
    assert getuser(admin_redis, f"{owner}-foreign") == foreign
    assert admin_redis.hget(ACL_OWNERS_KEY, f"{owner}-foreign") is None
    with pytest.raises(InvalidSpec, match="every Redis server has"):
        AclUser.engine_name("default", "default", naming=PREFIXED)


def test_user_bad_params_name_the_field(acl_user, owner):
    failures = check_failures(acl_user, props("redis", "cache", "acl_user", owner, owner,
                                              {"readOnly": "maybe", "rotation": 1.5, "commands": ["+@all"]}))
    assert set(failures) == {"params.readOnly", "params.rotation", "params.commands"}
    assert "integer or a non-empty string" in failures["params.rotation"]


#: Tried for real with a tenant's credentials.
DENIED = [
    ["FLUSHALL"], ["FLUSHDB"], ["KEYS", "*"], ["CONFIG", "GET", "requirepass"], ["SCAN", "0"], ["RANDOMKEY"],
    ["INFO"], ["ACL", "LIST"], ["CLIENT", "LIST"], ["PUBSUB", "CHANNELS"],
    ["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x:"],
]


#: Asked through ACL DRYRUN: a regression must not take the shared server down or block the test.
DENIED_DRYRUN = [
    ["SHUTDOWN", "NOSAVE"], ["DEBUG", "SLEEP", "0"], ["MONITOR"], ["MODULE", "LIST"], ["SCRIPT", "KILL"],
    ["SCRIPT", "FLUSH"], ["FUNCTION", "FLUSH"], ["SWAPDB", "0", "1"], ["MIGRATE", "127.0.0.1", "1", "k", "0", "1"],
    ["REPLICAOF", "NO", "ONE"], ["SLAVEOF", "NO", "ONE"], ["BGSAVE"], ["SAVE"], ["CLIENT", "KILL", "ID", "1"],
    ["CLIENT", "PAUSE", "1"], ["MOVE", "k", "1"], ["ACL", "SETUSER", "x"],
]


def test_tenant_isolation_between_two_projects(index, acl_user, owner, admin_redis):
    a, b = f"{owner}a", f"{owner}b"
    index.create(props("redis", "cache", "redis_index", a, a)).outs["db"]
    db_b = index.create(props("redis", "cache", "redis_index", b, b)).outs["db"]
    user_a = acl_user.create(props("redis", "cache", "acl_user", a, a)).outs
    user_b = acl_user.create(props("redis", "cache", "acl_user", b, b, credentials="generated")).outs
    with tenant(user_b, db_b) as client_b:
        client_b.set(f"{b}:secret", "b-data")
    with tenant(user_a, db_b) as intruder:  # SELECT of B's index cannot be denied per index ...
        for command in (["GET", f"{b}:secret"], ["SET", f"{b}:secret", "x"], ["DEL", f"{b}:secret"],
                        ["PUBLISH", f"{b}:events", "x"], ["MOVE", f"{a}:k", str(db_b)]):
            with pytest.raises(redis.exceptions.NoPermissionError):  # ... but B's keys stay out of reach
                intruder.execute_command(*command)
        with pytest.raises(redis.exceptions.ResponseError, match="can't access at least one of the keys"):
            intruder.eval(f"return redis.call('GET', '{b}:secret')", 0)  # scripts run under the same ACL
        for command in DENIED:
            with pytest.raises(redis.exceptions.NoPermissionError):
                intruder.execute_command(*command)
        with pytest.raises(redis.exceptions.NoPermissionError):
            intruder.execute_command("SUBSCRIBE", f"{b}:events")
    for command in DENIED_DRYRUN:
        verdict = admin_redis.execute_command("ACL", "DRYRUN", user_a["user"], *command)
        assert "no permissions" in verdict, (command, verdict)
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(**REDIS, username=user_b["user"], password=user_a["password"]).ping()
    assert in_db(admin_redis, db_b).get(f"{b}:secret") == "b-data"
    assert in_db(admin_redis, db_b).dbsize() == 1 and getuser(admin_redis, user_b["user"])["enabled"]


def test_a_purge_leaves_the_marker_of_the_workspace_that_made_the_user_again_meanwhile(acl_user, owner, admin_redis,
                                                                                       monkeypatch):
    """Workspace 1 deletes the user; before it unclaims the name, workspace 2 (same project) claims it and
    makes the user anew. Unclaiming by owner alone left that user without a marker: every later up refused."""
    import providers.redis.acl_user

    ws1 = props("redis", "cache", "acl_user", owner, owner, stack="ws1", purge=True)
    ws2 = props("redis", "cache", "acl_user", owner, owner, stack="ws2", purge=True)
    outs = acl_user.create(acl_user.check({}, ws1).inputs).outs
    save = providers.redis.acl_user._save_acl

    def made_again_meanwhile(client):
        save(client)
        monkeypatch.setattr(providers.redis.acl_user, "_save_acl", save)
        acl_user.create(acl_user.check({}, ws2).inputs)

    monkeypatch.setattr(providers.redis.acl_user, "_save_acl", made_again_meanwhile)
    acl_user.delete("id", outs)
    marker = json.loads(admin_redis.hget(ACL_OWNERS_KEY, owner))
    assert (marker["owner"], marker["stack"]) == (owner, "ws2")
    assert admin_redis.execute_command("ACL", "GETUSER", owner) is not None
