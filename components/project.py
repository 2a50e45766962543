"""The Project component: one dynamic resource per `resources:` entry."""

from __future__ import annotations

from functools import cache
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from components.models import ProjectFile, ResourceDecl, WorkspaceConfig
from providers import registry
from providers.base import KindProvider


@cache
def resource_class(engine: str, kind: str) -> type[Resource]:
    """The Pulumi resource type of a kind, e.g. `pulumi-python:dynamic/postgres:database`."""

    class TenantResource(Resource, module=engine, name=kind):
        pass

    TenantResource.__name__ = f"{engine.title()}{kind.title().replace('_', '')}"
    return TenantResource


def resource_key(decl: ResourceDecl) -> str:
    """Stable and readable: independent of list order and of the file's location."""
    return f"{decl.uses}/{decl.kind}/{decl.name}"


class Project(pulumi.ComponentResource):
    """All tenant resources a project declares; `outputs` holds their attributes."""

    outputs: dict[str, Any]

    def __init__(
        self, project: ProjectFile, workspace: WorkspaceConfig, stack: str, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("devstack:index:Project", project.name, None, opts)
        resources = {}
        for decl in project.resources:
            instance = workspace.shared[decl.uses]
            provider: KindProvider = registry.provider_class(instance.engine, decl.kind)()
            props = {
                "engine": instance.engine,
                "instance": decl.uses,
                "kind": decl.kind,
                "name": decl.name,
                "owner": project.name,
                "params": decl.params,
                "credentials": decl.credentials,
                "purge": decl.purge,
                "stack": stack,
                # Declared as None so Pulumi exposes them as output properties.
                **{key: None for key in provider.attributes},
            }
            resource = resource_class(instance.engine, decl.kind)(
                provider,
                f"{project.name}/{resource_key(decl)}",
                props,
                pulumi.ResourceOptions(
                    parent=self,
                    retain_on_delete=not decl.purge,
                    additional_secret_outputs=list(provider.secret_outputs),
                ),
            )
            resources[resource_key(decl)] = {key: getattr(resource, key) for key in provider.attributes}
        self.outputs = {"resources": resources}
        self.register_outputs(self.outputs)

