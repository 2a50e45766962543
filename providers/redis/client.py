"""Redis: the admin client, engine names, the marker hashes and the server's features."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

from providers import naming as naming_rules
from providers.clients import LazyModule
from providers.errors import EngineUnavailable, InvalidSpec, Unsupported
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.markers import marker_owner, ownership_marker

# Imported on the first engine call: the program, check and diff never need it.
redis_py = LazyModule("redis")

ENGINE_NAME = "redis"
ALLOCATIONS_KEY = "devstack:index-allocations"
ACL_OWNERS_KEY = "devstack:acl-owners"
#: The reserved keys live under `devstack:`; an owner of that name would get them in its key pattern.
RESERVED_OWNERS = frozenset({"devstack"})
#: Users every server has; never a tenant's.
RESERVED_USERS = frozenset({"default"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Server features by version, read in one place.
FEATURES = {
    # `%R~pattern` (read-only key permissions) arrived with ACL v2 in 7.0.
    "read_only_keys": lambda version: version >= (7, 0),
}

#: Seconds an admin command waits for its answer.
ANSWER_LIMIT = 10.0


def engine_name(name: str, owner: str, *, naming: int) -> str:
    """`<owner>` for the project's default declaration, `<owner>-<name>` otherwise (SANITIZED: not
    prefixed again, and sanitized).

    Raise InvalidSpec naming the rule a name breaks.
    """
    if naming != PREFIXED:
        if owner in RESERVED_OWNERS:
            raise InvalidSpec("map", f"owner {owner!r}", "the `devstack:` key prefix is reserved for devstack's own markers")
        mapped = naming_rules.redis(name)
        if mapped in RESERVED_USERS:
            raise InvalidSpec("map", f"name {name!r}", f"{mapped!r} is a user every Redis server has")
        return mapped
    for label, value in (("owner", owner), ("name", name)):
        if not _NAME.fullmatch(value):
            raise InvalidSpec(
                "map", f"{label} {value!r}",
                "Redis names use letters, digits, '_', '.' and '-' (at most 64, starting with a letter or digit)",
            )
    if owner in RESERVED_OWNERS:
        raise InvalidSpec("map", f"owner {owner!r}", "the `devstack:` key prefix is reserved for devstack's own markers")
    mapped = owner if name == owner else f"{owner}-{name}"
    if mapped in RESERVED_USERS:
        raise InvalidSpec("map", f"name {name!r}", f"{mapped!r} is a user every Redis server has")
    return mapped


def key_prefix(owner: str) -> str:
    """Every key and channel of a project starts with this."""
    return f"{owner}:"


def no_retry() -> redis_py.retry.Retry:
    """Fail fast: redis-py's default retries a refused connection, or a refused login, for seconds."""
    return redis_py.retry.Retry(redis_py.backoff.NoBackoff(), 0)


def admin_fix(user: str) -> str:
    """What a Redis admin short of devstack's needs is given (the provider's refusal and the doctor say it alike)."""
    return (f"give {user!r} `~* &* +@all` (`ACL SETUSER {user} ~* &* +@all`), with CONFIG, EVALSHA and ACL neither "
            "renamed nor disabled")


def connect(instance: SharedInstance, **options: Any) -> redis_py.Redis:
    """A client of `instance` (not connected yet) with `options`, over TLS as the instance says."""
    client = redis_py.Redis(host=instance.host, port=instance.port, **options, ssl=instance.tls is not None)
    if instance.tls is not None:
        client.connection_pool.connection_class = _tls_connection()
        client.connection_pool.connection_kwargs.update(ssl_context=instance.tls.ssl_context(),
                                                        server_name=instance.tls.server_name_for(instance.host))
    return client


