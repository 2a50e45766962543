"""Shared engine instances as providers see them: address plus admin credential.

The workspace (stack config `devstack:workspace`) lists the shared instances;
each names the config key of its admin secret. Providers receive both through
`configure`, so admin credentials never appear in resource inputs or state.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import socket
import ssl
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
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


class InstanceTls(BaseModel):
    """How clients reach an instance over TLS: the `tls:` block of a shared instance (`tls: true` for
    the system's trust store and the host's name). Verification is on unless `verify: false`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, hide_input_in_errors=True)

    #: The CA bundle that signs the server's certificate: a PEM file, or the stack-config key of its text.
    ca_file: str | None = Field(default=None, alias="caFile")
    ca_secret: str | None = Field(default=None, alias="caSecret")
    #: The name the server's certificate is checked against; the host when unset.
    server_name: str | None = Field(default=None, alias="serverName")
    verify: bool = True
    #: A client certificate, where the engine asks for one: its PEM file, and its key's file or config key.
    cert_file: str | None = Field(default=None, alias="certFile")
    key_file: str | None = Field(default=None, alias="keyFile")
    key_secret: str | None = Field(default=None, alias="keySecret")
    ca_pem: str | None = Field(default=None, exclude=True, repr=False)
    key_pem: SecretStr | None = Field(default=None, exclude=True, repr=False)

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _a_readable_file(cls, value: str | None) -> str | None:
        # Absolute, so the program and the provider (and a service given it) read the same file.
        if value is None:
            return None
        path = Path(value).expanduser().absolute()
        if not path.is_file() or not os.access(path, os.R_OK):
            raise ValueError(f"{value!r} is no readable file: give the path of a PEM file (absolute, or from the "
                             "directory Pulumi runs in)")
        return str(path)

    @field_validator("ca_secret", "key_secret", "server_name")
    @classmethod
    def _a_name(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError("blank or with spaces around it; give the name itself")
        if value is not None and info.field_name != "server_name" and ":" in value:
            raise ValueError("has a namespace; give the key alone (it is read as devstack:<key>)")
        return value

    @model_validator(mode="after")
    def _one_source_each(self) -> "InstanceTls":
        if self.ca_file and self.ca_secret:
            raise ValueError("tls: give caFile or caSecret, not both")
        if self.key_file and self.key_secret:
            raise ValueError("tls: give keyFile or keySecret, not both")
        if bool(self.cert_file) != bool(self.key_file or self.key_secret):
            raise ValueError("tls: a client certificate needs both certFile and keyFile (or keySecret)")
        return self

    def server_name_for(self, host: str) -> str:
        return self.server_name or host

    def ca_path(self) -> str | None:
        """A file holding the CA bundle (caSecret's text is written to one once), or None for the system's."""
        if self.ca_secret and self.ca_pem is None:
            raise LookupError(f"tls.caSecret names devstack:{self.ca_secret}, which the stack config does not set")
        return self.ca_file or (_private_file("ca", self.ca_pem) if self.ca_pem else None)

    def client_cert(self) -> tuple[str, str] | None:
        """(certificate file, key file) of the client certificate, or None."""
        if not self.cert_file:
            return None
        if self.key_secret and self.key_pem is None:
            raise LookupError(f"tls.keySecret names devstack:{self.key_secret}, which the stack config does not set")
        key = self.key_file or _private_file("key", self.key_pem.get_secret_value())
        return self.cert_file, key

    def ssl_context(self) -> ssl.SSLContext:
        """A client context: the CA (or the system's), hostname checking and verification as configured.
        One per settings in the process: making one reads the CA bundle (the system's holds ~150
        certificates, tens of milliseconds), and one context serves every connection and thread."""
        return _context_for(self)


@lru_cache(maxsize=64)
def _context_for(tls: InstanceTls) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=tls.ca_path())
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert := tls.client_cert():
        context.load_cert_chain(*cert)
    return context


_PRIVATE_DIR: list[str] = []
_PRIVATE_LOCK = threading.Lock()


def _private_file(kind: str, text: str) -> str:
    """`text` in a file only this user reads, in a private directory of this process; one per content."""
    with _PRIVATE_LOCK:
        if not _PRIVATE_DIR:
            _PRIVATE_DIR.append(tempfile.mkdtemp(prefix="devstack-tls-"))
        path = Path(_PRIVATE_DIR[0]) / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.pem"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
        return str(path)


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
    #: Reached over TLS when set (`tls: true` or a block); plaintext when absent or `tls: false`.
    tls: InstanceTls | None = None
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

    def tls_hint(self) -> str:
        """What to do when the TLS handshake failed: the instance's `tls:` settings to check."""
        return (f"check shared.{self.name}.tls in the stack config: caFile or caSecret must hold the CA that signed "
                "the server's certificate, which must carry serverName or the host (or set verify: false)")

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

    @field_validator("tls", mode="before")
    @classmethod
    def _tls_shorthand(cls, value: Any) -> Any:
        if value is True:
            return {}
        if value is False or value is None:
            return None
        if isinstance(value, dict) and "enabled" in value:
            # `enabled: false` keeps a block written out for later without turning it on.
            rest = {key: item for key, item in value.items() if key != "enabled"}
            return rest if value["enabled"] is True else None if value["enabled"] is False else value
        return value

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

    def scheme(self, plain: str, secure: str) -> str:
        """`secure` (`https`, `rediss`, `tls`) when the instance is reached over TLS, else `plain`."""
        return secure if self.tls else plain

    def template_values(self) -> dict[str, Any]:
        """What templates may read of the instance's TLS: `tls`, `caFile` (a configured file only: a service
        given a caSecret's CA reads it from where the team keeps it), `serverName`, `tlsVerify`."""
        tls = self.tls
        return {"tls": tls is not None, "caFile": (tls.ca_file or "") if tls else "",
                "serverName": tls.server_name_for(self.host) if tls else "", "tlsVerify": bool(tls and tls.verify)}

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
        instances[name] = SharedInstance.model_validate({**raw, "name": name, "admin_password": secret,
                                                         **_tls_secrets(config, raw.get("tls"))})
    return instances


def _tls_secrets(config: _ConfigReader, tls: Any) -> dict[str, Any]:
    """`tls` with the texts its caSecret and keySecret name read from the stack config."""
    if not isinstance(tls, dict) or not (tls.get("caSecret") or tls.get("keySecret")):
        return {}
    found = {}
    if key := tls.get("caSecret"):
        found["ca_pem"] = config.get(f"devstack:{key}")
    if key := tls.get("keySecret"):
        value = config.get(f"devstack:{key}")
        found["key_pem"] = SecretStr(value) if value is not None else None
    return {"tls": {**tls, **found}}


def adoptions_from_config(config: _ConfigReader) -> dict[str, str]:
    """`devstack:workspace.adopt`: project -> the workspace whose resources of it a create may take over."""
    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    return {str(project): str(origin) for project, origin in (workspace.get("adopt") or {}).items()}
