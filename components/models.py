"""pydantic models of devstack.yaml and of the workspace (the stack config)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from providers.instances import SharedInstance


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ResourceDecl(Strict):
    """One entry of `resources:`: a resource of `kind` in the shared instance `uses`."""

    uses: str
    kind: str
    name: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    credentials: Literal["predictable", "generated"] = "predictable"
    # Removing a declaration retains the resource and its data unless this is set.
    purge: bool = False


class ProjectFile(Strict):
    """A project's devstack.yaml."""

    api_version: Literal["devstack/v1"] = Field(alias="apiVersion")
    kind: Literal["Project"]
    name: str
    services: dict[str, Any] = Field(default_factory=dict)
    resources: list[ResourceDecl] = Field(default_factory=list)

    @model_validator(mode="after")
    def _default_names(self) -> "ProjectFile":
        for decl in self.resources:
            if not decl.name:
                decl.name = self.name
        return self


class WorkspaceConfig(Strict):
    """`devstack:workspace` in a stack's config: shared instances and project files."""

    name: str
    shared: dict[str, SharedInstance] = Field(default_factory=dict)
    projects: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _name_instances(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("shared"), dict):
            data = {**data, "shared": {n: {**v, "name": n} for n, v in data["shared"].items() if isinstance(v, dict)}}
        return data