@lru_cache(maxsize=None)
def _tls_connection() -> type:
    """redis-py's SSLConnection on the instance's one SSLContext, checking the certificate against its server
    name: redis-py makes a context per connection (reading the system's CA bundle each time, ~15 ms) and
    checks the host it connects to only. Made on first use: redis-py is imported on the first engine call."""

    class TlsConnection(redis_py.SSLConnection):
        def __init__(self, ssl_context: Any, server_name: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.ssl_context, self.server_name = ssl_context, server_name

        def _wrap_socket_with_ssl(self, sock: Any) -> Any:
            return self.ssl_context.wrap_socket(sock, server_hostname=self.server_name)

    return TlsConnection


@contextmanager
def admin_client(instance: SharedInstance) -> Iterator[redis_py.Redis]:
    """An admin client on db 0, checked with PING; EngineUnavailable when the server does not answer."""
    client = connect(instance, username=instance.admin_user, password=instance.password(),
                     socket_timeout=ANSWER_LIMIT, socket_connect_timeout=5, decode_responses=True, retry=no_retry())
    try:
        client.ping()
    except redis_py.RedisError as err:
        client.close()
        raise _unavailable(instance, err) from err
    with client:
        try:
            yield client
        except (redis_py.ConnectionError, redis_py.TimeoutError) as err:
            raise instance.stopped_answering(err) from err
        except redis_py.ResponseError as err:
            # An admin with less than the local engine's (managed Redis renames or denies CONFIG, say).
            if isinstance(err, redis_py.exceptions.NoPermissionError) or str(err).startswith("unknown command"):
                raise Unsupported("use", f"redis instance {instance.name!r} at {instance.address}",
                                  f"its admin {instance.admin_user!r} cannot run a command devstack needs ({err})",
                                  f"{admin_fix(instance.admin_user)}, then run it again") from err
            raise


def _unavailable(instance: SharedInstance, err: Exception) -> EngineUnavailable:
    """The PING of a new admin client failed: why, and the fix."""
    cause = str(err) or type(err).__name__
    if isinstance(err, redis_py.AuthenticationError):
        hint = f"check devstack:{instance.admin_secret} in the stack config"
    elif isinstance(err, redis_py.TimeoutError) and "connecting" not in cause:  # connected: SIGSTOP, say
        cause, hint = f"it accepts connections but did not answer within {ANSWER_LIMIT:.0f}s", instance.start_hint()
    elif isinstance(err, (redis_py.ConnectionError, redis_py.TimeoutError)):
        hint = _connection_hint(instance, cause)
    elif str(err).startswith("BUSY"):  # any client's long script holds the whole server
        hint = "a script someone runs there holds every client; an admin can end it (SCRIPT KILL), then run it again"
    else:  # something answers there, but not as Redis does: another engine's port, say
        hint = f"it does not answer as Redis: check shared.{instance.name}.port in the stack config"
    return EngineUnavailable("connect to", f"redis instance {instance.name!r} at {instance.address}", cause, hint)


def _connection_hint(instance: SharedInstance, cause: str) -> str:
    """What to do when the connect failed: the TLS settings for a TLS failure, else start the server."""
    if instance.tls is not None and ("SSL" in cause or "certificate" in cause):
        return instance.tls_hint()
    if instance.tls is None and ("Connection reset" in cause or "closed by server" in cause):
        return (f"{instance.start_hint()}; a server that takes TLS only closes plaintext connections: then give "
                f"shared.{instance.name} a `tls:` block")
    return instance.start_hint()


def server_version(client: redis_py.Redis) -> tuple[int, ...]:
    """The server's major and minor version, for FEATURES."""
    return tuple(int(part) for part in str(client.info("server")["redis_version"]).split(".")[:2])


def marker_entry(text: str | None) -> dict[str, Any] | None:
    """A marker value of either hash parsed, or None when it is not one of ours."""
    if marker_owner(text) is None:
        return None
    return json.loads(text or "")


def kind_marker(ident: Identity, stack: str, **extra: Any) -> str:
    """The marker value a kind records in its hash: the ownership marker, the kind and `extra`."""
    return json.dumps({**json.loads(ownership_marker(ident, stack)), "kind": ident.kind, **extra}, sort_keys=True)
