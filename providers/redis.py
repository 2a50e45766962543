"""Redis: a logical database index and ACL users per project in a shared server.

Two reserved hashes in db 0 are the ownership markers (Redis has no comment
field); no tenant can touch them because no tenant's key pattern covers the
reserved `devstack:` prefix (the owner name `devstack` is refused):

- `devstack:index-allocations`: field = the redis_index engine name, value =
  the JSON marker plus the allocated `db`. Server-side Lua scripts allocate and
  release indexes atomically, so two stacks can never take the same index.
- `devstack:acl-owners`: field = ACL user name, value = the JSON marker plus a
  fingerprint of the user's ACL (`ACL GETUSER`) as we last set it, so `read`
  tells any out-of-band change (rules, password, enabled flag) from ours.

A scan of an engine compares these hashes with `ACL LIST` and the non-empty
databases: a user or index with a marker is managed (orphaned when no stack
holds it), one without is foreign. See docs/engines.md "Redis: what it can and cannot isolate" for what the
ACL rules can and cannot isolate.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field

from providers import naming as naming_rules
from providers.base import KindProvider, Observed
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.clients import LazyModule
from providers.credentials import Rotation, login_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound, Unsupported
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance

# Imported on the first engine call: the program, check and diff never need it.
redis_py = LazyModule("redis")

ENGINE = "redis"
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

#: ACL rules are applied in order: categories first, then single commands.
CATEGORIES = ("+@all", "-@dangerous", "-@admin")
#: Commands outside @dangerous/@admin that still reach across tenants on a shared server.
DENIED_COMMANDS = (
    "-move",  # moves a key into another logical database
    "-randomkey",  # returns any key name: it has no key argument for the key pattern to check
    "-acl",  # no ACL introspection or changes for tenants
    "-script|kill",  # would kill another tenant's running script
    "-script|flush",  # empties the server-wide script cache of every tenant
    "-function",  # functions are server-wide: FUNCTION FLUSH / LOAD REPLACE would hit every tenant
    "-pubsub|channels",  # lists every tenant's channel names
    "-pubsub|shardchannels",
    "-client|tracking",  # BCAST prefixes are not checked against key patterns: it would leak key names
)
#: SCAN is not filtered by key patterns (it lists every key name in the db): denied unless allowScan.
SCAN_DENIED = "-scan"


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


#: Seconds an admin command waits for its answer.
ANSWER_LIMIT = 10.0


def no_retry() -> redis_py.retry.Retry:
    """Fail fast: redis-py's default retries a refused connection, or a refused login, for seconds."""
    return redis_py.retry.Retry(redis_py.backoff.NoBackoff(), 0)


def admin_fix(user: str) -> str:
    """What a Redis admin short of devstack's needs is given (the provider's refusal and the doctor say it alike)."""
    return (f"give {user!r} `~* &* +@all` (`ACL SETUSER {user} ~* &* +@all`), with CONFIG, EVALSHA and ACL neither "
            "renamed nor disabled")


@contextmanager
def admin_client(instance: SharedInstance) -> Iterator[redis_py.Redis]:
    """An admin client on db 0, checked with PING; EngineUnavailable when the server does not answer."""
    client = redis_py.Redis(
        host=instance.host, port=instance.port, username=instance.admin_user, password=instance.password(),
        socket_timeout=ANSWER_LIMIT, socket_connect_timeout=5, decode_responses=True,
        retry=no_retry(),
    )
    try:
        client.ping()
    except redis_py.RedisError as err:
        client.close()
        cause = str(err) or type(err).__name__
        if isinstance(err, redis_py.AuthenticationError):
            hint = f"check devstack:{instance.admin_secret} in the stack config"
        elif isinstance(err, redis_py.TimeoutError) and "connecting" not in cause:  # connected: SIGSTOP, say
            cause, hint = f"it accepts connections but did not answer within {ANSWER_LIMIT:.0f}s", instance.start_hint()
        elif isinstance(err, (redis_py.ConnectionError, redis_py.TimeoutError)):
            hint = instance.start_hint()
        elif str(err).startswith("BUSY"):  # any client's long script holds the whole server
            hint = "a script someone runs there holds every client; an admin can end it (SCRIPT KILL), then run it again"
        else:  # something answers there, but not as Redis does: another engine's port, say
            hint = f"it does not answer as Redis: check shared.{instance.name}.port in the stack config"
        raise EngineUnavailable("connect to", f"redis instance {instance.name!r} at {instance.address}", cause, hint) from err
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


