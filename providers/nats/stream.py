"""The `stream` kind: a JetStream stream on the project's subjects."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any, Literal, Mapping

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, Field


from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING, PREFIXED, Identity
from providers.instances import SharedInstance
from providers.nats.jetstream import (MAX_SECONDS, add_stream, all_streams, api_errors, delete_owned_stream,
                                      duplicate_window, jetstream_api, layout_fields, marker_metadata,
                                      metadata_owner, metadata_workspace, off_layout, plain_value, reaching_out,
                                      refuse_irreversible, stream_info, with_marker)
from providers.nats.kind import NatsKind
from providers.nats.names import default_subjects, owner_subjects, subjects_failures, subjects_overlap
from providers.nats.session import Session, in_account, observed, run
from providers.markers import Observed

if TYPE_CHECKING:
    from nats.js import JetStreamContext
    from nats.js.api import StreamConfig, StreamInfo


class StreamSpec(BaseModel):
    """Params of a `stream`. Retention and storage are fixed at creation; the rest update in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Default (filled in by check): `<owner>.>`, or `<owner>.<name>.>` for a named stream.
    subjects: list[str] | None = Field(default=None, min_length=1)
    retention: Literal["limits", "interest", "workqueue"] = "limits"
    storage: Literal["file", "memory"] = "file"
    max_age: int = Field(default=0, ge=0, le=MAX_SECONDS, alias="maxAge", description="seconds; 0 = unlimited")
    max_bytes: int = Field(default=-1, ge=-1, alias="maxBytes", description="-1 = unlimited")
    max_msgs: int = Field(default=-1, ge=-1, alias="maxMsgs", description="-1 = unlimited")
    replicas: int = Field(default=1, ge=1, le=5)


def stream_params(config: StreamConfig) -> dict[str, Any]:
    """The live stream config in the form of StreamSpec's dump."""
    return {
        "subjects": list(config.subjects or []),
        "retention": plain_value(config.retention),
        "storage": plain_value(config.storage),
        "max_age": round(config.max_age or 0),
        "max_bytes": config.max_bytes,
        "max_msgs": config.max_msgs,
        "replicas": config.num_replicas,
    }


#: What devstack leaves at the server's defaults on a stream. Set outside Pulumi, they change what the stream
#: keeps (one message per subject), takes (a sealed stream nothing; a full one with discard new, no more) or
#: lets clients and devstack do (deny purge). The next update puts them back, but those in IRREVERSIBLE.
STREAM_LAYOUT: dict[str, Any] = {
    "discard": "old", "max_msgs_per_subject": -1, "max_msg_size": -1, "max_consumers": -1, "allow_rollup_hdrs": False,
    "no_ack": False, "sealed": False, "deny_delete": False, "deny_purge": False,
    # Defaults the server gives the stream's consumers: an inactive threshold deletes idle durable ones,
    # a max ack pending below the consumers' own makes their creates fail.
    "consumer_limits": None,
}


def stream_in_sync(config: StreamConfig) -> bool:
    """Whether the stream moves nothing across projects and keeps devstack's layout."""
    return not (reaching_out(config) or off_layout(config, STREAM_LAYOUT))


async def _other_streams(js: JetStreamContext, names: set[str], owner: str) -> list[tuple[str, list[str]]]:
    """Every stream on the server but `owner`'s called one of `names`, with its subjects."""
    return [(info.config.name or "", list(info.config.subjects or [])) for info in await all_streams(js)
            if not (info.config.name in names and metadata_owner(info.config.metadata) == owner)]


