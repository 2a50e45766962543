"""A project's account as the server's account resolver holds it: the JWT devstack signs for it (limits,
ownership marker, revoked users) and the system account's requests that look it up and push it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

from providers import naming as naming_rules
from providers.clients import LazyModule
from providers.errors import DevstackError
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import ownership_marker
from providers.nats.names import ENGINE_NAME

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient

# Imported on the first engine call: nkeys is not needed by the program, check or diff.
auth = LazyModule("providers.nats.auth")

#: Seconds a request to the server's API (JetStream, the account resolver) waits for its answer.
API_TIMEOUT = 10.0


def account_marker(owner: str, stack: str) -> str:
    """The ownership marker an account JWT carries in its description."""
    return ownership_marker(Identity(engine=ENGINE_NAME, instance="", kind="account", name=owner, owner=owner), stack)


class AccountSpec(BaseModel):
    """Params of a project's `account`: its JetStream and connection limits. All update in place.

    nats-server reserves an account's memory and storage limits out of its own totals and refuses
    JetStream to an account whose limits no longer fit beside the others', so those two default to
    unlimited (bounded by the server's totals, shared); the counts bound a runaway project."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_memory: int = Field(default=-1, ge=-1, alias="maxMemory", description="bytes in memory streams; -1 = unlimited")
    max_storage: int = Field(default=-1, ge=-1, alias="maxStorage", description="bytes in file streams; -1 = unlimited")
    max_streams: int = Field(default=100, ge=-1, alias="maxStreams", description="streams and kv buckets; -1 = unlimited")
    max_consumers: int = Field(default=1000, ge=-1, alias="maxConsumers", description="-1 = unlimited")
    max_connections: int = Field(default=1000, ge=-1, alias="maxConnections", description="-1 = unlimited")


#: AccountSpec's fields as the account JWT's limits spell them.
ACCOUNT_LIMITS = {"max_memory": "mem_storage", "max_storage": "disk_storage", "max_streams": "streams",
                  "max_consumers": "consumer", "max_connections": "conn"}


def account_jwt(operator: Any, owner: str, stack: str, spec: AccountSpec | None = None,
                revocations: Mapping[str, int] | None = None, marker: str | None = None) -> str:
    """Project `owner`'s account JWT: JetStream with `spec`'s limits (the defaults when None), the marker
    for `stack` (or `marker`, the live one kept as it is)."""
    spec = spec or AccountSpec()
    limits = {claim: getattr(spec, field) for field, claim in ACCOUNT_LIMITS.items()}
    return operator.account_jwt(operator.account_key(owner), naming_rules.nats(owner),
                                description=marker if marker is not None else account_marker(owner, stack),
                                jetstream=limits, revocations=dict(revocations or {}))


def account_params(claims: Mapping[str, Any]) -> dict[str, Any]:
    """The live account's limits in the form of AccountSpec's dump (a limit left out is 0)."""
    limits = (claims.get("nats") or {}).get("limits") or {}
    return {field: limits.get(claim, 0) for field, claim in ACCOUNT_LIMITS.items()}


def account_description(claims: Mapping[str, Any]) -> str:
    return str((claims.get("nats") or {}).get("description") or "")


def revocations_of(claims: Mapping[str, Any] | None) -> dict[str, int]:
    return dict(((claims or {}).get("nats") or {}).get("revocations") or {})


def operator_of(instance: SharedInstance) -> Any:
    return auth.Operator.from_secret(instance.password())


def account_key(instance: SharedInstance, owner: str) -> str:
    """The public key of project `owner`'s account on the instance."""
    return auth.public(operator_of(instance).account_key(owner))


async def account_claims(nc: NatsClient, account: str) -> dict[str, Any] | None:
    """The claims of the account the server holds under public key `account`; None when it has none."""
    reply = await nc.request(f"$SYS.REQ.ACCOUNT.{account}.CLAIMS.LOOKUP", b"", timeout=API_TIMEOUT)
    return auth.decode(reply.data.decode()) if reply.data else None


async def all_accounts(nc: NatsClient) -> list[str]:
    """The public keys of every account the server's resolver holds."""
    reply = await nc.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=API_TIMEOUT)
    return list(json.loads(reply.data).get("data") or [])


async def claims_request(nc: NatsClient, subject: str, token: str, what: str) -> None:
    """Send an operator-signed JWT to the resolver; DevstackError with the server's words when it refuses."""
    reply = json.loads((await nc.request(subject, token.encode(), timeout=API_TIMEOUT)).data)
    answer = reply.get("data") or reply.get("error") or {}
    if answer.get("code") != 200:
        raise DevstackError("push", what, f"the server refused it: {answer.get('description') or answer.get('message') or answer}",
                            "the server must run with the full account resolver (`resolver: {type: full, "
                            "allow_delete: true}`) and trust this stack's operator (docs/engines.md)")


async def push_account(nc: NatsClient, token: str, owner: str) -> None:
    await claims_request(nc, "$SYS.REQ.CLAIMS.UPDATE", token, f"the nats account of project {owner!r}")
