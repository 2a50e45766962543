"""The Redis admin client against the real local server: every way the engine can fail is named, with its fix."""

from __future__ import annotations

import threading
import time

import pytest

from providers.errors import EngineUnavailable, Unsupported
from providers.redis.client import ALLOCATIONS_KEY, admin_client
from providers.redis.redis_index import RedisIndex
from tests.providers.conftest import props, stopped_answering
from tests.providers.redis.helpers import REDIS, tenant
from tools.engines.ports import PORTS


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
    import providers.redis.client

    monkeypatch.setattr(providers.redis.client, "ANSWER_LIMIT", 1.0)  # 10 s in earnest
    instance, proxy = through_proxy(RedisIndex(), "cache")
    proxy.stall()
    with pytest.raises(EngineUnavailable, match=rf"cannot connect to redis instance 'cache' at 127\.0\.0\.1:"
                                                rf"{proxy.port}: it accepts connections but did not answer within 1s"):
        with admin_client(instance):
            pass


def test_another_engine_at_the_address_is_named_as_such_not_a_traceback(configure, owner):
    """A port typo that lands on another engine (NATS here) answers, but not as Redis does."""
    provider = configure(RedisIndex())
    provider._instances["cache"] = provider._instances["cache"].model_copy(update={"port": PORTS["nats"]})
    with pytest.raises(EngineUnavailable, match=rf"redis instance 'cache' at 127\.0\.0\.1:{PORTS['nats']}.*does not answer as "
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
