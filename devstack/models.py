"""The ledger's models: what the verbs return and `--json` prints (devstack/schemas/ follows them)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from devstack.errors import InvalidQuery
from devstack.history import Entry
from devstack.state import LIFECYCLE_OUTPUTS, LIFECYCLES, Tracked, parse_time
from providers.description import ACCESS_RULES, POLICY_FIELDS, REACH, REFS
from providers.identity import NAMING, Identity

#: Inputs/outputs that are not attributes: identity, policy, params, rules revision and the pickled provider.
NOT_ATTRIBUTES = frozenset({*Identity.field_names(), *POLICY_FIELDS, "params", ACCESS_RULES, NAMING, REFS, REACH,
                            "__provider", *LIFECYCLE_OUTPUTS})


class Model(BaseModel):
    """A frozen report; `as_json` is what `--json` prints."""

    model_config = ConfigDict(frozen=True)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Resource(Model):
    """One row of `devstack resource list`."""

    id: str = Field(description="canonical identity: engine/instance/kind/name@owner")
    urn: str
    project: str = Field(description="the owner")
    engine: str
    instance: str
    kind: str
    name: str
    credentials: str
    purge: bool
    retained: bool = Field(description="retainOnDelete: removing the declaration keeps the data")
    created: datetime | None
    modified: datetime | None
    lifecycle: str = Field(description="active, stale (missed by the last refresh or scan) or deleted (a tombstone)")
    first_seen: datetime | None = Field(description="first observed present")
    last_seen: datetime | None = Field(description="last observed present")
    deleted_at: datetime | None = Field(default=None, description="when it became a tombstone; null unless deleted")
    attributes: dict[str, Any] = Field(description="provider outputs; secret ones are \"[secret]\" unless shown")

    @classmethod
    def of(cls, t: Tracked) -> Resource:
        """A state entry, with the lifecycle its outputs hold."""
        i, entry = t.ident, t.entry
        return cls(
            id=str(i), urn=t.urn, project=i.owner, engine=i.engine, instance=i.instance, kind=i.kind, name=i.name,
            credentials=str(t.props.get("credentials") or "predictable"), purge=bool(t.props.get("purge")),
            retained=bool(entry.get("retainOnDelete")), created=entry.get("created"), modified=entry.get("modified"),
            lifecycle=t.lifecycle, first_seen=t.first_seen, last_seen=t.last_seen,
            attributes={k: v for k, v in t.props.items() if k not in NOT_ATTRIBUTES},
        )

    @classmethod
    def of_entry(cls, e: Entry) -> Resource:
        """A ledger entry: the state's, or a tombstone's kept row, with the ledger's lifecycle."""
        if e.tracked is not None and e.lifecycle != "deleted":
            base = cls.of(e.tracked)
        else:
            r, props = e.row, e.row.get("props") or {}
            base = cls(
                id=e.id, urn=r.get("urn") or "", project=r["owner"], engine=r["engine"], instance=r["instance"],
                kind=r["kind"], name=r["name"], credentials=str(props.get("credentials") or "predictable"),
                purge=bool(props.get("purge")), retained=bool(r.get("retained")), created=parse_time(r.get("created")),
                modified=parse_time(r.get("modified")), lifecycle=e.lifecycle, first_seen=None, last_seen=None,
                attributes={k: v for k, v in props.items() if k not in NOT_ATTRIBUTES},
            )
        return base.model_copy(update={"lifecycle": e.lifecycle, "first_seen": e.first_seen,
                                       "last_seen": e.last_seen, "deleted_at": e.deleted_at})


