"""The `consumer` kind: a durable pull consumer on one of the project's streams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Mapping

from pulumi.dynamic import CheckFailure, ReadResult
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


from providers.description import referenced_name
from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import CURRENT_NAMING, Identity
from providers.instances import SharedInstance
from providers.nats.jetstream import (MAX_SECONDS, all_streams, api_errors, jetstream_api, jetstream_errors,
                                      marker_metadata, metadata_owner, metadata_workspace, off_layout, plain_value,
                                      stream_info, with_marker)
from providers.nats.kind import NatsKind
from providers.nats.names import filters_inside, owner_subjects, subjects_failures, subjects_overlap
from providers.nats.session import FEATURES, Session, in_account, observed, run
from providers.nats.stream import Stream
from providers.markers import Observed

if TYPE_CHECKING:
    from nats.js import JetStreamContext
    from nats.js.api import ConsumerConfig, ConsumerInfo, StreamInfo


class ConsumerSpec(BaseModel):
    """Params of a durable pull `consumer` bound to one of the project's streams."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The `name` of a stream declaration of the same project.
    stream: str = Field(min_length=1)
    filter_subject: str | None = Field(default=None, alias="filterSubject")
    deliver_policy: Literal["all", "last", "new", "last_per_subject"] = Field(default="all", alias="deliverPolicy")
    ack_policy: Literal["explicit", "all", "none"] = Field(default="explicit", alias="ackPolicy")
    ack_wait: int = Field(default=30, ge=1, le=MAX_SECONDS, alias="ackWait", description="seconds")
    max_deliver: int = Field(default=-1, ge=-1, alias="maxDeliver", description="-1 or 0 = unlimited")
    description: str = ""

    @field_validator("max_deliver")
    @classmethod
    def _unlimited_as_stored(cls, value: int) -> int:
        # The server stores 0 (unlimited) as -1: declared as 0, every refresh would find drift.
        return -1 if value == 0 else value

    @field_validator("description")
    @classmethod
    def _server_limit(cls, value: str) -> str:
        if len(value.encode()) > 4096:
            raise ValueError("is at most 4096 bytes (the server's limit)")
        return value


def consumer_params(config: ConsumerConfig, stream_decl: str) -> dict[str, Any]:
    """The live consumer config in the form of ConsumerSpec's dump."""
    return {
        "stream": stream_decl,
        "filter_subject": config.filter_subject or None,
        "deliver_policy": plain_value(config.deliver_policy),
        "ack_policy": plain_value(config.ack_policy),
        "ack_wait": round(config.ack_wait or 0),
        "max_deliver": config.max_deliver,
        "description": config.description or "",
    }


#: What devstack leaves at the server's defaults on a consumer. Set outside Pulumi, they stall it (one
#: message in flight), strip its messages to their headers, delete it when idle, or delay redeliveries.
CONSUMER_LAYOUT: dict[str, Any] = {
    "max_ack_pending": 1000, "headers_only": False, "inactive_threshold": None, "backoff": None, "sample_freq": None,
}


def stream_declaration(stream: str, owner: str) -> str:
    """Invert nats_name for a stream of `owner`: the declaration name it came from."""
    return owner if stream == owner else stream.removeprefix(f"{owner}_")


async def owner_streams(js: JetStreamContext, owner: str) -> list[StreamInfo]:
    """The streams whose metadata names `owner` (explicitly named ones are in no namespace of its own)."""
    return [info for info in await all_streams(js) if metadata_owner(info.config.metadata) == owner]


async def find_consumer(js: JetStreamContext, owner: str, name: str) -> tuple[StreamInfo, ConsumerInfo] | None:
    """The consumer `name` in one of the owner's streams, with that stream; None when there is none."""
    for info in await owner_streams(js, owner):
        try:
            return info, await js.consumer_info(info.config.name or "", name)
        except jetstream_errors.NotFoundError:
            continue
    return None


