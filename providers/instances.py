"""Shared engine instances as providers see them: address plus admin credential.

The workspace (stack config `devstack:workspace`) lists the shared instances;
each names the config key of its admin secret. Providers receive both through
`configure`, so admin credentials never appear in resource inputs or state.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

from providers.errors import EngineUnavailable, first_line

WORKSPACE_KEY = "devstack:workspace"
#: Engines whose clients bootstrap from several addresses of one cluster (`servers:`).
CLUSTER_ENGINES = ("kafka", "nats")
_HOST_RULE = 'give a host name, an IPv4 address or an IPv6 address ("::1" or "[::1]"); the port goes in `port`'


def canonical_host(text: str) -> str:
    """`text` as devstack keeps a host: an IPv6 literal bare and compressed (`[::1]` and `0:0::1` are `::1`),
    anything else as written. ValueError, saying what to write, for what is no host."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if not bare or bare != bare.strip() or " " in bare or "/" in bare or "@" in bare:
        raise ValueError(f"{text!r} is not a host: {_HOST_RULE}")
    if ":" not in bare and bare == text:
        return text
    head, _, tail = bare.rpartition(":")
    if bare == text and tail.isdigit() and len(tail) <= 5 and _is_ipv6(head):
        # `::1:5432` may be an address, but most likely is `::1` with its port: say which to write.
        raise ValueError(f"{text!r} is ambiguous: an IPv6 address or {head!r} with port {tail}? Give the address "
                         f"alone (host: \"{head}\", port: {tail}), or bracket it when it is the whole address "
                         f"(host: \"[{bare}]\")")
    try:
        address = ipaddress.IPv6Address(bare)
    except ValueError:
        raise ValueError(f"{text!r} is not a host: {_HOST_RULE}") from None
    if address.scope_id:
        raise ValueError(f"{text!r} has a zone (%{address.scope_id}), which URLs cannot carry: give a global or "
                         "loopback address, or a host name")
    return address.compressed


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def join_address(host: str, port: int) -> str:
    """`host:port` as URLs, DSNs and bootstrap lists write it: an IPv6 literal in brackets (`[::1]:5432`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_address(text: str) -> tuple[str, int]:
    """(host, port) of `host:port` (`[::1]:9092`, `kafka-1:9092`). ValueError, saying what to write, otherwise."""
    rule = 'give host:port, an IPv6 address in brackets ("[::1]:9092")'
    head, colon, port = str(text).rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not host:port with a port from 1 to 65535: {rule}")
    if ":" in head and not head.startswith("["):
        raise ValueError(f"{text!r} is ambiguous: {rule}")
    return canonical_host(head), int(port)


class SharedInstance(BaseModel):
    """One shared, already-running engine the workspace provides."""

    # hide_input_in_errors: an error about one field must not quote the others (the admin password).
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, hide_input_in_errors=True)

    name: str
    engine: str
    version: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    #: Kafka and NATS: every bootstrap address of the cluster, `host:port` each; the first is `host`/`port`.
    servers: tuple[str, ...] | None = None
    region: str | None = None  # AWS-API engines; us-east-1 when unset
    admin_user: str = Field(alias="adminUser")
    admin_secret: str = Field(alias="adminSecret", description="config key holding the admin password")
    admin_password: SecretStr | None = Field(default=None, exclude=True)

    def start_hint(self) -> str:
        """What to do when the instance does not answer: start it, or point the config at it."""
        field = "servers" if self.servers else "host"
        for host, _ in self.addresses:
            try:
                socket.getaddrinfo(host, None)
            except OSError:
                return f"{host!r} names no address: fix shared.{self.name}.{field} in the stack config"
        where = "servers" if self.servers else "host and .port"
        return (f"start it with `python -m tools.engines start {self.engine}`, or fix shared.{self.name}.{where} "
                f"in the stack config if it runs elsewhere")

    def stopped_answering(self, cause: BaseException | str) -> EngineUnavailable:
        """The error for a server that went away (or stopped answering) in the middle of a call, after
        it had answered the connect: what was asked may or may not have been done, and a rerun finds out.
        `cause`: the client's error, or what was seen (`no answer within 30s`)."""
        seen = first_line(cause) if isinstance(cause, BaseException) else cause
        return EngineUnavailable("keep talking to", f"{self.engine} instance {self.name!r} at {self.address}",
                                 f"it stopped answering in the middle of the call ({seen})",
                                 f"{self.start_hint()}, then run the command again")

    @model_validator(mode="before")
    @classmethod
    def _address_from_servers(cls, data: Any) -> Any:
        # `servers` alone: host and port are its first entry (a bad one is said by the `servers` check;
        # the placeholder port only keeps a second, misleading "port: required" out of the message).
        if isinstance(data, dict) and data.get("servers") is not None and "port" not in data and "host" not in data:
            first = data["servers"][0] if isinstance(data["servers"], (list, tuple)) and data["servers"] else None
            try:
                host, port = split_address(first)
            except ValueError:
                host, port = "127.0.0.1", 1
            return {**data, "host": host, "port": port}
        return data

    @field_validator("host")
    @classmethod
    def _a_host(cls, value: str) -> str:
        return canonical_host(value)

    @field_validator("servers", mode="before")
    @classmethod
    def _servers(cls, value: Any, info: ValidationInfo) -> Any:
        engine = info.data.get("engine")
        if value is None:
            return None
        if engine not in CLUSTER_ENGINES:
            raise ValueError(f"{engine} takes one address: give host and port instead "
                             f"(several servers are for {' and '.join(CLUSTER_ENGINES)})")
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError('give a list of the cluster\'s bootstrap addresses, host:port each '
                             '(servers: ["kafka-1:9092", "[::1]:9092"])')
        addresses = [split_address(item) for item in value]
        if len(set(addresses)) != len(addresses):
            raise ValueError("names one address twice; list each server once")
        given = (info.data.get("host", "?"), info.data.get("port", 0))
        if given != addresses[0]:
            raise ValueError(f"the first server must be host:port ({join_address(*given)}): give servers alone, "
                             "or host and port alone")
        return tuple(join_address(host, port) for host, port in addresses)

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
        """The instance's (first) address as `host:port`, IPv6 in brackets: what messages and identity name."""
        return join_address(self.host, self.port)

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """Every (host, port) a client may bootstrap from, the instance's own first."""
        return tuple(split_address(server) for server in self.servers) if self.servers else ((self.host, self.port),)

    @property
    def several(self) -> str | None:
        """The `servers` output: every address comma-joined when the instance lists several, else None."""
        return self.bootstrap if self.servers and len(self.servers) > 1 else None

    @property
    def bootstrap(self) -> str:
        """Every address, comma-joined (`127.0.0.1:9092,[::1]:9092`): Kafka's bootstrap.servers."""
        return ",".join(join_address(host, port) for host, port in self.addresses)

    def urls(self, scheme: str) -> list[str]:
        """Every address as a URL of `scheme` (`nats://[::1]:4222`)."""
        return [f"{scheme}://{join_address(host, port)}" for host, port in self.addresses]

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