def _version(client: redis_py.Redis) -> tuple[int, ...]:
    return tuple(int(part) for part in str(client.info("server")["redis_version"]).split(".")[:2])


def _entry(text: str | None) -> dict[str, Any] | None:
    """A marker value parsed, or None when it is not one of ours."""
    if marker_owner(text) is None:
        return None
    return json.loads(text or "")


def _marker(ident: Identity, stack: str, **extra: Any) -> str:
    return json.dumps({**json.loads(ownership_marker(ident, stack)), "kind": ident.kind, **extra}, sort_keys=True)


# --- redis_index ---------------------------------------------------------------

# Atomic allocation: returns {status, detail}. An index is free when no marker
# holds it and it has no keys (an unmarked non-empty db is someone else's data).
ALLOCATE = """
local field, owner, marker = ARGV[1], ARGV[2], cjson.decode(ARGV[3])
local count, pinned = tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('SELECT', 0)
local function decode(text)
  local ok, entry = pcall(cjson.decode, text)
  if ok and type(entry) == 'table' and entry['managed-by'] == 'devstack' and tonumber(entry.db) then return entry end
  return nil
end
local current = redis.call('HGET', KEYS[1], field)
if current then
  local entry = decode(current)
  if not entry or entry.owner ~= owner then return {'conflict', current} end
  if pinned >= 0 and tonumber(entry.db) ~= pinned then return {'pinned-elsewhere', tostring(entry.db)} end
  marker.db = tonumber(entry.db)
  redis.call('HSET', KEYS[1], field, cjson.encode(marker))
  return {'existing', tostring(entry.db)}
end
local taken = {}
for _, text in ipairs(redis.call('HVALS', KEYS[1])) do
  local entry = decode(text)
  if entry then taken[tonumber(entry.db)] = true end
end
local function usable(index)
  if taken[index] then return false end
  redis.call('SELECT', index)
  local size = redis.call('DBSIZE')
  redis.call('SELECT', 0)
  return size == 0
end
local first, last = 1, count - 1
if pinned >= 0 then first, last = pinned, pinned end
for index = first, last do
  if usable(index) then
    marker.db = index
    redis.call('HSET', KEYS[1], field, cjson.encode(marker))
    return {'allocated', tostring(index)}
  end
end
if pinned >= 0 then return {'taken', tostring(pinned)} end
return {'full', tostring(count)}
"""

# Whether ALLOCATE could pin index ARGV[1] for field ARGV[2]: 'ours' (it holds it), 'allocated' (another
# declaration does), 'keys' (devstack did not put them there) or 'free'.
PROBE = """
local index, field = tonumber(ARGV[1]), ARGV[2]
redis.call('SELECT', 0)
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local ok, entry = pcall(cjson.decode, fields[i + 1])
  if ok and type(entry) == 'table' and entry['managed-by'] == 'devstack' and tonumber(entry.db) == index then
    if fields[i] == field then return 'ours' end
    return 'allocated'
  end
end
redis.call('SELECT', index)
local size = redis.call('DBSIZE')
redis.call('SELECT', 0)
if size > 0 then return 'keys' end
return 'free'
"""

# Atomic purge: empty the index, then free it, only when the marker is the owner's.
RELEASE = """
redis.call('SELECT', 0)
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return {'missing', ''} end
local ok, entry = pcall(cjson.decode, current)
if not ok or type(entry) ~= 'table' or entry['managed-by'] ~= 'devstack' or entry.owner ~= ARGV[2]
   or not tonumber(entry.db) then
  return {'conflict', current}
end
redis.call('SELECT', tonumber(entry.db))
redis.call('FLUSHDB')
redis.call('SELECT', 0)
redis.call('HDEL', KEYS[1], ARGV[1])
return {'released', tostring(entry.db)}
"""


