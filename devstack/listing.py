"""`resource list`, `show` and `history`: the ledger's tenant resources (tombstones with
--lifecycle deleted), a page at a time, one in full, or one's events."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

from pulumi import automation as auto

from devstack import history
from devstack.errors import Ambiguous, InvalidQuery, NotFound, ScopeMismatch
from devstack.history import Entry
from devstack.models import (
    Event,
    Filters,
    Resource,
    ResourceDetail,
    ResourceHistory,
    ResourcePage,
    validate_filters,
    validate_list_filters,
)
from devstack.stack import short_name
from devstack.state import DELETED, Tracked

#: CON-8's page sizes.
DEFAULT_LIMIT, MAX_LIMIT = 100, 200


def encode_cursor(fingerprint: str, key: tuple[str, ...]) -> str:
    raw = json.dumps({"v": 1, "f": fingerprint, "k": list(key)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str) -> tuple[str, ...]:
    """The sort key after which the next page starts.

    InvalidQuery for a cursor that is not one of ours; ScopeMismatch for
    one made for other filters or another workspace.
    """
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        key = tuple(data["k"])
        valid = data.get("v") == 1 and isinstance(data.get("f"), str) and len(key) == 6 and all(isinstance(k, str) for k in key)
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError):
        valid = False
    if not valid:
        raise InvalidQuery("page with", "--cursor", "it is malformed", "pass the next_cursor of a previous page unchanged")
    if data["f"] != fingerprint:
        raise ScopeMismatch("page with", "--cursor", "it was made for other filters or another workspace",
                            "repeat the query with the filters that produced the cursor, or start without --cursor")
    return key


def list_resources(
    stack: auto.Stack,
    *,
    project: str | None = None,
    engine: str | None = None,
    kind: str | None = None,
    instance: str | None = None,
    name: str | None = None,
    lifecycle: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> ResourcePage:
    """One page of tenant resources in stable order (project, engine, instance, kind, name).

    Filters are exact matches; `lifecycle` None lists active and stale
    ones, `deleted` the tombstones. Keyset pagination: `cursor` is the
    previous page's `next_cursor`, valid only with the same filters and
    workspace (ScopeMismatch, a kind of InvalidQuery, otherwise). A live
    view, not a snapshot: rows added before the cursor's key show on the
    next traversal.
    """
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidQuery("list", "resources", f"--limit {limit!r} is not a whole number", f"use 1 to {MAX_LIMIT}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery("list", "resources", f"--limit {limit} is out of range", f"use 1 to {MAX_LIMIT}")
    filters = validate_list_filters(engine, kind, project, instance=instance, name=name, lifecycle=lifecycle)
    fingerprint = filters.fingerprint(short_name(stack))  # `-w local` and `-w organization/local` alike
    after = decode_cursor(cursor, fingerprint) if cursor is not None else None
    rows = [(e, r) for e in history.read(stack).entries if filters.admits(r := Resource.of_entry(e))]
    rest = [(e, r) for e, r in rows if after is None or e.sort_key > after]
    page = rest[:limit]
    more = len(rest) > limit
    return ResourcePage(
        workspace=stack.name, filters=filters, total=len(rows), limit=limit, items=[r for _, r in page],
        next_cursor=encode_cursor(fingerprint, page[-1][0].sort_key) if more else None,
    )


# --- show -------------------------------------------------------------------------


def find_resource(
    tracked: Iterable[Tracked], name: str, *, engine: str | None = None, project: str | None = None,
    kind: str | None = None, verb: str = "show",
) -> Tracked:
    """The one resource `name` designates: its canonical id, its Pulumi name
    (`<project>/<instance>/<kind>/<name>`) or its declaration name, narrowed by
    the filters. NotFound for none, Ambiguous (listing them) for several.
    """
    filters = Filters(project=project, engine=engine, kind=kind)
    candidates = [t for t in tracked if filters.matches(t.ident)]
    for designates in _designations(name):
        found = [t for t in candidates if designates(t)]
        if len(found) == 1:
            return found[0]
        if found:
            raise Ambiguous(verb, f"resource {name!r}", [str(t.ident) for t in found])
    raise _not_found(verb, name, filters)


def _designations(name: str):
    """How `name` may designate a resource (Tracked or Entry), strongest first."""
    return (
        lambda t: str(t.ident) == name,
        lambda t: t.urn.rsplit("::", 1)[-1] == name,
        lambda t: t.ident.name == name,
    )


def _not_found(verb: str, name: str, filters: Filters) -> NotFound:
    scope = ", ".join(f"{k} {v!r}" for k, v in filters.model_dump().items() if v)
    return NotFound(verb, f"resource {name!r}", "the ledger has no such resource" + (f" ({scope})" if scope else ""),
                    "see `devstack resource list` (--lifecycle deleted for tombstones)")


def find_entry(entries: list[Entry], name: str, *, engine: str | None = None, project: str | None = None,
               kind: str | None = None, verb: str = "show") -> Entry:
    """find_resource over the ledger's entries: a live one first, else a tombstone."""
    filters = Filters(project=project, engine=engine, kind=kind)
    for live in (True, False):
        chosen = [e for e in entries if (e.lifecycle != DELETED) == live and filters.matches(_Ident(e).ident)]
        for designates in _designations(name):
            found = [e for e in chosen if designates(_Ident(e))]
            if len(found) == 1:
                return found[0]
            if found:
                raise Ambiguous(verb, f"resource {name!r}", [e.id for e in found])
    raise _not_found(verb, name, filters)


