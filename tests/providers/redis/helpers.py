"""Helpers of the Redis provider tests: clients of the local server and its marker hashes."""

from __future__ import annotations

import json

import pytest
import redis

from providers.redis.client import ACL_OWNERS_KEY, ALLOCATIONS_KEY
from tests.providers.conftest import ROOT
from tools.engines.ports import PORTS

REDIS = {"host": "127.0.0.1", "port": PORTS["redis"]}


ACL_FILE = ROOT / ".devstack" / "engines" / "redis" / "users.acl"


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


def getuser(admin_redis, name: str) -> dict | None:
    return admin_redis.acl_getuser(name)


def free_owner(admin_redis: redis.Redis, owner: str) -> None:
    """Free every index, user, marker and key whose name starts with `owner` (emptying those dbs) on the
    server `admin_redis` reaches, over plaintext or TLS."""
    pool = admin_redis.connection_pool
    for field, text in admin_redis.hgetall(ALLOCATIONS_KEY).items():
        if field.startswith(owner):
            try:
                db = int(json.loads(text)["db"])
            except (ValueError, KeyError, TypeError):
                db = None  # a garbage marker a test wrote: nothing was allocated for it
            if db is not None:
                # The admin's connection settings (TLS ones included) on that db.
                other = redis.ConnectionPool(connection_class=pool.connection_class, **{**pool.connection_kwargs, "db": db})
                try:
                    redis.Redis(connection_pool=other).flushdb()
                finally:
                    other.disconnect()
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
