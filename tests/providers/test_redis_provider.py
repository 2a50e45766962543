"""The redis `redis_index` and `acl_user` kinds against the real local server.

Every kind: create; create again (adoption, no change); update in place; a
replace-classified diff; drift through read; retained and purged delete;
identity conflicts that change nothing; bad params. Plus tenant isolation
(project A's credentials against B's keys, channels and index) and concurrent
allocation by two provider instances (two stacks).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import psycopg
import pytest
import redis
from psycopg import sql

from providers.credentials import hashed_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, Unsupported
from providers.identity import Identity
from providers.postgres import Database
from providers.redis import ACL_OWNERS_KEY, ALLOCATIONS_KEY, AclUser, AclUserSpec, RedisIndex, admin_client
from providers.identity import PREFIXED
from tests.providers.conftest import ROOT, props, stopped_answering

REDIS = {"host": "127.0.0.1", "port": 26379}
ACL_FILE = ROOT / ".devstack" / "engines" / "redis" / "users.acl"


@pytest.fixture
def admin_redis(admin):
    with redis.Redis(**REDIS, username=admin["redis"].user, password=admin["redis"].password,
                     decode_responses=True) as client:
        yield client


@pytest.fixture
def cleanup(admin_redis, owner):
    """Frees every index, user and marker whose name starts with the test's owner (emptying those dbs)."""
    yield
    for field, text in admin_redis.hgetall(ALLOCATIONS_KEY).items():
        if field.startswith(owner):
            try:
                db = int(json.loads(text)["db"])
                with redis.Redis(**REDIS, username=admin_redis.connection_pool.connection_kwargs["username"],
                                 password=admin_redis.connection_pool.connection_kwargs["password"], db=db) as other:
                    other.flushdb()
            except (ValueError, KeyError, TypeError):
                pass  # a garbage marker a test wrote: nothing was allocated for it
            admin_redis.hdel(ALLOCATIONS_KEY, field)
    for field in admin_redis.hkeys(ACL_OWNERS_KEY):
        if field.startswith(owner):
            admin_redis.hdel(ACL_OWNERS_KEY, field)
    for user in admin_redis.acl_users():
        if user.startswith(owner):
            admin_redis.acl_deluser(user)
    admin_redis.acl_save()  # so no test user lingers in the ACL file
    for key in admin_redis.scan_iter(match=f"{owner}*"):
        admin_redis.delete(key)


@pytest.fixture
def index(configure, cleanup):
    return configure(RedisIndex())


@pytest.fixture
def acl_user(configure, cleanup):
    return configure(AclUser())


def tenant(outs: dict, db: int = 0) -> redis.Redis:
    return redis.Redis(**REDIS, username=outs["user"], password=outs["password"], db=db, decode_responses=True)


def in_db(admin_redis, db: int) -> redis.Redis:
    kwargs = admin_redis.connection_pool.connection_kwargs
    return redis.Redis(**REDIS, username=kwargs["username"], password=kwargs["password"], db=db, decode_responses=True)


def allocation(admin_redis, field: str) -> dict | None:
    text = admin_redis.hget(ALLOCATIONS_KEY, field)
    return None if text is None else json.loads(text)


def free_index(admin_redis) -> int:
    """An index no marker holds and no key occupies (the test fails loudly when there is none)."""
    taken = {json.loads(v).get("db") for v in admin_redis.hvals(ALLOCATIONS_KEY) if v.startswith("{")}
    count = int(admin_redis.config_get("databases")["databases"])
    for db in range(count - 1, 0, -1):
        if db not in taken and in_db(admin_redis, db).dbsize() == 0:
            return db
    pytest.fail("every redis index is allocated: purge leftovers first")


def check_failures(provider, inputs: dict, olds: dict | None = None) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check(olds or {}, inputs).failures}


# --- redis_index ---------------------------------------------------------------


