"""Helpers of the Redis provider tests: clients of the local server and its marker hashes."""

from __future__ import annotations

import json

import pytest
import redis

from providers.redis.client import ALLOCATIONS_KEY
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
