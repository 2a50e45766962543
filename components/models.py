"""pydantic models of devstack.yaml and of the workspace (the stack config).

The models check shape and types; rules that need the workspace or the
engines' registries (instances, kinds, names, params, refs, collisions)
live in components.validation, which reports every problem at once.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from providers.instances import SharedInstance

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: How spec 27 names a shared instance in devstack.yaml: `workspace.shared.<instance>`.
SHARED_PREFIX = "workspace.shared."


def instance_name(uses: str) -> str:
    """The instance a `uses:` or `from:` names: `workspace.shared.pg` and the bare `pg` are both `pg`."""
    return uses.removeprefix(SHARED_PREFIX)


def shared_ref(instance: str) -> str:
    """The spec's form of an instance name, as the verbs write it into devstack.yaml."""
    return f"{SHARED_PREFIX}{instance}"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ResourceDecl(Strict):
    """One entry of `resources:`: a resource of `kind` in the shared instance `uses`."""

    uses: str
    kind: str
    name: str | None = Field(default=None, min_length=1)  # the project name when omitted
    params: dict[str, Any] = Field(default_factory=dict)
    credentials: Literal["predictable", "generated"] = "predictable"
    # Removing a declaration retains the resource and its data unless this is set.
    purge: StrictBool = False

    @field_validator("uses")
    @classmethod
    def _instance(cls, value: str) -> str:
        return instance_name(value)

    def key(self, project: str) -> str:
        """`<instance>/<kind>/<name>`: the stable child name and output key."""
        return f"{self.uses}/{self.kind}/{self.name or project}"


class EnvImport(Strict):
    """Import attributes of one of the project's resources as env vars (secrets stay secret).

    `vars` maps each variable to an attribute, or lists the conventional variable names of the
    engine's clients (`[PGPASSWORD]`), which the kind's template maps; validation turns a list
    into the mapping, and `from:` into the resource's key.
    """

    source: str = Field(alias="from", description="workspace.shared.<instance>[/<kind>[/<name>]] of this project")
    vars: dict[str, str] | list[str]

    @field_validator("vars")
    @classmethod
    def _env_names(cls, value: dict[str, str] | list[str]) -> dict[str, str] | list[str]:
        bad = [name for name in value if not ENV_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"env var names must match [A-Za-z_][A-Za-z0-9_]*: {', '.join(map(repr, bad))}")
        if isinstance(value, list) and len(set(value)) < len(value):
            twice = sorted({name for name in value if value.count(name) > 1})
            raise ValueError(f"lists {', '.join(twice)} twice (keep one)")
        return value


class ServiceEnv(BaseModel):
    """`env:` of a service: `import:` plus plain values (which may hold `${ref:...}`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    imports: list[EnvImport] = Field(default_factory=list, alias="import")

    def plain(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ServiceDecl(BaseModel):
    """A service as far as this program reads it: the rest of devstack owns its other fields
    (`template`, `image`, `ports` ...), which are accepted and left alone."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    uses: list[str] = Field(default_factory=list)
    env: ServiceEnv = Field(default_factory=ServiceEnv)

    @field_validator("uses")
    @classmethod
    def _instances(cls, value: list[str]) -> list[str]:
        return [instance_name(uses) for uses in value]


class ProjectFile(BaseModel):
    """A project's devstack.yaml: the fields this program owns; other top-level keys are devstack's."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    api_version: Literal["devstack/v1"] = Field(alias="apiVersion")
    kind: Literal["Project"]
    name: str
    services: dict[str, ServiceDecl] = Field(default_factory=dict)
    resources: list[ResourceDecl] = Field(default_factory=list)


class InstanceConfig(SharedInstance):
    """A shared instance as the stack config declares it: its admin password lives under its own secret
    key (`adminSecret`), never in the workspace, which Pulumi keeps in plaintext in the config and the state."""

    @field_validator("admin_password", mode="before")
    @classmethod
    def _not_in_the_workspace(cls, value: Any) -> Any:
        raise ValueError("the admin password does not go in devstack:workspace, which is kept in plaintext: "
                         "remove it, store it with `pulumi config set --secret <key>` and name that key in adminSecret")


class SecretStoreConfig(Strict):
    """`secretStore:` of a workspace: where generated credentials are pushed, for services to read them there
    (providers.localstack.stored_secret). `instance` names a localstack instance of `shared`."""

    kind: Literal["aws-sm", "aws-ssm"]
    instance: str = Field(min_length=1)
    #: Prepended to every entry's name; default `devstack/<workspace>/` (`/devstack/<workspace>/` for aws-ssm).
    prefix: str | None = Field(default=None, min_length=1)

    @field_validator("instance")
    @classmethod
    def _instance(cls, value: str) -> str:
        return instance_name(value)


class WorkspaceConfig(Strict):
    """`devstack:workspace` in a stack's config: shared instances and project files."""

    name: str = Field(min_length=1)
    shared: dict[str, InstanceConfig] = Field(default_factory=dict)
    projects: list[str] = Field(default_factory=list)
    #: Project name -> the workspace it moves here from (as a Conflict names it, `old@3f0c…`, or its
    #: stack name alone): only then may a create take over what that workspace's marker names.
    adopt: dict[str, str] = Field(default_factory=dict)
    #: Where generated credentials are pushed; none: they live in the state alone (encrypted).
    secret_store: SecretStoreConfig | None = Field(default=None, alias="secretStore")

    def store_prefix(self) -> str | None:
        """The prefix of the secret store's entry names, None without a store."""
        if self.secret_store is None:
            return None
        from providers.localstack.stored_secret import default_prefix  # the engine package, only when a store is set

        return self.secret_store.prefix or default_prefix(self.secret_store.kind, self.name)

    @field_validator("adopt")
    @classmethod
    def _workspace_names(cls, value: dict[str, str]) -> dict[str, str]:
        for project, workspace in value.items():
            if not workspace.strip() or workspace != workspace.strip():
                raise ValueError(f"{project}: blank or with spaces around it; give the workspace the Conflict "
                                 "names (stack@digest) or its stack name")
        return value

    @field_validator("shared", mode="before")
    @classmethod
    def _name_instances(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {name: {**spec, "name": name} if isinstance(spec, dict) else spec for name, spec in value.items()}
        return value