@pytest.mark.parametrize("denied", ["-config", "-@scripting"])
def test_an_admin_without_a_command_devstack_needs_is_named_with_the_fix(owner, admin_redis, cleanup, denied):
    """Managed Redis denies or renames CONFIG; the up had failed part-way with a raw NoPermissionError."""
    from devstack import doctor
    from tests.conftest import configured

    boss = f"{owner}-boss"  # removed by `cleanup`, as the test's own user
    admin_redis.acl_setuser(boss, enabled=True, passwords=["+boss-pw-1"], keys=["*"], channels=["*"],
                            commands=["+@all", denied])
    shared = {"cache": {"engine": "redis", **REDIS, "adminUser": boss, "adminSecret": "redisAdmin"}}
    provider = configured(RedisIndex(), {"shared": shared}, {"redis": "boss-pw-1"})
    with pytest.raises(Unsupported, match=f"its admin '{boss}' cannot run a command devstack needs .*no "
                                          f"permissions.*ACL SETUSER {boss} ~\\* &\\* \\+@all"):
        provider.create(props("redis", "cache", "redis_index", owner, owner))
    assert not [field for field in admin_redis.hkeys(ALLOCATIONS_KEY) if field.startswith(owner)]
    # The doctor had said "admin ok".
    instance = provider._instances["cache"]
    health = doctor.check_instance(instance, ["redis_index"], local_port=None)
    assert (health.ok, health.admin) == (False, False) and f"{boss!r} cannot run" in health.problem
    assert f"ACL SETUSER {boss} ~* &* +@all" in health.fix
    # ... and the local engine's admin passes.
    admin = configured(RedisIndex(), {"shared": {"cache": {**shared["cache"], "adminUser": admin_redis.connection_pool.
                                                           connection_kwargs["username"]}}},
                       {"redis": admin_redis.connection_pool.connection_kwargs["password"]})
    assert doctor.check_instance(admin._instances["cache"], ["redis_index"], local_port=None).ok


def test_index_create_adopt_and_stable_across_stacks(index, configure, owner, admin_redis):
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    first = index.create(inputs)
    assert first.id == f"redis/cache/redis_index/{owner}@{owner}"
    db = first.outs["db"]
    assert 1 <= db < int(admin_redis.config_get("databases")["databases"])
    marker = allocation(admin_redis, owner)
    assert marker["db"] == db and marker["owner"] == owner and marker["managed-by"] == "devstack"
    assert marker["kind"] == "redis_index" and marker["stack"] == "test"
    assert index.create(inputs).outs == first.outs  # run twice: same index, nothing changes
    other_process = configure(RedisIndex())
    assert other_process.create(inputs).outs["db"] == db  # stable for the same owner/name
    second = index.create(props("redis", "cache", "redis_index", "jobs", owner)).outs
    assert second["db"] != db and allocation(admin_redis, f"{owner}-jobs")["db"] == second["db"]


def test_index_update_in_place_and_replace_on_pinned_index(index, owner, admin_redis):
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    outs = index.create(inputs).outs
    moved = {**inputs, "stack": "other-stack", "purge": True}
    diff = index.diff("id", outs, moved)
    assert diff.changes and diff.replaces == []
    assert index.update("id", outs, moved).outs["db"] == outs["db"]
    assert allocation(admin_redis, owner)["stack"] == "other-stack"
    pinned = {**inputs, "stack": "other-stack", "params": {"index": outs["db"] + 1}}  # as the marker says now
    purged = {**outs, "purge": True}
    assert index.diff("id", purged, {**pinned, "purge": True}).replaces == ["params.index"]
    assert index.diff("id", purged, {**pinned, "purge": True}).delete_before_replace is True
    # Retained (not purged) and then re-created with another pin: a clear error, not a silent move.
    with pytest.raises(Unsupported, match=f"already holds index {outs['db']}"):
        index.create(pinned)