class RedisIndexSpec(BaseModel):
    """Params of a `redis_index`. `index` pins a specific logical database; changing it replaces."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Index 0 is shared (and holds devstack's markers): never a tenant's.
    index: int | None = Field(default=None, ge=1)


class RedisIndex(KindProvider):
    """A logical database index allocated to one project, stable across runs, emptied and freed on purge."""

    engine = ENGINE
    kind = "redis_index"
    Spec = RedisIndexSpec
    create_only = frozenset({"index"})
    attributes = ("host", "port", "db")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return engine_name(name, owner, naming=naming)

    def holds(self, param: str, value: Any, live: dict[str, Any]) -> bool:
        # Unpinned, it keeps whatever index it holds; pinned to that very index, too (ALLOCATE
        # then only records the pin): neither may replace it, which with purge empties the index.
        if param == "index":
            return value is None or value == live.get("db")
        return super().holds(param, value, live)

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        assert isinstance(spec, RedisIndexSpec)
        if spec.index is None:
            return []
        with admin_client(instance) as client:
            count = int(client.config_get("databases")["databases"])
            if spec.index >= count:
                return [("index", _out_of_range(spec.index, count), f"pick one from 1 to {count - 1}, or leave it unset")]
            found = client.register_script(PROBE)(keys=[ALLOCATIONS_KEY],
                                                  args=[spec.index, self.engine_name(ident.name, ident.owner, naming=ident.naming)])
        if found in ("allocated", "keys"):
            return [("index", _taken(spec.index), "pick another params.index or leave it unset")]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        with admin_client(instance) as client:
            text = client.hget(ALLOCATIONS_KEY, self.engine_name(ident.name, ident.owner, naming=ident.naming))
        if text is None:
            return None
        entry = _entry(text)
        if entry is None or not isinstance(entry.get("db"), int):
            return Observed(owner=None)
        params = {"index": entry["db"]} if entry.get("pinned") else {}
        return Observed(owner=entry["owner"], params=params, attributes={"db": entry["db"]}, workspace=marker_field(text, "stack"))

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, RedisIndexSpec)
        return self._allocate(instance, ident, spec, props.get("stack", ""), "create")

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = RedisIndexSpec.model_validate(new.get("params") or {})
        return self._allocate(instance, ident, spec, new.get("stack", ""), "update")

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        field = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_client(instance) as client:
            status, detail = client.register_script(RELEASE)(keys=[ALLOCATIONS_KEY], args=[field, ident.owner])
        if status == "missing":
            raise NotFound("drop", f"{self.kind} {ident}", "no index is allocated to it")
        if status == "conflict":
            raise self._conflict("drop", ident, Observed(owner=marker_owner(detail)))

    def _allocate(self, instance: SharedInstance, ident: Identity, spec: RedisIndexSpec, stack: str, verb: str) -> dict[str, Any]:
        """Run ALLOCATE: the existing index of this owner/name, else the lowest free one (or the pinned one)."""
        field = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        marker = _marker(ident, stack, name=ident.name, pinned=spec.index is not None)
        with admin_client(instance) as client:
            count = int(client.config_get("databases")["databases"])
            if spec.index is not None and spec.index >= count:
                raise InvalidSpec(verb, f"{self.kind} {ident}", f"params.index {_out_of_range(spec.index, count)}",
                                  f"pick an index from 1 to {count - 1}, or leave it unset")
            pinned = -1 if spec.index is None else spec.index
            status, detail = client.register_script(ALLOCATE)(
                keys=[ALLOCATIONS_KEY], args=[field, ident.owner, marker, count, pinned]
            )
        if status in ("existing", "allocated"):
            return {"host": instance.host, "port": instance.port, "db": int(detail)}
        raise self._allocation_error(verb, ident, status, detail, spec)

    def _allocation_error(self, verb: str, ident: Identity, status: str, detail: str, spec: RedisIndexSpec) -> Exception:
        what = f"{self.kind} {ident}"
        if status == "conflict":
            return self._conflict(verb, ident, Observed(owner=marker_owner(detail)))
        if status == "pinned-elsewhere":
            return Unsupported(
                verb, what, f"it already holds index {detail} (retained), not the requested {spec.index}",
                f"set params.index back to {detail}, or set purge: true and remove it first to move it",
            )
        if status == "taken":
            return Conflict(verb, what, _taken(int(detail)), "pick another params.index or leave it unset; nothing was changed")
        return Unsupported(
            verb, what, f"every logical database 1..{int(detail) - 1} is allocated or holds foreign keys",
            "purge redis_index resources that are no longer used, or raise `databases` in the server config",
        )


def _out_of_range(index: int, count: int) -> str:
    return f"{index} is out of range: the server has {count} databases (0..{count - 1})"


def _taken(index: int) -> str:
    return f"index {index} is allocated to another declaration or holds keys devstack did not put there"


# --- acl_user ------------------------------------------------------------------

# Claim (or refresh) the marker of an ACL user. Returns the current marker when
# another owner (or something that is not a marker) holds the name, else nil.
CLAIM = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current then
  local ok, entry = pcall(cjson.decode, current)
  if not ok or type(entry) ~= 'table' or entry['managed-by'] ~= 'devstack' or entry.owner ~= ARGV[2] then
    return current
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return false
"""