class Filters(Model):
    """The exact-match filters of a list; a cursor is bound to them."""

    project: str | None = None
    engine: str | None = None
    kind: str | None = None

    def matches(self, ident: Identity) -> bool:
        return all(want is None or want == have for want, have in
                   ((self.project, ident.owner), (self.engine, ident.engine), (self.kind, ident.kind)))

    def fingerprint(self, workspace: str) -> str:
        text = json.dumps({"workspace": workspace, **self.model_dump()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class ListFilters(Filters):
    """The filters of `resource list`: also instance, name and lifecycle (None: active and stale, no tombstones)."""

    instance: str | None = None
    name: str | None = None
    lifecycle: str | None = None

    def admits(self, r: Resource) -> bool:
        wanted = (("project", self.project), ("engine", self.engine), ("kind", self.kind),
                  ("instance", self.instance), ("name", self.name))
        if not all(want is None or want == getattr(r, field) for field, want in wanted):
            return False
        return r.lifecycle == self.lifecycle if self.lifecycle else r.lifecycle != "deleted"


class ResourcePage(Model):
    """One page of `devstack resource list`."""

    workspace: str
    filters: ListFilters
    total: int = Field(description="rows matching the filters, over all pages")
    limit: int
    items: list[Resource]
    next_cursor: str | None = Field(description="pass as --cursor for the next page; null on the last page")


class ResourceDetail(Resource):
    """`devstack resource show`: a row plus params, marker stack, secrets and dependencies."""

    workspace: str
    stack: str | None = Field(description="the stack recorded in the resource's ownership marker")
    params: dict[str, Any]
    secret_attributes: list[str] = Field(description="attributes holding secrets")
    secrets_shown: bool
    dependencies: list[str] = Field(description="URNs this resource depends on")


def validate_list_filters(engine: str | None, kind: str | None, project: str | None = None, *,
                          instance: str | None = None, name: str | None = None,
                          lifecycle: str | None = None) -> ListFilters:
    """validate_filters, and instance, name and lifecycle (one of LIFECYCLES); InvalidQuery otherwise."""
    base = validate_filters(engine, kind, project)
    for label, value in (("instance", instance), ("name", name)):
        if value is not None and not value.strip():
            raise InvalidQuery("filter by", label, "the value is empty")
    if lifecycle is not None and lifecycle not in LIFECYCLES:
        raise InvalidQuery("filter by", f"lifecycle {lifecycle!r}", "no such lifecycle", f"use one of {', '.join(LIFECYCLES)}")
    return ListFilters(**base.model_dump(), instance=instance, name=name, lifecycle=lifecycle)


def validate_filters(engine: str | None, kind: str | None, project: str | None = None) -> Filters:
    """Filters naming a known engine and one of its kinds; InvalidQuery otherwise."""
    from providers import registry

    if engine is not None and engine not in registry.engines():
        raise InvalidQuery("filter by", f"engine {engine!r}", "no such engine",
                           f"use one of {', '.join(registry.engines())}")
    if kind is not None:
        known = {k for e in ([engine] if engine else registry.engines()) for k in registry.kinds(e)}
        if kind not in known:
            raise InvalidQuery("filter by", f"kind {kind!r}", f"no engine{' ' + engine if engine else ''} serves it",
                               f"use one of {', '.join(sorted(known))}")
    for label, value in (("project", project), ("engine", engine), ("kind", kind)):
        if value is not None and not value.strip():
            raise InvalidQuery("filter by", label, "the value is empty")
    return Filters(project=project, engine=engine, kind=kind)


class Event(Model):
    """One event of a resource's history (spec 27's event_log kinds)."""

    seq: int = Field(description="order of recording in the ledger's history")
    at: datetime | None = Field(description="when it happened (from the state's clocks, or when a verb recorded it)")
    kind: str = Field(description="provision, update, drop or gc.drop")
    id: str
    urn: str | None
    cause: str = Field(description="state (seen in the state), replace, rm, destroy, prune, scan, observed")


class ResourceHistory(Model):
    """`devstack resource history`: one resource's lifecycle now and its events, oldest first."""

    workspace: str
    resource: Resource
    events: list[Event]
    store: str = Field(description="where the ledger keeps its history on this backend")


# --- what the verbs did ------------------------------------------------------------


class Removal(Model):
    """What `devstack resource rm` did."""

    workspace: str
    resource: Resource
    untracked: bool = Field(description="removed from the ledger (pulumi state delete)")
    data_dropped: bool = Field(description="the engine's data was dropped (only with purge_data)")
    already_gone: bool = Field(description="purge_data found nothing to drop in the engine")
    edited: list[str] = Field(default_factory=list, description="project files the entry was taken out of (the command line's edit)")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


class Destruction(Model):
    """What `devstack destroy` did."""

    workspace: str
    project: str | None = Field(default=None, description="the one project destroyed; null: the whole workspace")
    untracked: list[str] = Field(description="ids of the tenant resources removed from the ledger")
    dropped: list[str] = Field(description="ids whose data was dropped (only with purge_data)")
    already_gone: list[str] = Field(description="ids purge_data found nothing to drop for")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


class Recovery(Model):
    """What `devstack recover` did after an interrupted run."""

    workspace: str
    repaired: list[str] = Field(description="zero-length metadata files of the file backend that were removed")
    pending_cleared: int = Field(description="operations the interrupted run left pending, now resolved")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


class ServiceEnv(Model):
    """A service's environment from the stack output `<project>.services.<service>.env`."""

    workspace: str
    project: str
    service: str
    env: dict[str, str]
    secret_vars: list[str] = Field(description="variables holding secrets")
    secrets_shown: bool
