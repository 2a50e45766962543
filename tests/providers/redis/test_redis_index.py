"""The redis `redis_index` kind against the real local server.

Create; create again (adoption, no change); update in place; a
replace-classified diff; drift through read; retained and purged delete;
identity conflicts that change nothing; bad params; concurrent allocation by
two provider instances (two stacks).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql

from providers.errors import Conflict, InvalidSpec, Unsupported
from providers.identity import PREFIXED
from providers.lifecycle import is_stale, without_clocks
from providers.postgres.database import Database
from providers.redis.client import ALLOCATIONS_KEY
from providers.redis.redis_index import RedisIndex
from tests.providers.conftest import props
from tests.providers.redis.helpers import allocation, check_failures, free_index, in_db, tenant
from tools.engines.ports import PORTS


def test_index_create_adopt_and_stable_across_stacks(index, configure, owner, admin_redis):
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    first = index.create(inputs)
    assert first.id == f"redis/cache/redis_index/{owner}@{owner}"
    db = first.outs["db"]
    assert 1 <= db < int(admin_redis.config_get("databases")["databases"])
    marker = allocation(admin_redis, owner)
    assert marker["db"] == db and marker["owner"] == owner and marker["managed-by"] == "devstack"
    assert marker["kind"] == "redis_index" and marker["stack"] == "test"
    # Run twice: same index, nothing changes.
    assert without_clocks(index.create(inputs).outs) == without_clocks(first.outs)
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
    assert is_stale(index.read("id", outs).outs)  # another project's now: stale in this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'.*nothing was changed"):
        index.update("id", outs, inputs)
    admin_redis.hdel(ALLOCATIONS_KEY, owner)
    assert is_stale(index.read("id", outs).outs)


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
        with psycopg.connect(host="127.0.0.1", port=PORTS["postgres"], user=admin["postgres"].user,
                             password=admin["postgres"].password, dbname="postgres", autocommit=True) as conn:
            for (name,) in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (owner,)).fetchall():
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            for (name,) in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (owner,)).fetchall():
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    print(f"5 rounds x 4 threads (redis_index + postgres database): {time.monotonic() - started:.2f}s")