# Remove the marker only when it is the owner's and this stack's: another workspace of the project may
# have claimed the name again (and made the user anew) since this drop deleted the user.
UNCLAIM = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
local ok, entry = pcall(cjson.decode, current)
if ok and type(entry) == 'table' and entry.owner == ARGV[2] and entry.stack == ARGV[3] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


class AclUserSpec(BaseModel):
    """Params of an `acl_user`. Everything updates in place (the user is never disabled meanwhile)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Read-only key permissions (`%R~<owner>:*`); needs Redis 7.
    read_only: bool = Field(default=False, alias="readOnly")
    #: Allow SCAN. It is not filtered by key patterns: it lists other tenants' key names in that db.
    allow_scan: bool = Field(default=False, alias="allowScan")
    #: Change it to change the password in place (a new random one, or a new derivation).
    rotation: Rotation = None


def acl_rules(owner: str, spec: AclUserSpec) -> dict[str, Any]:
    """The full rule set of a tenant user, as keyword arguments of redis-py's `acl_setuser`."""
    prefix = key_prefix(owner)
    return {
        "categories": list(CATEGORIES),
        "commands": list(DENIED_COMMANDS) + ([] if spec.allow_scan else [SCAN_DENIED]),
        "keys": [("%R~" if spec.read_only else "~") + prefix + "*"],
        "channels": [prefix + "*"],
    }


def _fingerprint(getuser_reply: Any) -> str:
    """A digest of ACL GETUSER as the server normalizes it (rules, flags, password hashes).

    Redis lists a user's per-command rules in an order of its own that changes
    with every restart of the server (it rebuilds them from the ACL file), so
    those are sorted; the category rules stay in order ahead of them, where
    Redis keeps them. Redis holds at most one rule per command or subcommand,
    and rules for different ones do not interact, so sorting loses nothing a
    change could hide behind.
    """
    reply = dict(zip(getuser_reply[::2], getuser_reply[1::2]))
    rules = str(reply.get("commands", "")).split()
    reply["commands"] = [rule for rule in rules if "@" in rule] + sorted(rule for rule in rules if "@" not in rule)
    return hashlib.sha256(json.dumps(reply, sort_keys=True).encode()).hexdigest()