class _Ident:
    """An Entry seen as find_resource sees a Tracked: `ident` (its fields and canonical text) and `urn`."""

    def __init__(self, e: Entry) -> None:
        r = e.row
        self.urn = r.get("urn") or ""
        self.ident = _Named(e.id, r["owner"], r["engine"], r["kind"], r["name"])


class _Named:
    def __init__(self, text: str, owner: str, engine: str, kind: str, name: str) -> None:
        self.text, self.owner, self.engine, self.kind, self.name = text, owner, engine, kind, name

    def __str__(self) -> str:
        return self.text


def show_resource(
    stack: auto.Stack,
    name: str,
    *,
    engine: str | None = None,
    project: str | None = None,
    kind: str | None = None,
    show_secrets: bool = False,
) -> ResourceDetail:
    """Everything the ledger knows about one resource (a tombstone's kept row when only that is left);
    secret attributes redacted unless `show_secrets`."""
    validate_filters(engine, kind, project)
    e = find_entry(history.read(stack, show_secrets).entries, name, engine=engine, project=project, kind=kind)
    row = Resource.of_entry(e)
    props = e.tracked.props if e.tracked is not None else e.row.get("props") or {}
    secrets = e.tracked.secrets if e.tracked is not None else {k for k, v in props.items() if v == "[secret]"}
    return ResourceDetail(
        **row.model_dump(), workspace=stack.name, stack=props.get("stack"), params=props.get("params") or {},
        secret_attributes=sorted(k for k in secrets if k in row.attributes),
        secrets_shown=show_secrets and e.tracked is not None, dependencies=list(e.row.get("dependencies") or []),
    )


def resource_history(
    stack: auto.Stack, name: str, *, engine: str | None = None, project: str | None = None, kind: str | None = None,
) -> ResourceHistory:
    """One resource's lifecycle now and its events, oldest first (a tombstone's too)."""
    validate_filters(engine, kind, project)
    ledger = history.read(stack)
    e = find_entry(ledger.entries, name, engine=engine, project=project, kind=kind, verb="show the history of")
    events = sorted((Event(**v) for v in ledger.events if v["id"] == e.id),
                    key=lambda v: (v.at is None, v.at, v.seq))
    return ResourceHistory(workspace=stack.name, resource=Resource.of_entry(e), events=events, store=ledger.store)
