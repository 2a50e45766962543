"""The workspace's secret store (`secretStore:`): generated credentials pushed where services read them.

With a store set, every secret attribute and export of a resource with `credentials: generated` (a
password, a secret key, a DSN built on one) gets an entry there (providers.localstack.stored_secret), and
a service importing one gets `<VAR>_SECRET_ID` (the entry's name) instead of `<VAR>`: it reads the value
from the store itself, and `devstack env --show-secrets` / `devstack exec` read it from there too
(docs/secret-store.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from components import templates
from components.models import ProjectFile, ResourceDecl, WorkspaceConfig

#: What a service's env gets for an imported secret, after the variable's name.
SECRET_ID_SUFFIX = "_SECRET_ID"
#: The output beside a service's `env` mapping each variable served from the store to its entry.
STORE_OUTPUT = "secretStore"
#: The kind whose grants on the store's (localstack) instance read the project's entries.
STORE_READER = "access_key"


@dataclass(frozen=True)
class Entry:
    """One entry of the store: `attribute` of the project's resource `key`, under `name`."""

    key: str
    attribute: str
    name: str


def stored_attributes(engine: str, kind: str) -> tuple[str, ...]:
    """The attributes and exports of a kind that hold a secret: each goes to the store when generated."""
    template = templates.engine_template(engine).kinds[kind]
    return tuple(name for name in template.names() if template.is_secret(name))


def reads_store(workspace: WorkspaceConfig, decl: ResourceDecl) -> bool:
    """Whether `decl` is a project's access_key on the store's instance: the identity its services read their
    entries with, so its own secret is never one of them (a service could not read it without it)."""
    store = workspace.secret_store
    return store is not None and decl.uses == store.instance and decl.kind == STORE_READER


def store_reach(workspace: WorkspaceConfig, project: str, decl: ResourceDecl) -> list[str]:
    """The reach entry of the project's own entries, for the access_key that reads them (`reads_store`)."""
    if not reads_store(workspace, decl):
        return []
    from providers.localstack.policy import store_entry

    return [store_entry(workspace.secret_store.kind, f"{workspace.store_prefix()}{project}/")]


def entries(project: ProjectFile, workspace: WorkspaceConfig) -> list[Entry]:
    """The store entries of the project's declarations with `credentials: generated` (none without a store)."""
    prefix = workspace.store_prefix()
    if prefix is None:
        return []
    from providers.localstack.stored_secret import entry_name

    found = []
    for decl in project.resources:
        if decl.credentials != "generated" or decl.uses not in workspace.shared or reads_store(workspace, decl):
            continue
        key = decl.key(project.name)
        found += [Entry(key, attribute, entry_name(prefix, project.name, key, attribute))
                  for attribute in stored_attributes(workspace.shared[decl.uses].engine, decl.kind)]
    return found


def resource_name(project: str, key: str, attribute: str, store: str) -> str:
    """The Pulumi name of an entry: `<project>/<instance>/<kind>/<name>/<attribute>@<store>`."""
    return f"{project}/{key}/{attribute}@{store}"


def entry_urns(workspace: WorkspaceConfig, resource_urn: str, project: str, decl: ResourceDecl) -> list[str]:
    """The URNs of `decl`'s entries, siblings of its resource's `resource_urn`: a targeted update of the
    resource names them too, so a project's first resource gets its entries in the same update."""
    store = workspace.secret_store
    if store is None or decl.credentials != "generated" or decl.uses not in workspace.shared \
            or reads_store(workspace, decl):
        return []
    parents, _ = resource_urn.split("$pulumi-python:dynamic/")
    key = decl.key(project)
    kind = f"pulumi-python:dynamic/localstack:{store.kind}"  # _entry_class's type
    return [f"{parents}${kind}::{resource_name(project, key, attribute, store.kind)}"
            for attribute in stored_attributes(workspace.shared[decl.uses].engine, decl.kind)]


@cache
def _entry_class(store: str) -> type[Resource]:
    """The Pulumi resource type of a store's entries, e.g. `pulumi-python:dynamic/localstack:aws-sm`."""

    class StoredSecretResource(Resource, module="localstack", name=store):
        pass

    StoredSecretResource.__name__ = f"Stored{store.title().replace('-', '')}"
    return StoredSecretResource


def declare_entries(project: ProjectFile, workspace: WorkspaceConfig, stack: str, outputs: dict[str, dict[str, Any]],
                    parent: pulumi.Resource) -> dict[tuple[str, str], Resource]:
    """One entry per (resource key, attribute) of `entries`, its value the resource's secret output
    (`outputs[key][attribute]`, a Pulumi secret); keyed by (key, attribute)."""
    store = workspace.secret_store
    if store is None:
        return {}
    from providers.localstack.stored_secret import STORES

    declared = {}
    for entry in entries(project, workspace):
        props = {"store": store.kind, "storeInstance": store.instance, "secretId": entry.name, "owner": project.name,
                 "stack": stack, "value": pulumi.Output.secret(outputs[entry.key][entry.attribute]),
                 "arn": None, "inSync": None}
        declared[(entry.key, entry.attribute)] = _entry_class(store.kind)(
            STORES[store.kind](), resource_name(project.name, entry.key, entry.attribute, store.kind), props,
            pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["value"], delete_before_replace=True))
    return declared


def served(decl: ResourceDecl, attribute: str, stored: dict[tuple[str, str], Resource], project: str) -> Resource | None:
    """The store entry holding `attribute` of `decl`, when the store serves it."""
    return stored.get((decl.key(project), attribute))