def test_index_pinned_to_the_one_it_holds_or_unpinned_stays(index, owner, admin_redis):
    """Pinning the index it holds, unpinning it, or declaring it again unpinned after it was retained
    pinned: the same index, updated in place, never replaced (with purge, that empties it)."""
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    outs = index.create(inputs).outs
    in_db(admin_redis, outs["db"]).set(f"{owner}:kept", "1")
    pinned = {**inputs, "params": {"index": outs["db"]}}
    diff = index.diff("id", outs, pinned)
    assert diff.changes and diff.replaces == []
    outs = index.update("id", outs, pinned).outs
    assert allocation(admin_redis, owner)["pinned"] is True and outs["params"] == {"index": outs["db"]}
    diff = index.diff("id", outs, inputs)
    assert diff.changes and diff.replaces == []
    assert index.check(outs, inputs).failures == []  # retained (purge: false), and no replacement to refuse
    moved = index.check(outs, {**inputs, "params": {"index": outs["db"] + 1}}).failures
    assert [f.property for f in moved] == ["params.index"] and "while the redis_index is retained" in moved[0].reason
    unpinned = index.update("id", outs, inputs).outs
    assert unpinned["db"] == outs["db"] and allocation(admin_redis, owner)["pinned"] is False
    index.update("id", unpinned, pinned)  # pinned and retained, then declared again without the pin
    assert index.create(inputs).outs["db"] == outs["db"]
    assert in_db(admin_redis, outs["db"]).get(f"{owner}:kept") == "1"
    # Another index is still a replacement.
    assert index.diff("id", {**outs, "purge": True},
                      {**inputs, "params": {"index": outs["db"] + 1}, "purge": True}).replaces == ["params.index"]


def test_index_pinned_and_the_index_of_someone_else(index, owner, admin_redis):
    wanted = free_index(admin_redis)
    outs = index.create(props("redis", "cache", "redis_index", owner, owner, {"index": wanted})).outs
    assert outs["db"] == wanted and allocation(admin_redis, owner)["pinned"] is True
    with pytest.raises(Conflict, match=f"index {wanted} is allocated to another declaration"):
        index.create(props("redis", "cache", "redis_index", "b", owner, {"index": wanted}))
    assert allocation(admin_redis, f"{owner}-b") is None


def test_a_pin_the_engine_cannot_give_fails_check_before_the_replace_empties_the_index(index, owner, admin_redis):
    """A purging replacement empties and frees the old index first: a new pin out of range, held by another
    declaration or by keys devstack did not put there must stop at check (preview), not at the create."""
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner, purge=True)).inputs
    outs = index.create(inputs).outs
    in_db(admin_redis, outs["db"]).set(f"{owner}:kept", "1")
    held = index.create(props("redis", "cache", "redis_index", "b", owner)).outs["db"]
    occupied = free_index(admin_redis)
    in_db(admin_redis, occupied).set("foreign", "data")
    count = int(admin_redis.config_get("databases")["databases"])
    try:
        for pin, reason in ((count, f"{count} is out of range"), (held, f"index {held} is allocated"),
                            (occupied, f"index {occupied} is allocated to another declaration or holds keys")):
            news = props("redis", "cache", "redis_index", owner, owner, {"index": pin}, purge=True)
            found = check_failures(index, news, olds=inputs)
            assert reason in found["params.index"] and "not replaced" in found["params.index"], found
        assert in_db(admin_redis, outs["db"]).get(f"{owner}:kept") == "1"
        # The index it holds, or a free one, passes.
        assert check_failures(index, props("redis", "cache", "redis_index", owner, owner, {"index": outs["db"]},
                                           purge=True), olds=inputs) == {}
        in_db(admin_redis, occupied).delete("foreign")
        assert check_failures(index, props("redis", "cache", "redis_index", owner, owner, {"index": occupied},
                                           purge=True), olds=inputs) == {}
    finally:
        in_db(admin_redis, occupied).delete("foreign")


def test_index_holding_foreign_keys_is_never_handed_out(index, owner, admin_redis):
    occupied = free_index(admin_redis)
    in_db(admin_redis, occupied).set(f"{owner}:foreign", "data")
    try:
        with pytest.raises(Conflict, match="holds keys devstack did not put there"):
            index.create(props("redis", "cache", "redis_index", owner, owner, {"index": occupied}))
        assert index.create(props("redis", "cache", "redis_index", owner, owner)).outs["db"] != occupied
        assert in_db(admin_redis, occupied).get(f"{owner}:foreign") == "data"
    finally:
        in_db(admin_redis, occupied).delete(f"{owner}:foreign")


