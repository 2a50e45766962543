"""JetStream requests the stream, consumer and kv kinds share: the ownership marker in a stream's or
consumer's metadata, the API's refusals as typed errors, stream lookups, and the layout devstack keeps."""

from __future__ import annotations

import asyncio
import json
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from providers.clients import LazyModule
from providers.errors import Conflict, DevstackError, InvalidSpec, NotFound, Unsupported
from providers.identity import Identity
from providers.markers import marker_field, marker_owner, ownership_marker

if TYPE_CHECKING:
    from nats.js import JetStreamContext
    from nats.js.api import StreamConfig, StreamInfo

# Imported on the first engine call: the program, check and diff never need them.
jetstream_api = LazyModule("nats.js.api")
jetstream_errors = LazyModule("nats.js.errors")

#: The ownership marker's keys in metadata: `devstack.owner`, `devstack.stack`, ...
MARKER_PREFIX = "devstack."
#: The server's default duplicate window (seconds); it may not exceed max age.
DUPLICATE_WINDOW = 120.0
#: The longest duration JetStream takes: the server keeps durations as int64 nanoseconds.
MAX_SECONDS = (2**63 - 1) // 10**9
#: JetStream's error code for a stream whose storage the server could not set up (sent with status 500).
STREAM_STORE_FAILED = 10049
#: Tries of a stream's create that the server fails that way, with STORE_PAUSE x the try's number between them.
STORE_ATTEMPTS = 4
STORE_PAUSE = 0.1


def marker_metadata(ident: Identity, stack: str) -> dict[str, str]:
    """The ownership marker as metadata entries (`devstack.owner`, ...)."""
    return {MARKER_PREFIX + key: value for key, value in json.loads(ownership_marker(ident, stack)).items()}


def metadata_marker(metadata: dict[str, str] | None) -> str:
    """The ownership marker a stream's or consumer's metadata entries spell out, as marker text."""
    return json.dumps({k[len(MARKER_PREFIX):]: v for k, v in (metadata or {}).items() if k.startswith(MARKER_PREFIX)})


def metadata_owner(metadata: dict[str, str] | None) -> str | None:
    """The owner recorded in a stream's or consumer's metadata, or None when it is not ours."""
    return marker_owner(metadata_marker(metadata))


def metadata_workspace(metadata: dict[str, str] | None) -> str | None:
    """The workspace recorded in a stream's or consumer's metadata."""
    return marker_field(metadata_marker(metadata), "stack")


def with_marker(live: dict[str, str] | None, marker: dict[str, str]) -> dict[str, str]:
    """Keep foreign metadata keys (the server's `_nats.*`), replace ours."""
    kept = {k: v for k, v in (live or {}).items() if not k.startswith(MARKER_PREFIX)}
    return {**kept, **marker}


#: JetStream error codes whose cause is the declaration, not the server.
_SPEC_ERRORS = {
    10065: "its subjects overlap those of another stream; give each stream its own subjects under the project's prefix",
    10074: "replicas > 1 needs a clustered server; this one is a single server",
    10047: "params.maxBytes is more than the server's file storage holds: lower it, or leave it unset (unlimited)",
    10028: "params.maxBytes is more than the server's memory holds: lower it, or use storage: file",
}


@contextmanager
def api_errors(verb: str, what: str) -> Iterator[None]:
    """Turn JetStream API refusals into typed errors that say what to change."""
    try:
        yield
    except jetstream_errors.APIError as err:
        if isinstance(err, jetstream_errors.ServiceUnavailableError):
            raise  # no JetStream at all: the session's call names it (Sessions._call)
        if isinstance(err, jetstream_errors.NotFoundError):
            raise NotFound(verb, what, err.description or "not found") from err
        if err.err_code == STREAM_STORE_FAILED:  # the server's own failure, not the declaration's (add_stream)
            raise DevstackError(verb, what, f"the server failed: {err.description}",
                                "the nats-server log says why; run the command again") from err
        hint = _SPEC_ERRORS.get(err.err_code or 0, "change the declaration; retrying will not help")
        raise InvalidSpec(verb, what, f"the server refused: {err.description}", hint) from err