class Consumer(NatsKind):
    """A durable pull consumer on one of the owner's streams, filter inside that stream's subjects.

    What the server allows in place: description, max deliver,
    ack wait and filter subject (2.10+). Deliver policy and ack policy it
    refuses ("can not be updated"), so they replace; the durable name is the
    identity and the stream is what the consumer lives in: both replace.
    The server does not check that the filter lies inside the stream's
    subjects; this provider does, against the live stream. `read` reports in
    `configInSync` whether CONSUMER_LAYOUT still holds; the next update puts it back.
    """

    kind = "consumer"
    after_kinds = ("account",)
    Spec = ConsumerSpec
    create_only = frozenset({"stream", "deliver_policy", "ack_policy"})
    attributes = ("host", "port", "servers", "stream", "consumer")
    references: ClassVar[dict[str, str]] = {"stream": "stream"}

    @classmethod
    def check_params(cls, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        failures = []
        try:
            Stream.engine_name(params["stream"], owner, naming=CURRENT_NAMING)
        except InvalidSpec as err:
            failures.append(CheckFailure("params.stream", str(err)))
        if params.get("filter_subject") is not None:
            failures += subjects_failures("params.filterSubject", [params["filter_subject"]], owner)
        elif params.get("deliver_policy") == "last_per_subject":
            failures.append(CheckFailure("params.filterSubject", "is required with deliverPolicy: last_per_subject "
                                                                 "(the server refuses it without a filter)"))
        return failures

    @classmethod
    def misfit(cls, param: str, params: dict[str, Any], target: str, target_params: dict[str, Any],
               owner: str) -> tuple[str, str] | None:
        # The provider checks the filter against the live stream only when the consumer itself changes:
        # a stream narrowed later would leave it filtering on subjects the stream no longer takes.
        if param != "stream":
            return None
        try:
            spec = ConsumerSpec.model_validate(params)
            stream = Stream.normalized_params(target_params, target, owner)
        except ValidationError:
            return None  # a problem of the declarations themselves, reported on them
        filter_subject, subjects = spec.filter_subject, stream["subjects"]
        if stream["retention"] == "workqueue" and spec.ack_policy != "explicit":
            # The server refuses it: a work queue removes a message once it is acknowledged.
            return ("params.ackPolicy", f"must be explicit on stream {target!r}, whose retention is workqueue")
        if not filters_inside(filter_subject, [owner_subjects(owner)]):
            return None  # outside the project's subjects: check's tenant rule says so
        if filters_inside(filter_subject, subjects):
            return None
        return ("params.filterSubject",
                f"{filter_subject!r} is outside the subjects of stream {target!r} ({', '.join(subjects)}), so the "
                f"consumer would get nothing (filter inside them, or add it to the stream's params.subjects)")

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        # A work queue hands each message to one consumer, so the server refuses a second consumer
        # whose filter overlaps the first's (no filter overlaps every filter).
        stream_decl = params.get("stream")
        if stream_decl != other_params.get("stream") or ("stream", stream_decl) not in declared:
            return None
        try:
            stream = Stream.normalized_params(declared[("stream", stream_decl)], stream_decl, owner)
            mine = ConsumerSpec.model_validate(params).filter_subject
            theirs = ConsumerSpec.model_validate(other_params).filter_subject
        except ValidationError:
            return None  # a problem of the declarations themselves, reported on them
        if stream["retention"] != "workqueue" or (mine and theirs and not subjects_overlap(mine, theirs)):
            return None
        return ("params.filterSubject",
                f"{'unset' if mine is None else repr(mine)} overlaps the filter of consumer {other!r} "
                f"({'unset' if theirs is None else repr(theirs)}) on stream {stream_decl!r}, whose retention is "
                f"workqueue: NATS gives each of its subjects to one consumer (give each consumer a filter of "
                f"its own subjects)")

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        found = observed(instance, ident.owner, lambda s: find_consumer(s.js, ident.owner, name))
        if found is None:
            return None
        stream, info = found
        stream_name = stream.config.name or ""
        return Observed(
            owner=metadata_owner(info.config.metadata),
            workspace=metadata_workspace(info.config.metadata),
            params=consumer_params(info.config, stream_declaration(stream_name, ident.owner)),
            attributes={"stream": stream_name, "consumer": name,
                        "configInSync": not off_layout(info.config, CONSUMER_LAYOUT)},
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        # Its stream's declaration is read back from the stream's name, which only owner-prefixed naming
        # can invert: on the stream it was made on, the declared one stands.
        if result.id and result.outs.get("stream") == props.get("stream") and (props.get("params") or {}).get("stream"):
            result.outs["params"] = {**result.outs["params"], "stream": props["params"]["stream"]}
        return result

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, ConsumerSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create", referenced_name(props, "stream"))

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = ConsumerSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update",
                            referenced_name(new, "stream") or old.get("stream"))

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)

        async def work(session: Session) -> None:
            found = await find_consumer(session.js, ident.owner, name)
            if found is None:
                raise NotFound("drop", f"consumer {ident}", "it does not exist")
            if metadata_owner(found[1].config.metadata) != ident.owner:
                raise Conflict("drop", f"consumer {ident}", "it carries no marker of this project",
                               "nothing was dropped; remove it from the state with `pulumi state delete`")
            await session.js.delete_consumer(found[0].config.name or "", name)

        with api_errors("drop", f"consumer {ident}"):
            in_account(instance, ident.owner, work, f"consumer {ident}")

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: ConsumerSpec, stack: str,
                verb: str, stream: str | None) -> dict[str, Any]:
        """Create the consumer, or converge an existing one of ours; a no-op when it already matches."""
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"consumer {ident}"
        # The stream as its resource records it (`stream`), else as this consumer's naming maps it.
        stream = stream or Stream.engine_name(spec.stream, ident.owner, naming=ident.naming)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> None:
            info = await self._bound_stream(session.js, ident, spec, stream, verb)
            existing = await find_consumer(session.js, ident.owner, name)
            live = existing[1].config if existing else None
            if existing is not None:
                self._require_changeable(existing, ident, spec, session.version)
            wanted = self._config(name, spec, with_marker(live.metadata if live else None, marker))
            if live is not None and consumer_params(wanted, spec.stream) == consumer_params(live, spec.stream) \
                    and wanted.metadata == live.metadata and not off_layout(live, CONSUMER_LAYOUT):
                return  # already converged: change nothing
            # Same name and stream: the server treats this as an update of the durable consumer.
            await session.js.add_consumer(info.config.name or stream, wanted)

        with api_errors(verb, what):
            run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "stream": stream, "consumer": name, "configInSync": True}

    def _require_changeable(self, existing: tuple[StreamInfo, ConsumerInfo], ident: Identity, spec: ConsumerSpec,
                            version: tuple[int, int]) -> None:
        """Refuse what the server cannot change in place, naming the field and its live value."""
        what = f"consumer {ident}"
        stream, info = existing
        live = consumer_params(info.config, stream_declaration(stream.config.name or "", ident.owner))
        if live["filter_subject"] != spec.filter_subject and not FEATURES["consumer_filter_update"](version):
            raise Unsupported("update", what, "this server cannot change a consumer's filter subject",
                              "use nats-server 2.10+, or delete the consumer with purge and re-create it")

    @staticmethod
    async def _bound_stream(js: JetStreamContext, ident: Identity, spec: ConsumerSpec, stream: str,
                            verb: str) -> StreamInfo:
        """The owner's stream the consumer binds to, with the filter checked against its subjects."""
        what = f"consumer {ident}"
        info = await stream_info(js, stream)
        if info is None:
            raise NotFound(verb, what, f"its stream {spec.stream!r} ({stream}) does not exist",
                           "declare that stream in the same project")
        if metadata_owner(info.config.metadata) != ident.owner:
            raise Conflict(verb, what, f"stream {stream!r} does not belong to project {ident.owner!r}",
                           "bind the consumer to a stream the project declares")
        if off_layout(info.config, {"consumer_limits": None}):
            raise Unsupported(verb, what, f"stream {stream!r} has consumer limits set outside devstack "
                           f"({info.config.consumer_limits}), which would override or refuse the consumer's settings",
                           "`pulumi refresh` then `pulumi up`: the stream's update takes them off first")
        subjects = info.config.subjects or []
        if not filters_inside(spec.filter_subject, subjects):
            raise InvalidSpec(verb, what, f"params.filterSubject {spec.filter_subject!r} is outside the subjects "
                              f"of stream {stream!r} ({', '.join(subjects)})", "filter on one of the stream's subjects")
        return info

    @staticmethod
    def _config(name: str, spec: ConsumerSpec, metadata: dict[str, str]) -> ConsumerConfig:
        return jetstream_api.ConsumerConfig(
            name=name, durable_name=name, description=spec.description or None,
            deliver_policy=jetstream_api.DeliverPolicy(spec.deliver_policy),
            ack_policy=jetstream_api.AckPolicy(spec.ack_policy),
            ack_wait=float(spec.ack_wait), max_deliver=spec.max_deliver,
            filter_subject=spec.filter_subject, metadata=metadata, **CONSUMER_LAYOUT,
        )
