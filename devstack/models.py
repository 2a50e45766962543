"""The ledger's models: what the verbs return and `--json` prints (devstack/schemas/ follows them)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from devstack.errors import InvalidQuery
from devstack.state import Tracked
from providers.description import ACCESS_RULES, POLICY_FIELDS, REACH, REFS
from providers.identity import NAMING, Identity

#: Inputs/outputs that are not attributes: identity, policy, params, rules revision and the pickled provider.
NOT_ATTRIBUTES = frozenset({*Identity.field_names(), *POLICY_FIELDS, "params", ACCESS_RULES, NAMING, REFS, REACH,
                            "__provider"})


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
    attributes: dict[str, Any] = Field(description="provider outputs; secret ones are \"[secret]\" unless shown")

    @classmethod
    def of(cls, t: Tracked) -> Resource:
        i, entry = t.ident, t.entry
        return cls(
            id=str(i), urn=t.urn, project=i.owner, engine=i.engine, instance=i.instance, kind=i.kind, name=i.name,
            credentials=str(t.props.get("credentials") or "predictable"), purge=bool(t.props.get("purge")),
            retained=bool(entry.get("retainOnDelete")), created=entry.get("created"), modified=entry.get("modified"),
            attributes={k: v for k, v in t.props.items() if k not in NOT_ATTRIBUTES},
        )


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


class ResourcePage(Model):
    """One page of `devstack resource list`."""

    workspace: str
    filters: Filters
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
