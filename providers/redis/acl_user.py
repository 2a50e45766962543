"""Redis `acl_user`: an ACL user limited to its project's keys and channels.

Owners live in the `devstack:acl-owners` hash in db 0: field = the user name,
value = the JSON marker plus a fingerprint of the user's ACL (`ACL GETUSER`) as
devstack last set it, so `read` tells any out-of-band change (rules, password,
enabled flag) from ours.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from providers.base import KindProvider
from providers.credentials import Rotation, login_password
from providers.errors import NotFound, Unsupported
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed, marker_field, marker_owner
from providers.redis.client import (ACL_OWNERS_KEY, ENGINE_NAME, FEATURES, admin_client, engine_name, key_prefix,
                                    kind_marker, marker_entry, redis_py, server_version)

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

    engine = ENGINE_NAME
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
        entry = marker_entry(text)
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

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_client(instance) as client:
            entry = marker_entry(client.hget(ACL_OWNERS_KEY, name))
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
            if spec.read_only and not FEATURES["read_only_keys"](server_version(client)):
                raise Unsupported("create", f"{self.kind} {ident}", "readOnly needs Redis 7.0 or newer", "drop readOnly")
            self._claim(client, ident, name, kind_marker(ident, stack, fingerprint=""))
            # reset + on + the full rule set: redis-py's acl_setuser() defaults to enabled=False.
            client.acl_setuser(
                name, enabled=True, reset=True,
                hashed_passwords=["+" + hashlib.sha256(password.encode()).hexdigest()],
                **acl_rules(ident.owner, spec),
            )
            fingerprint = _fingerprint(client.execute_command("ACL", "GETUSER", name))
            self._claim(client, ident, name, kind_marker(ident, stack, fingerprint=fingerprint))
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
    return (marker_entry(marker) or {}).get("fingerprint") == _fingerprint(getuser_reply)


def _save_acl(client: redis_py.Redis) -> None:
    """Persist users to the server's ACL file, when it has one (otherwise they live until restart)."""
    try:
        client.acl_save()
    except redis_py.ResponseError as err:
        if "ACL file" not in str(err):
            raise

