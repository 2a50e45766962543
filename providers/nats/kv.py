"""The `kv` kind: a JetStream key-value bucket, the stream `KV_<bucket>`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from providers import naming as naming_rules

from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.nats.jetstream import (MAX_SECONDS, add_stream, api_errors, delete_owned_stream, duplicate_window,
                                      jetstream_api, layout_fields, marker_metadata, metadata_owner,
                                      metadata_workspace, off_layout, plain_value, reaching_out, refuse_irreversible,
                                      stream_info, with_marker)
from providers.nats.kind import NatsKind
from providers.nats.names import KV_STREAM_PREFIX, MAX_NAME, nats_name
from providers.nats.session import Session, in_account, observed, run
from providers.markers import Observed

if TYPE_CHECKING:
    from nats.js.api import StreamConfig


class KvSpec(BaseModel):
    """Params of a `kv` bucket. Storage is fixed at creation; the server updates the rest in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    history: int = Field(default=1, ge=1, le=64, description="values kept per key")
    ttl: int = Field(default=0, ge=0, le=MAX_SECONDS, description="seconds a value lives; 0 = forever")
    max_bytes: int = Field(default=-1, ge=-1, alias="maxBytes", description="-1 = unlimited")
    storage: Literal["file", "memory"] = "file"
    replicas: int = Field(default=1, ge=1, le=5)


#: A kv bucket's stream as nats clients make it and expect it (purging a key rolls it up); the history
#: param is its max_msgs_per_subject.
KV_LAYOUT: dict[str, Any] = {
    "discard": "new", "max_msg_size": -1, "max_consumers": -1, "allow_rollup_hdrs": True, "allow_direct": True,
    "no_ack": False, "sealed": False, "deny_delete": True, "deny_purge": False, "consumer_limits": None,
}


def kv_params(config: StreamConfig) -> dict[str, Any]:
    """The live KV stream config in the form of KvSpec's dump."""
    return {
        "history": config.max_msgs_per_subject,
        "ttl": round(config.max_age or 0),
        "max_bytes": config.max_bytes,
        "storage": plain_value(config.storage),
        "replicas": config.num_replicas,
    }


def kv_in_sync(config: StreamConfig, bucket: str) -> bool:
    """Whether the KV stream takes its own keys' subjects alone and moves nothing across projects: an
    extra subject would take in another project's messages, `reaching_out` settings copy or publish them."""
    return list(config.subjects or []) == [kv_subject(bucket)] and not (reaching_out(config) or off_layout(config, KV_LAYOUT))


def kv_subject(bucket: str) -> str:
    return f"$KV.{bucket}.>"


class Kv(NatsKind):
    """A KV bucket: the stream `KV_<bucket>` laid out as nats clients expect, marked in its metadata.

    `read` reports in `configInSync` whether the stream still takes only its keys' subjects and is free
    of `reaching_out` settings, as for a stream; the next update puts it back (a mirror it cannot).
    """

    kind = "kv"
    after_kinds = ("account",)
    Spec = KvSpec
    create_only = frozenset({"storage"})
    refusable_in_place = frozenset({"replicas"})
    attributes = ("host", "port", "servers", "bucket")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        limit = MAX_NAME - len(KV_STREAM_PREFIX)
        if naming == PREFIXED:
            return nats_name(name, owner, limit=limit)
        return naming_rules.nats(name, limit=limit)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        bucket = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        info = observed(instance, ident.owner, lambda s: stream_info(s.js, KV_STREAM_PREFIX + bucket))
        if info is None:
            return None
        return Observed(owner=metadata_owner(info.config.metadata), workspace=metadata_workspace(info.config.metadata),
                        params=kv_params(info.config),
                        attributes={"bucket": bucket, "configInSync": kv_in_sync(info.config, bucket)})

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, KvSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create")

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = KvSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update")

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        stream, what = KV_STREAM_PREFIX + self.engine_name(ident.name, ident.owner, naming=ident.naming), f"kv {ident}"
        with api_errors("drop", what):
            in_account(instance, ident.owner, lambda s: delete_owned_stream(s.js, stream, ident, what), what)

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: KvSpec, stack: str,
                verb: str) -> dict[str, Any]:
        bucket = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> None:
            info = await stream_info(session.js, KV_STREAM_PREFIX + bucket)
            live = info.config if info else self._new_config(bucket, spec)
            refuse_irreversible(live, KV_LAYOUT, verb, f"kv {ident}")
            wanted = live.evolve(
                max_msgs_per_subject=spec.history, max_age=float(spec.ttl), max_bytes=spec.max_bytes,
                num_replicas=spec.replicas, duplicate_window=duplicate_window(spec.ttl),
                metadata=with_marker(live.metadata, marker),
                subjects=[kv_subject(bucket)], sources=None, republish=None, subject_transform=None,
                **layout_fields(KV_LAYOUT),
            )
            if info is None:
                await add_stream(session.js, wanted)
            elif kv_params(wanted) != kv_params(live) or wanted.metadata != live.metadata \
                    or not kv_in_sync(live, bucket):
                await session.js.update_stream(wanted)

        with api_errors(verb, f"kv {ident}"):
            run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "bucket": bucket, "configInSync": True}

    @staticmethod
    def _new_config(bucket: str, spec: KvSpec) -> StreamConfig:
        """The KV stream layout nats clients (nats.go, nats-py) create and expect."""
        return jetstream_api.StreamConfig(
            name=KV_STREAM_PREFIX + bucket, subjects=[kv_subject(bucket)],
            storage=jetstream_api.StorageType(spec.storage), max_msgs=-1, **layout_fields(KV_LAYOUT),
        )