class AclUser(KindProvider):
    """An ACL user limited to `<owner>:*` keys and channels, without the commands that reach across tenants."""

    engine = ENGINE
    kind = "acl_user"
    logins = True
    Spec = AclUserSpec
    attributes = ("host", "port", "user", "password", "keyPrefix")
    secret_outputs = ("password",)

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return engine_name(name, owner, naming=naming)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_client(instance) as client:
            live = client.execute_command("ACL", "GETUSER", name)
            text = client.hget(ACL_OWNERS_KEY, name)
        if live is None:
            return None
        entry = _entry(text)
        if entry is None:
            return Observed(owner=None)
        reply = dict(zip(live[::2], live[1::2]))
        params = {"read_only": str(reply.get("keys", "")).startswith("%R~")}
        return Observed(owner=entry["owner"], params=params, workspace=marker_field(text, "stack"),
                        attributes={"user": name, "aclInSync": marker_fits(text, live)})

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, AclUserSpec)
        return self._apply(instance, ident, spec, self._password(ident, props), props.get("stack", ""))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = AclUserSpec.model_validate(new.get("params") or {})
        return self._apply(instance, ident, spec, self._password(ident, new, old), new.get("stack", ""))

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_client(instance) as client:
            entry = _entry(client.hget(ACL_OWNERS_KEY, name))
            exists = client.execute_command("ACL", "GETUSER", name) is not None
            if exists and (entry is None or entry["owner"] != ident.owner):
                raise self._conflict("drop", ident, Observed(owner=entry and entry["owner"]))
            if exists:
                client.acl_deluser(name)  # also closes the user's connections
            # Saved even when it is gone already: a drop cut before the save left it in the ACL
            # file, to come back, unmarked, at the next restart.
            _save_acl(client)
            client.register_script(UNCLAIM)(keys=[ACL_OWNERS_KEY], args=[name, ident.owner, props.get("stack", "")])
        if not exists:
            raise NotFound("drop", f"{self.kind} {ident}", "the ACL user does not exist")

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["aclInSync"] if olds.get("aclInSync") is False else []

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool | None:
        # The server lists each password's SHA-256: compared without a login (a failed AUTH is logged).
        # The fingerprint cannot tell: an update killed after ACL SETUSER rewrote it with the new password.
        with admin_client(instance) as client:
            live = client.execute_command("ACL", "GETUSER", user)
        if live is None:
            return None
        hashes = dict(zip(live[::2], live[1::2])).get("passwords") or []
        return hashlib.sha256(password.encode()).hexdigest() in hashes

    def _password(self, ident: Identity, new: dict[str, Any], old: dict[str, Any] | None = None) -> str:
        return login_password(ident, self.engine_name(ident.name, ident.owner, naming=ident.naming), new, old)

    def _apply(
        self, instance: SharedInstance, ident: Identity, spec: AclUserSpec, password: str, stack: str
    ) -> dict[str, Any]:
        """Claim the name, set the full rule set in one ACL SETUSER (atomic, always enabled), record its fingerprint."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_client(instance) as client:
            if spec.read_only and not FEATURES["read_only_keys"](_version(client)):
                raise Unsupported("create", f"{self.kind} {ident}", "readOnly needs Redis 7.0 or newer", "drop readOnly")
            self._claim(client, ident, name, _marker(ident, stack, fingerprint=""))
            # reset + on + the full rule set: redis-py's acl_setuser() defaults to enabled=False.
            client.acl_setuser(
                name, enabled=True, reset=True,
                hashed_passwords=["+" + hashlib.sha256(password.encode()).hexdigest()],
                **acl_rules(ident.owner, spec),
            )
            fingerprint = _fingerprint(client.execute_command("ACL", "GETUSER", name))
            self._claim(client, ident, name, _marker(ident, stack, fingerprint=fingerprint))
            _save_acl(client)
        return {
            "host": instance.host, "port": instance.port, "user": name, "password": password,
            "keyPrefix": key_prefix(ident.owner), "aclInSync": True, "passwordInSync": True,
        }

    def _claim(self, client: redis_py.Redis, ident: Identity, name: str, marker: str) -> None:
        holder = client.register_script(CLAIM)(keys=[ACL_OWNERS_KEY], args=[name, ident.owner, marker])
        if holder is not None:
            raise self._conflict("create", ident, Observed(owner=marker_owner(holder)))


def marker_fits(marker: str | None, getuser_reply: Any) -> bool:
    """Whether an ACL user's marker records the rules it has now (ACL GETUSER): the ones devstack set."""
    return (_entry(marker) or {}).get("fingerprint") == _fingerprint(getuser_reply)


def _save_acl(client: redis_py.Redis) -> None:
    """Persist users to the server's ACL file, when it has one (otherwise they live until restart)."""
    try:
        client.acl_save()
    except redis_py.ResponseError as err:
        if "ACL file" not in str(err):
            raise


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"redis_index": RedisIndex, "acl_user": AclUser}