def plain_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


async def stream_info(js: JetStreamContext, name: str) -> StreamInfo | None:
    try:
        return await js.stream_info(name)
    except jetstream_errors.NotFoundError:
        return None


async def add_stream(js: JetStreamContext, config: StreamConfig) -> StreamInfo:
    """Create a stream, trying again when the server fails to set up its storage.

    A single server removes its account's streams directory once the
    account's last stream is deleted; a create that lands at that moment fails
    with "error creating store for stream" (its log: mkdir .../streams: no such
    file or directory). The server drops the failed stream and what it had
    made of its directories, so the next try starts afresh.
    """
    for attempt in range(1, STORE_ATTEMPTS):
        try:
            return await js.add_stream(config)
        except jetstream_errors.ServerError as err:
            if err.err_code != STREAM_STORE_FAILED:
                raise
        await asyncio.sleep(STORE_PAUSE * attempt)
    return await js.add_stream(config)


async def delete_owned_stream(js: JetStreamContext, name: str, ident: Identity, what: str) -> None:
    """Delete a stream only when its metadata names the resource's owner: a purge never drops someone else's."""
    info = await stream_info(js, name)
    if info is None:
        raise NotFound("drop", what, "it does not exist")
    holder = metadata_owner(info.config.metadata)
    if holder != ident.owner:
        raise Conflict("drop", what, f"{name!r} now belongs to {f'project {holder!r}' if holder else 'something devstack does not manage'}",
                       "nothing was dropped; remove it from the state with `pulumi state delete` if it is no longer ours")
    await js.delete_stream(name)


def duplicate_window(max_age: int) -> float:
    return min(DUPLICATE_WINDOW, float(max_age)) if max_age else DUPLICATE_WINDOW


async def all_streams(js: JetStreamContext) -> list[StreamInfo]:
    """Every stream on the server, page after page."""
    found: list[StreamInfo] = []
    while page := await js.streams_info(len(found)):
        found += page
    return found


#: What the server never lets an update take back once set.
IRREVERSIBLE = ("sealed", "deny_delete", "deny_purge")


def off_layout(config: StreamConfig, layout: Mapping[str, Any]) -> list[str]:
    """The settings of `layout` the live config does not have (the server leaves a false one out)."""
    def live(name: str) -> Any:
        value = plain_value(getattr(config, name))
        if is_dataclass(value) and not any(asdict(value).values()):
            value = None  # the server answers {} for limits none of which is set
        return False if value is None and isinstance(layout[name], bool) else value

    return [name for name, value in layout.items() if live(name) != value]


def layout_fields(layout: Mapping[str, Any]) -> dict[str, Any]:
    """`layout` as StreamConfig fields."""
    return {**layout, "discard": jetstream_api.DiscardPolicy(layout["discard"])}


def refuse_irreversible(config: StreamConfig, layout: Mapping[str, Any], verb: str, what: str) -> None:
    """Refuse what was set outside Pulumi and NATS cannot undo in place: a mirror (it cannot turn back into
    a plain stream), or one of IRREVERSIBLE."""
    if config.mirror:
        raise Unsupported(verb, what, f"it mirrors stream {config.mirror.name!r} (set outside Pulumi), which NATS "
                          "cannot undo in place", "delete it with purge and create it again")
    stuck = [name for name in IRREVERSIBLE if getattr(config, name) and not layout[name]]
    if stuck:
        raise Unsupported(verb, what, f"it is set {' and '.join(stuck)} (outside Pulumi), which NATS cannot undo",
                          "delete it with purge and create it again")


def reaching_out(config: StreamConfig) -> list[str]:
    """Settings devstack never makes that move messages across the project's subjects: copying another
    stream in (mirror, sources) or publishing out (republish, subject_transform)."""
    return [name for name in ("mirror", "sources", "republish", "subject_transform") if getattr(config, name)]
