"""Warnings of the data the next `pulumi up` drops: `purge: true` resources that are no longer declared.

Pulumi deletes what a program no longer registers only after the program has
run, so the program itself never sees those resources. It reads them from the
stack's last checkpoint with the engine's builtin `readStackResourceOutputs`
invoke: one RPC answered from the engine's own backend (no CLI started, no
lock taken, nothing registered), which lists every resource's outputs,
`purge` included, as the delete will find them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pulumi
from pulumi.runtime import invoke_async

from components.validation import Validated
from providers import registry
from providers.identity import Identity

#: The builtin invoke: `{stackName}` -> `{outputs: {urn: {type, outputs}}}` of the stack's last checkpoint.
READ_RESOURCE_OUTPUTS = "pulumi:pulumi:readStackResourceOutputs"
#: The type prefix of every tenant resource.
TENANT_TYPE = "pulumi-python:dynamic/"


@dataclass(frozen=True)
class Held:
    """A tenant resource of the last deployment that its delete would drop (`purge: true`)."""

    name: str  # the Pulumi resource name, `<project>/<instance>/<kind>/<name>`
    ident: Identity
    host: str | None
    port: int | None


async def held_with_purge() -> list[Held]:
    """The stack's tenant resources that the last deployment holds with `purge: true`.

    Empty for a stack never deployed, and when the engine cannot answer (the
    warning is advice: it never stops a run).
    """
    stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    try:
        result = await invoke_async(READ_RESOURCE_OUTPUTS, {"stackName": stack})
    except Exception as err:  # noqa: BLE001 - a failed read must not fail the preview
        pulumi.log.debug(f"cannot read the last deployment of {stack}: {err}")
        return []
    return [held for urn, entry in ((result or {}).get("outputs") or {}).items()
            if (held := _held(urn, entry)) is not None]


def _held(urn: str, entry: Mapping[str, Any]) -> Held | None:
    outputs = entry.get("outputs") or {}
    if not str(entry.get("type", "")).startswith(TENANT_TYPE) or outputs.get("purge") is not True:
        return None
    try:
        ident = Identity.from_props(outputs)
    except KeyError:
        return None  # no identity envelope: not one of ours
    port = outputs.get("port")
    return Held(urn.rsplit("::", 1)[-1], ident, outputs.get("host"), int(port) if port else None)


def warn_of_drops(held: list[Held], validated: Validated, resource: pulumi.Resource | None = None) -> None:
    """One warning per resource of `held` that `validated` no longer declares and no declaration takes over."""
    names, objects = _declared(validated)
    projects = {project.name for project in validated.projects}
    for item in sorted(held, key=lambda h: h.name):
        i = item.ident
        if (item.name, i.engine) in names or _object_of(item, validated) in objects:
            continue  # still declared, or a new spelling of it adopts it in the same up (its purge then drops nothing)
        gone = "" if i.owner in projects else " (the workspace no longer lists the project: list it again)"
        pulumi.log.warn(
            f"project {i.owner}: {i.kind} {i.name!r} of instance {i.instance} ({i}) is no longer declared and "
            "has purge: true, so the next `pulumi up` drops it and its data. To keep the data, put its entry back "
            f"in devstack.yaml{gone}; or put it back with `purge: false`, `pulumi up`, then remove it.", resource)


def _declared(validated: Validated) -> tuple[set[tuple[str, str]], set[tuple[Any, ...]]]:
    """(resource name, engine) of every declaration, and the engine objects they name."""
    names, objects = set(), set()
    for project in validated.projects:
        for decl in project.resources:
            instance = validated.workspace.shared[decl.uses]
            names.add((f"{project.name}/{decl.key(project.name)}", instance.engine))
            objects.add(_engine_object(instance.engine, decl.kind, instance.host, instance.port,
                                       decl.name or project.name, project.name))
    return names, objects - {None}


def _object_of(item: Held, validated: Validated) -> tuple[Any, ...] | None:
    """The engine object `item` is, at its instance's address (the one it was made at if the instance is gone)."""
    i, instance = item.ident, validated.workspace.shared.get(item.ident.instance)
    host, port = (instance.host, instance.port) if instance else (item.host, item.port)
    if not (host and port):
        return None
    # The naming a resource was made with maps its name (identities that record one).
    naming = {"naming": i.naming} if hasattr(i, "naming") else {}
    return _engine_object(i.engine, i.kind, host, port, i.name, i.owner, **naming)


def _engine_object(engine: str, kind: str, host: str, port: int, name: str, owner: str,
                   **naming: int) -> tuple[Any, ...] | None:
    """The engine object a declaration names (the same for every spelling of it), or None when it maps to none."""
    try:
        return registry.provider_class(engine, kind).engine_object(host, port, name, owner, **naming)
    except Exception:  # noqa: BLE001 - an unknown kind or an unmappable name adopts nothing
        return None
