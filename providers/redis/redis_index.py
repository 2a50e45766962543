"""Redis `redis_index`: a logical database allocated to one project, stable across runs.

Allocations live in the `devstack:index-allocations` hash in db 0: field = the
engine name, value = the JSON marker plus the allocated `db`. Server-side Lua
scripts allocate, check and release indexes atomically, so two stacks can never
take the same index.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from providers.base import KindProvider
from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed, marker_field, marker_owner
from providers.redis.client import ALLOCATIONS_KEY, ENGINE_NAME, admin_client, engine_name, kind_marker, marker_entry

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

    engine = ENGINE_NAME
    kind = "redis_index"
    Spec = RedisIndexSpec
    create_only = frozenset({"index"})
    attributes = ("host", "port", "db")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return engine_name(name, owner, naming=naming)

    @classmethod
    def holds(cls, param: str, value: Any, live: dict[str, Any]) -> bool:
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
        entry = marker_entry(text)
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

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
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
        marker = kind_marker(ident, stack, name=ident.name, pinned=spec.index is not None)
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