def test_index_drift_through_read(index, owner, admin_redis):
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    outs = index.create(inputs).outs
    entry = allocation(admin_redis, owner)
    admin_redis.hset(ALLOCATIONS_KEY, owner, json.dumps({**entry, "db": outs["db"] + 100}))
    assert index.read("id", outs).outs["db"] == outs["db"] + 100  # refresh shows the live index
    admin_redis.hset(ALLOCATIONS_KEY, owner, json.dumps({**entry, "owner": "intruder"}))
    assert index.read("id", outs).id == ""  # another project's now: gone from this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was changed"):
        index.update("id", outs, inputs)
    admin_redis.hdel(ALLOCATIONS_KEY, owner)
    assert index.read("id", outs).id == ""


def test_index_retained_delete_keeps_data_and_purge_empties_and_frees(index, acl_user, owner, admin_redis):
    outs = index.create(props("redis", "cache", "redis_index", owner, owner)).outs
    user = acl_user.create(props("redis", "cache", "acl_user", owner, owner)).outs
    tenant(user, outs["db"]).set(f"{owner}:order", "1")
    index.delete("id", outs)  # no purge: retained
    assert allocation(admin_redis, owner)["db"] == outs["db"]
    assert in_db(admin_redis, outs["db"]).get(f"{owner}:order") == "1"
    index.delete("id", {**outs, "purge": True})
    assert allocation(admin_redis, owner) is None
    assert in_db(admin_redis, outs["db"]).dbsize() == 0  # the next project gets an empty index
    index.delete("id", {**outs, "purge": True})  # already gone is fine


def test_index_conflicts_change_nothing(index, owner, admin_redis):
    index.create(props("redis", "cache", "redis_index", "b-c", owner))  # field {owner}-b-c
    before = admin_redis.hget(ALLOCATIONS_KEY, f"{owner}-b-c")
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
        index.create(props("redis", "cache", "redis_index", "c", f"{owner}-b"))
    assert admin_redis.hget(ALLOCATIONS_KEY, f"{owner}-b-c") == before
    admin_redis.hset(ALLOCATIONS_KEY, f"{owner}-x", "not a devstack marker")
    with pytest.raises(Conflict, match="devstack does not manage"):
        index.create(props("redis", "cache", "redis_index", "x", owner))
    assert admin_redis.hget(ALLOCATIONS_KEY, f"{owner}-x") == "not a devstack marker"
    with pytest.raises(Conflict):  # and a purge does not touch it either
        index.delete("id", {**props("redis", "cache", "redis_index", "x", owner), "purge": True})


def test_index_all_taken_is_a_clear_error(index, owner, admin_redis):
    count = int(admin_redis.config_get("databases")["databases"])
    allocated = []
    with pytest.raises(Unsupported, match=f"every logical database 1..{count - 1} is allocated"):
        for n in range(count):  # bounded: at most every index once
            allocated.append(index.create(props("redis", "cache", "redis_index", f"f{n}", owner)).outs["db"])
    assert len(allocated) == len(set(allocated)) and allocated  # no index twice


@pytest.mark.parametrize(
    "params, field",
    [
        pytest.param({"index": 0}, "params.index", id="index-0-is-shared"),
        pytest.param({"index": "two"}, "params.index", id="index-not-a-number"),
        pytest.param({"db": 3}, "params.db", id="unknown-param"),
    ],
)
def test_index_bad_params_name_the_field(index, owner, params, field):
    assert field in check_failures(index, props("redis", "cache", "redis_index", owner, owner, params))


def test_index_bad_names_and_out_of_range_index(index, owner):
    with pytest.raises(InvalidSpec, match="`devstack:` key prefix is reserved"):
        RedisIndex.engine_name("devstack", "devstack", naming=PREFIXED)
    with pytest.raises(InvalidSpec, match="letters, digits"):
        RedisIndex.engine_name("a:b", owner, naming=PREFIXED)
    with pytest.raises(InvalidSpec, match="params.index 999 is out of range"):
        index.create(props("redis", "cache", "redis_index", owner, owner, {"index": 999}))
    # Check says so first, so the preview fails rather than the up.
    found = check_failures(index, props("redis", "cache", "redis_index", owner, owner, {"index": 999}))
    assert "out of range" in found["params.index"] and "the redis_index was not made" in found["params.index"]


