"""Fixtures of the Redis provider tests: the admin's client, the providers, and the cleanup of each test's owner."""

from __future__ import annotations

import json

import pytest
import redis

from providers.redis.acl_user import AclUser
from providers.redis.client import ACL_OWNERS_KEY, ALLOCATIONS_KEY
from providers.redis.redis_index import RedisIndex
from tests.providers.redis.helpers import REDIS


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
