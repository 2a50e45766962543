"""Fixtures of the Redis provider tests: the admin's client, the providers, and the cleanup of each test's owner."""

from __future__ import annotations


import pytest
import redis

from providers.redis.acl_user import AclUser
from providers.redis.redis_index import RedisIndex
from tests.providers.redis.helpers import REDIS, free_owner


@pytest.fixture
def admin_redis(admin):
    with redis.Redis(**REDIS, username=admin["redis"].user, password=admin["redis"].password,
                     decode_responses=True) as client:
        yield client


@pytest.fixture
def cleanup(admin_redis, owner):
    """Frees every index, user and marker whose name starts with the test's owner (emptying those dbs)."""
    yield
    free_owner(admin_redis, owner)


@pytest.fixture
def index(configure, cleanup):
    return configure(RedisIndex())


@pytest.fixture
def acl_user(configure, cleanup):
    return configure(AclUser())
