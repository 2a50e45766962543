"""Redis: project A's ACL user (REDIS_* as `devstack env` gives them) against B's keys, in B's index.

The boundary is the key pattern `~<project>:*`, not the index: A may SELECT
B's index (docs/engines.md says why), so every attempt here runs in B's
index on B's key prefix, and the server refuses each with NOPERM
(redis-py's NoPermissionError). Listing (KEYS, SCAN), FLUSHDB and ACL are
refused to every tenant, on its own keys too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from tests.isolation.conftest import Matrix, Op, Tenants, cases

ENGINE = "redis"


def client(tenants: Tenants, project: str, target: str) -> redis.Redis:
    """`project`'s service's client, as its REDIS_* variables give it, on `target`'s index."""
    env = tenants.env(project, ENGINE)
    return redis.Redis(host=env["REDIS_HOST"], port=int(env["REDIS_PORT"]), username=env["REDIS_USERNAME"],
                       password=env["REDIS_PASSWORD"], db=int(tenants.env(target, ENGINE)["REDIS_DB"]),
                       decode_responses=True, socket_timeout=5)


def prefix(tenants: Tenants, project: str) -> str:
    return tenants.env(project, ENGINE)["REDIS_KEY_PREFIX"]


def denied(err: BaseException) -> str | None:
    return "NOPERM" if isinstance(err, redis.exceptions.NoPermissionError) else None


@pytest.fixture(scope="module")
def seeded(tenants: Tenants) -> Tenants:
    """Each project's service sets `<prefix>k` in its own index, with its own user."""
    for project in (tenants.a, tenants.b):
        with client(tenants, project, project) as own:
            assert own.set(f"{prefix(tenants, project)}k", "v") is True
    return tenants


def as_a(act: Callable[..., object]):
    """`act(client, keys=target's key prefix, user=target's user, mine=A's key prefix)` with A's client on
    the target's index."""
    def run(tenants: Tenants, target: str) -> None:
        env = tenants.env(target, ENGINE)
        with client(tenants, tenants.a, target) as conn:
            act(conn, keys=env["REDIS_KEY_PREFIX"], user=env["REDIS_USERNAME"], mine=prefix(tenants, tenants.a))
    return run


def read(conn: redis.Redis, keys: str, **_) -> None:
    assert conn.get(f"{keys}k") == "v"


def copy_out(conn: redis.Redis, keys: str, mine: str, **_) -> None:
    """COPY the target's key under A's own prefix (its value would then be A's to read)."""
    assert conn.copy(f"{keys}k", f"{mine}copied", replace=True) is True
    assert conn.delete(f"{mine}copied") == 1


def write_then_delete(conn: redis.Redis, keys: str, **_) -> None:
    conn.set(f"{keys}w", "x")
    assert conn.delete(f"{keys}w") == 1



OPS = [
    Op("read: GET", as_a(read)),
    Op("read: COPY into own prefix", as_a(copy_out)),
    Op("write: SET", as_a(lambda c, keys, **_: c.set(f"{keys}w", "x"))),
    Op("write: PUBLISH", as_a(lambda c, keys, **_: c.publish(f"{keys}events", "x"))),
    Op("delete: DEL", as_a(write_then_delete)),
    Op("delete: DEL existing key", as_a(lambda c, keys, **_: c.delete(f"{keys}k")), own=False),
    Op("list: KEYS", as_a(lambda c, **_: c.keys("*")), own=False),
    Op("list: SCAN", as_a(lambda c, **_: c.scan(0)), own=False),
    Op("delete: FLUSHDB", as_a(lambda c, **_: c.flushdb()), own=False),
    Op("administer: ACL SETUSER", as_a(lambda c, user, **_: c.acl_setuser(user, enabled=True, passwords=["+taken"])),
       own=False),
    Op("administer: ACL DELUSER", as_a(lambda c, user, **_: c.acl_deluser(user)), own=False),
    Op("administer: CONFIG SET", as_a(lambda c, **_: c.config_set("maxmemory", "1mb")), own=False),
]


@pytest.mark.parametrize("op,target", cases(OPS))
def test_redis(seeded: Tenants, matrix: Matrix, op: Op, target: str) -> None:
    matrix.run(ENGINE, seeded, op, target, denied)
