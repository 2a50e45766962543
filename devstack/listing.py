"""`resource list` and `resource show`: the ledger's tenant resources, a page at a time, or one in full."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

from pulumi import automation as auto

from devstack.errors import Ambiguous, InvalidQuery, NotFound, ScopeMismatch
from devstack.models import Filters, Resource, ResourceDetail, ResourcePage, validate_filters
from devstack.stack import short_name
from devstack.state import Tracked, tracked_resources

DEFAULT_LIMIT, MAX_LIMIT = 100, 500


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
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    tracked: list[Tracked] | None = None,
) -> ResourcePage:
    """One page of tenant resources in stable order (project, engine, instance, kind, name).

    Keyset pagination: `cursor` is the previous page's `next_cursor`, valid
    only with the same filters and workspace. `tracked` skips reading the
    state again (callers that already hold it).
    """
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidQuery("list", "resources", f"--limit {limit!r} is not a whole number", f"use 1 to {MAX_LIMIT}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery("list", "resources", f"--limit {limit} is out of range", f"use 1 to {MAX_LIMIT}")
    filters = validate_filters(engine, kind, project)
    fingerprint = filters.fingerprint(short_name(stack))  # `-w local` and `-w organization/local` alike
    after = decode_cursor(cursor, fingerprint) if cursor is not None else None
    rows = [t for t in (tracked if tracked is not None else tracked_resources(stack)) if filters.matches(t.ident)]
    rest = [t for t in rows if after is None or t.sort_key > after]
    page = rest[:limit]
    more = len(rest) > limit
    return ResourcePage(
        workspace=stack.name, filters=filters, total=len(rows), limit=limit, items=[Resource.of(t) for t in page],
        next_cursor=encode_cursor(fingerprint, page[-1].sort_key) if more else None,
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
    for designates in (
        lambda t: str(t.ident) == name,
        lambda t: t.urn.rsplit("::", 1)[-1] == name,
        lambda t: t.ident.name == name,
    ):
        found = [t for t in candidates if designates(t)]
        if len(found) == 1:
            return found[0]
        if found:
            raise Ambiguous(verb, f"resource {name!r}", [str(t.ident) for t in found])
    scope = ", ".join(f"{k} {v!r}" for k, v in filters.model_dump().items() if v)
    raise NotFound(verb, f"resource {name!r}", "the ledger has no such resource" + (f" ({scope})" if scope else ""),
                   "see `devstack resource list`")


def show_resource(
    stack: auto.Stack,
    name: str,
    *,
    engine: str | None = None,
    project: str | None = None,
    kind: str | None = None,
    show_secrets: bool = False,
) -> ResourceDetail:
    """Everything the ledger knows about one resource; secret attributes redacted unless `show_secrets`."""
    validate_filters(engine, kind, project)
    t = find_resource(tracked_resources(stack, show_secrets), name, engine=engine, project=project, kind=kind)
    row = Resource.of(t)
    return ResourceDetail(
        **row.model_dump(), workspace=stack.name, stack=t.props.get("stack"), params=t.props.get("params") or {},
        secret_attributes=sorted(k for k in t.secrets if k in row.attributes), secrets_shown=show_secrets,
        dependencies=t.dependencies,
    )
