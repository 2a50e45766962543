"""Every account, stream, kv bucket and consumer on a NATS server, ours or not.

The server's resolver lists the accounts (the marker is in each JWT's
description); in each account of ours, the streams (`KV_<bucket>` ones are kv
buckets) and their consumers carry their markers in their metadata. An account
devstack did not make (no marker) is listed, never looked into.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from providers.engine import Found
from providers.errors import Unsupported
from providers.instances import SharedInstance
from providers.markers import marker_field, marker_owner
from providers.nats.claims import account_claims, account_description, account_key, all_accounts, auth, operator_of
from providers.nats.jetstream import MARKER_PREFIX, all_streams, jetstream_errors, metadata_owner
from providers.nats.names import ENGINE_NAME, KV_STREAM_PREFIX
from providers.nats.session import Session, observed, run

if TYPE_CHECKING:
    from nats.js import JetStreamContext
    from nats.js.api import StreamInfo


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Accounts and, in each of ours, its streams, kv buckets and consumers, with their markers."""
    system_account = auth.public(operator_of(instance).system)

    async def listed(system: Session) -> list[tuple[str, dict[str, Any]]]:
        keys = [key for key in await all_accounts(system.nc) if key != system_account]
        return [(key, claims) for key in keys if (claims := await account_claims(system.nc, key)) is not None]

    found = []
    for key, claims in run(instance, listed):
        marker = account_description(claims)
        owner = marker_owner(marker)
        if "account" in kinds:
            found.append(Found(ENGINE_NAME, instance.name, "account", str(claims.get("name") or key), owner,
                               marker_field(marker, "stack")))
        if owner is None or account_key(instance, owner) != key or not kinds & {"stream", "kv", "consumer"}:
            continue

        async def work(session: Session) -> list[Found]:
            streams = []
            for info in await all_streams(session.js):
                streams += await _stream_found(session, instance, info, kinds)
            return streams

        try:
            found += observed(instance, owner, work) or []
        except Unsupported:
            continue  # no JetStream in that account (its limits did not fit the server): nothing in it to list
    return found


async def _stream_found(session: Session, instance: SharedInstance, info: StreamInfo, kinds: set[str]) -> list[Found]:
    name = info.config.name or ""
    kv = name.startswith(KV_STREAM_PREFIX)
    kind = "kv" if kv else "stream"
    found = []
    if kind in kinds:
        engine_name = name[len(KV_STREAM_PREFIX):] if kv else name
        found.append(_found(instance, kind, engine_name, info.config.metadata))
    if "consumer" in kinds and not kv:
        for consumer in await _consumers(session.js, name):
            found.append(_found(instance, "consumer", consumer.name or "", consumer.config.metadata))
    return found


async def _consumers(js: JetStreamContext, stream: str) -> list[Any]:
    """Every consumer of a stream (the server pages them 256 at a time); none when the stream went meanwhile."""
    found: list[Any] = []
    try:
        while page := await js.consumers_info(stream, offset=len(found)):
            found += page
            if len(page) < 256:
                break
    except jetstream_errors.NotFoundError:
        return []
    return found


def _found(instance: SharedInstance, kind: str, name: str, metadata: dict[str, str] | None) -> Found:
    stack = (metadata or {}).get(MARKER_PREFIX + "stack")
    owner = metadata_owner(metadata)
    return Found(ENGINE_NAME, instance.name, kind, name, owner, stack if owner else None)