class Stream(NatsKind):
    """A JetStream stream on the owner's subjects, marked with the owner in its metadata.

    `read` reports in `configInSync` whether the stream is free of `reaching_out`
    settings; one made outside Pulumi is drift, and the next update removes it
    (a mirror it cannot: that update fails saying so).
    """

    kind = "stream"
    after_kinds = ("account",)
    Spec = StreamSpec
    # The server refuses storage changes and retention changes to/from workqueue
    # (limits <-> interest it allows since 2.10, but one rule is simpler to reason about).
    create_only = frozenset({"retention", "storage"})
    # More than one replica on a single server; subjects another stream on the server holds.
    refusable_in_place = frozenset({"replicas", "subjects"})
    attributes = ("host", "port", "servers", "stream", "subjects")
    name_attribute = "stream"

    @classmethod
    def normalized_params(cls, params: dict[str, Any] | None, name: str, owner: str) -> dict[str, Any]:
        normalized = super().normalized_params(params, name, owner)
        if normalized.get("subjects") is None and name and owner:
            normalized["subjects"] = default_subjects(name, owner)
        return normalized

    @classmethod
    def check_params(cls, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        subjects = params["subjects"]
        failures = subjects_failures("params.subjects", subjects, owner)
        # The server refuses a stream whose own subjects overlap (a repeat, or one inside a wildcard).
        failures += [CheckFailure("params.subjects", f"{a!r} and {b!r} overlap: list each subject once")
                     for i, a in enumerate(subjects) for b in subjects[i + 1:] if subjects_overlap(a, b)]
        return failures

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        mine = cls.normalized_params(params, name, owner)["subjects"]
        theirs = cls.normalized_params(other_params, other, owner)["subjects"]
        for subject, taken in ((s, t) for s in mine for t in theirs if subjects_overlap(s, t)):
            return ("params.subjects",
                    f"{subject!r} overlaps {taken!r} of stream {other!r}, and NATS refuses two streams on one "
                    f"subject (give each stream its own subjects; the project's default stream takes all of "
                    f"{owner_subjects(owner)!r} unless its params.subjects say otherwise)")
        return None

    @classmethod
    def defaults(cls, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        # Left out, a named stream's subjects are its name's (`<owner>.<name>.>`), which no other named
        # stream's overlap: the engine is asked only about subjects a declaration sets, so most stream
        # creates call no engine at check.
        return {**super().defaults(params, name, owner), "subjects": default_subjects(name, owner)}

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        """The base's, and subjects that live streams other than this one hold. Validation sees only
        declared streams; a renamed one's old stream (Pulumi makes the new one before it deletes the
        old) or a removed, retained one still holds its subjects, and the server would refuse the create
        part-way through the up."""
        assert isinstance(spec, StreamSpec)
        subjects = spec.subjects or []
        # Check knows no naming (an existing stream keeps it in its outputs): either one may name this stream.
        names = set()
        for naming in (PREFIXED, CURRENT_NAMING):
            with suppress(InvalidSpec):
                names.add(self.engine_name(ident.name, ident.owner, naming=naming))
        others = observed(instance, ident.owner, lambda s: _other_streams(s.js, names, ident.owner)) or []
        return super().refusals(instance, ident, spec) + [
            ("subjects", f"{subject!r} overlaps {held!r} of stream {other} on the server, and NATS refuses two "
                         f"streams on one subject",
             f"free it first: remove it from stream {other}, or purge that stream (a rename keeps the old "
             f"stream until the end of the up: set `purge: true` on the old declaration and remove it in "
             f"one up, add the new one in the next), or give this stream other subjects")
            for other, held_subjects in others for subject in subjects for held in held_subjects
            if subjects_overlap(subject, held)
        ]

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        info = observed(instance, ident.owner, lambda s: stream_info(s.js, name))
        if info is None:
            return None
        params = stream_params(info.config)
        return Observed(
            owner=metadata_owner(info.config.metadata),
            workspace=metadata_workspace(info.config.metadata),
            params=params,
            attributes={"stream": name, "subjects": ",".join(params["subjects"]),
                        "configInSync": stream_in_sync(info.config)},
        )

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, StreamSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create")

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = StreamSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update")

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"stream {ident}"
        with api_errors("drop", what):
            in_account(instance, ident.owner, lambda s: delete_owned_stream(s.js, name, ident, what), what)

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str,
                verb: str) -> dict[str, Any]:
        """Create the stream, or bring an existing one of ours to `spec`; a no-op when it already matches."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        subjects = spec.subjects or default_subjects(ident.name, ident.owner)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> StreamInfo:
            info = await stream_info(session.js, name)
            live = info.config if info else jetstream_api.StreamConfig(
                name=name, retention=jetstream_api.RetentionPolicy(spec.retention),
                storage=jetstream_api.StorageType(spec.storage),
                discard=jetstream_api.DiscardPolicy.OLD,
            )
            refuse_irreversible(live, STREAM_LAYOUT, verb, f"stream {ident}")
            wanted = live.evolve(
                subjects=subjects, max_age=float(spec.max_age), max_bytes=spec.max_bytes, max_msgs=spec.max_msgs,
                num_replicas=spec.replicas, duplicate_window=duplicate_window(spec.max_age),
                metadata=with_marker(live.metadata, marker),
                sources=None, republish=None, subject_transform=None, **layout_fields(STREAM_LAYOUT),
            )
            if info is None:
                return await add_stream(session.js, wanted)
            if stream_params(wanted) == stream_params(live) and wanted.metadata == live.metadata \
                    and stream_in_sync(live):
                return info  # already converged: change nothing
            return await session.js.update_stream(wanted)

        with api_errors(verb, f"stream {ident}"):
            info = run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "stream": name, "subjects": ",".join(info.config.subjects or []),
                "configInSync": stream_in_sync(info.config)}