def test_engine_down_names_engine_address_and_fix(configure, owner):
    provider = configure(RedisIndex())
    provider._instances["cache"] = provider._instances["cache"].model_copy(update={"port": 1})
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=r"redis instance 'cache' at 127\.0\.0\.1:1.*tools\.engines start redis"):
        provider.create(props("redis", "cache", "redis_index", owner, owner))
    assert time.monotonic() - started < 5  # no retry loop with backoff


def test_a_server_gone_in_the_middle_of_a_call_is_named_not_a_traceback(through_proxy):
    """Not only at the connect: a server that goes away between the PING and a command is the engine's error."""
    instance, proxy = through_proxy(RedisIndex(), "cache")
    with pytest.raises(EngineUnavailable, match=stopped_answering("redis", "cache", proxy.port)):
        with admin_client(instance) as client:
            proxy.stop()
            client.hget(ALLOCATIONS_KEY, "anyone")


def test_a_server_that_accepts_connections_but_does_not_answer_is_named_as_such(through_proxy, monkeypatch):
    """Stopped with its connections open (SIGSTOP): the kernel still accepts, and "Timeout reading from
    socket" had been reported as a connect failure, as if the server were not running."""
    import providers.redis

    monkeypatch.setattr(providers.redis, "ANSWER_LIMIT", 1.0)  # 10 s in earnest
    instance, proxy = through_proxy(RedisIndex(), "cache")
    proxy.stall()
    with pytest.raises(EngineUnavailable, match=rf"cannot connect to redis instance 'cache' at 127\.0\.0\.1:"
                                                rf"{proxy.port}: it accepts connections but did not answer within 1s"):
        with admin_client(instance):
            pass


def test_another_engine_at_the_address_is_named_as_such_not_a_traceback(configure, owner):
    """A port typo that lands on another engine (NATS here) answers, but not as Redis does."""
    provider = configure(RedisIndex())
    provider._instances["cache"] = provider._instances["cache"].model_copy(update={"port": 24222})
    with pytest.raises(EngineUnavailable, match=r"redis instance 'cache' at 127\.0\.0\.1:24222.*does not answer as "
                                                r"Redis: check shared\.cache\.port"):
        provider.create(props("redis", "cache", "redis_index", owner, owner))


@pytest.mark.timeout(60)
def test_a_tenants_long_script_is_named_not_taken_for_another_engine(acl_user, configure, owner):
    """A project's user may EVAL, and a long script holds the whole server: every client gets BUSY (past
    the server's busy threshold, 5s by default). That is said, not "check the port"."""
    outs = acl_user.create(props("redis", "cache", "acl_user", owner, owner)).outs
    spin = "local t = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) < t + 8 do end"
    running = threading.Thread(target=lambda: tenant(outs).eval(spin, 0))
    running.start()
    try:
        time.sleep(6)
        with pytest.raises(EngineUnavailable, match="a script someone runs there holds every client") as refused:
            configure(RedisIndex()).create(props("redis", "cache", "redis_index", owner, owner))
        assert "port" not in str(refused.value).split("(")[-1]
    finally:
        running.join()


# --- acl_user -------------------------------------------------------------------


def getuser(admin_redis, name: str) -> dict | None:
    return admin_redis.acl_getuser(name)


def test_user_create_adopt_and_persisted(acl_user, owner, admin_redis):
    inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    first = acl_user.create(inputs)
    assert first.outs["user"] == owner and first.outs["keyPrefix"] == f"{owner}:"
    live = getuser(admin_redis, owner)
    assert live["enabled"] is True and live["keys"] == [f"~{owner}:*"] and live["channels"] == [f"&{owner}:*"]
    marker = json.loads(admin_redis.hget(ACL_OWNERS_KEY, owner))
    assert marker["owner"] == owner and marker["kind"] == "acl_user" and len(marker["fingerprint"]) == 64
    assert acl_user.create(inputs).outs == first.outs  # run twice: same password, nothing changes
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
    assert acl_user.read("id", outs).outs == outs
    updated = acl_user.update("id", outs, {**inputs, "params": {**inputs["params"], "rotation": 1}}).outs
    assert acl_user.read("id", updated).outs == updated


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
        assert before.scan(0, match=f"{owner}:*")[1] == [f"{owner}:k"]
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
    assert acl_user.read("id", earlier).outs == earlier  # no drift
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
    assert acl_user.read("id", outs).id == ""  # another project's now: gone from this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        acl_user.update("id", outs, inputs)
    admin_redis.acl_deluser(owner)
    assert acl_user.read("id", outs).id == ""


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


