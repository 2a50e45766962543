"""Shared engine instances as providers see them: address plus admin credential.

The workspace (stack config `devstack:workspace`) lists the shared instances;
each names the config key of its admin secret. Providers receive both through
`configure`, so admin credentials never appear in resource inputs or state.
"""

from __future__ import annotations

import json
import socket
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from providers.errors import EngineUnavailable, first_line

WORKSPACE_KEY = "devstack:workspace"


class SharedInstance(BaseModel):
    """One shared, already-running engine the workspace provides."""

    # hide_input_in_errors: an error about one field must not quote the others (the admin password).
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, hide_input_in_errors=True)

    name: str
    engine: str
    version: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    region: str | None = None  # AWS-API engines; us-east-1 when unset
    admin_user: str = Field(alias="adminUser")
    admin_secret: str = Field(alias="adminSecret", description="config key holding the admin password")
    admin_password: SecretStr | None = Field(default=None, exclude=True)

    def start_hint(self) -> str:
        """What to do when the instance does not answer: start it, or point the config at it."""
        try:
            socket.gethostbyname(self.host)
        except OSError:
            return f"{self.host!r} names no address: fix shared.{self.name}.host in the stack config"
        return (f"start it with `python -m tools.engines start {self.engine}`, or fix shared.{self.name}.host "
                f"and .port in the stack config if it runs elsewhere")

    def stopped_answering(self, cause: BaseException | str) -> EngineUnavailable:
        """The error for a server that went away (or stopped answering) in the middle of a call, after
        it had answered the connect: what was asked may or may not have been done, and a rerun finds out.
        `cause`: the client's error, or what was seen (`no answer within 30s`)."""
        seen = first_line(cause) if isinstance(cause, BaseException) else cause
        return EngineUnavailable("keep talking to", f"{self.engine} instance {self.name!r} at {self.address}",
                                 f"it stopped answering in the middle of the call ({seen})",
                                 f"{self.start_hint()}, then run the command again")

    @field_validator("host")
    @classmethod
    def _host_without_colon(cls, value: str) -> str:
        # Every export writes host:port unbracketed (DSNs, URLs, Kafka bootstrap).
        if ":" in value:
            raise ValueError(f"{value!r} is an IPv6 address or has a port; give a host name or an IPv4 address "
                             "(the port goes in `port`)")
        if not value or value != value.strip() or " " in value:
            raise ValueError("not a host name; give a host name or an IPv4 address (127.0.0.1 when unset)")
        return value

    @field_validator("port", mode="before")
    @classmethod
    def _port_not_a_flag(cls, value: Any) -> Any:
        # pydantic reads `port: true` as port 1, which then "does not answer".
        if isinstance(value, bool):
            raise ValueError("not a port number; give the engine's TCP port (1 to 65535)")
        return value

    @field_validator("admin_user", "admin_secret", "region")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError("blank or with spaces around it; give the name itself")
        return value

    @field_validator("admin_secret")
    @classmethod
    def _a_config_key(cls, value: str) -> str:
        # Read as the stack config key devstack:<adminSecret>.
        if ":" in value:
            raise ValueError("has a namespace; give the key alone (it is read as devstack:<key>)")
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # `version: 15` in YAML is a number; it means the text "15". `2.10` would be the float 2.1: refuse it.
        if isinstance(value, float):
            raise ValueError(f"{value!r} is a number; quote the version (version: \"{value}\")")
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def password(self) -> str:
        if self.admin_password is None:
            raise LookupError(f"no admin password configured for instance {self.name!r} (config key devstack:{self.admin_secret})")
        return self.admin_password.get_secret_value()


class _ConfigReader(Protocol):
    def get(self, key: str) -> Any: ...


def parse_object(value: Any) -> Any:
    """Structured config reaches providers as JSON text; accept either form. ValueError, saying what to
    write, for text that is no JSON (`devstack:workspace: hello`)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ValueError(f"not a mapping (got {value[:40]!r}): give it name, shared and projects, as "
                         "stacks/Pulumi.local.yaml does") from None


def instances_from_config(config: _ConfigReader) -> dict[str, SharedInstance]:
    """Build every shared instance of the workspace, with its admin password."""
    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    instances = {}
    for name, raw in (workspace.get("shared") or {}).items():
        secret_key = raw.get("adminSecret", "")
        password = config.get(f"devstack:{secret_key}") if secret_key else None
        secret = SecretStr(password) if password is not None else None  # never a plain str, even in an error
        instances[name] = SharedInstance.model_validate({**raw, "name": name, "admin_password": secret})
    return instances


def adoptions_from_config(config: _ConfigReader) -> dict[str, str]:
    """`devstack:workspace.adopt`: project -> the workspace whose resources of it a create may take over."""
    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    return {str(project): str(origin) for project, origin in (workspace.get("adopt") or {}).items()}