# --- isolation and concurrency ------------------------------------------------------


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


def test_two_stacks_allocate_in_parallel_without_duplicates(configure, owner, admin_redis, admin, cleanup):
    """5 rounds x 4 threads: two provider instances race for indexes and postgres databases. Each stack's
    `adopt` names the other for the project both declare (else the second would be refused, as it should)."""
    rounds, stacks = 5, []
    for index in range(2):
        adopt = dict.fromkeys((f"{owner}r{round_}s" for round_ in range(rounds)), f"stack{1 - index}")
        stacks.append((configure(RedisIndex(), adopt), configure(Database(), adopt)))
    started = time.monotonic()
    try:
        for round_ in range(rounds):
            # Threads 0 and 1 declare the same project from two stacks; 2 and 3 are two other projects.
            owners = [f"{owner}r{round_}s", f"{owner}r{round_}s", f"{owner}r{round_}x", f"{owner}r{round_}y"]

            def one(thread: int) -> int:
                index, database = stacks[thread % 2]
                stack = f"stack{thread % 2}"
                name = owners[thread]
                database.create(props("postgres", "pg", "database", name, name, stack=stack))
                return index.create(props("redis", "cache", "redis_index", name, name, stack=stack)).outs["db"]

            with ThreadPoolExecutor(max_workers=4) as pool:
                dbs = list(pool.map(one, range(4)))
            assert dbs[0] == dbs[1] and len({dbs[0], dbs[2], dbs[3]}) == 3, dbs
            for name in set(owners):  # purge the round, as the stack that marked it last: at most 3 indexes held
                for provider, engine, instance, kind in ((stacks[0][0], "redis", "cache", "redis_index"),
                                                         (stacks[0][1], "postgres", "pg", "database")):
                    for stack in ("stack0", "stack1"):
                        try:
                            provider.delete("id", {**props(engine, instance, kind, name, name, stack=stack), "purge": True})
                            break
                        except Conflict:  # the other stack's now: its purge drops it
                            continue
    finally:
        with psycopg.connect(host="127.0.0.1", port=25432, user=admin["postgres"].user,
                             password=admin["postgres"].password, dbname="postgres", autocommit=True) as conn:
            for (name,) in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (owner,)).fetchall():
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            for (name,) in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (owner,)).fetchall():
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    print(f"5 rounds x 4 threads (redis_index + postgres database): {time.monotonic() - started:.2f}s")



def test_a_purge_leaves_the_marker_of_the_workspace_that_made_the_user_again_meanwhile(acl_user, owner, admin_redis,
                                                                                       monkeypatch):
    """Workspace 1 deletes the user; before it unclaims the name, workspace 2 (same project) claims it and
    makes the user anew. Unclaiming by owner alone left that user without a marker: every later up refused."""
    import providers.redis

    ws1 = props("redis", "cache", "acl_user", owner, owner, stack="ws1", purge=True)
    ws2 = props("redis", "cache", "acl_user", owner, owner, stack="ws2", purge=True)
    outs = acl_user.create(acl_user.check({}, ws1).inputs).outs
    save = providers.redis._save_acl

    def made_again_meanwhile(client):
        save(client)
        monkeypatch.setattr(providers.redis, "_save_acl", save)
        acl_user.create(acl_user.check({}, ws2).inputs)

    monkeypatch.setattr(providers.redis, "_save_acl", made_again_meanwhile)
    acl_user.delete("id", outs)
    marker = json.loads(admin_redis.hget(ACL_OWNERS_KEY, owner))
    assert (marker["owner"], marker["stack"]) == (owner, "ws2")
    assert admin_redis.execute_command("ACL", "GETUSER", owner) is not None
