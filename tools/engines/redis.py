"""The redis engine: our own redis-server (Debian package) on 127.0.0.1:26379.

Not the Debian service: a separate process with its config, ACL file, data,
log and pid file under the engine dir. Auth is ACL-only: the `default` user
is off, and the admin user's password is stored as a SHA-256 hash (`#<hex>`)
in a 0600 ACL file, so no plaintext password is ever written.

With `--tls` it listens for TLS only (`port 0`, `tls-port`): a client
certificate is checked when one is presented, and not asked for.

Every write goes to the append-only file before it is answered. The
provider's ownership markers are plain keys beside tenants' data, while the
tenant users they own go to the ACL file at once (ACL SAVE): with snapshots
alone, a crash kept the users and lost the markers, and the users' names
then belonged to "something devstack does not manage" for good.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import socket
import ssl
import time
from pathlib import Path

import redis as redis_py  # the client library; absolute import, not this module

from tools.engines.base import HOST, Credential, Engine, write_private
from tools.engines.ports import PORTS

BINARY = "redis-server"


class Redis(Engine):
    name = "redis"
    port = PORTS["redis"]

    @property
    def config_file(self) -> Path:
        return self.dir / "redis.conf"

    @property
    def acl_file(self) -> Path:
        return self.dir / "users.acl"

    def command(self) -> list[str]:
        return [shutil.which(BINARY) or BINARY, str(self.config_file)]

    def signature(self) -> list[str]:
        # redis-server retitles itself; the template below keeps the config
        # path in the title so the check still tells our server from others.
        return ["redis-server", str(self.config_file)]

    def prepare(self, credential: Credential | None) -> None:
        """Write the config and, from `credential`, the ACL file (re-applied on every cold start)."""
        credential = self.require(credential)
        self._admin = credential.user
        if shutil.which(BINARY) is None:
            raise self.error("start", "redis-server is not installed; run tools/engines/install.sh")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        snapshot_only = (self.data_dir / "dump.rdb").exists() and not self._append_only_file_whole()
        if snapshot_only:
            shutil.rmtree(self.data_dir / "appendonlydir", ignore_errors=True)  # a cut switch's: written anew
        self.config_file.write_text(self._config(append_only=not snapshot_only))
        write_private(self.acl_file, _acl(credential, self._tenant_users()))

    def _append_only_file_whole(self) -> bool:
        """Whether the append-only file holds the data. Not when only a snapshot does: an earlier release's
        data, or a switch to the file cut short (Redis makes its directory at once, its manifest once the
        file is whole). Started with appendonly on, Redis would then ignore the snapshot and start empty,
        and save that over it at the next stop; so it starts without, and `_append_every_write` switches."""
        return any((self.data_dir / "appendonlydir").glob("*.manifest"))

    def reset_paths(self) -> list[Path]:
        # The tenant users go with the markers that made them the projects': kept alone, their
        # names could never be made again.
        return [*super().reset_paths(), self.acl_file]

    def _tenant_users(self) -> list[str]:
        """ACL lines of tenant users (saved by the provider with ACL SAVE): they survive a restart."""
        try:
            lines = self.acl_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [line for line in lines if line.startswith("user ") and line.split()[1] not in ("default", self._admin)]

    def launch_options(self) -> dict:
        # ACL SAVE rewrites the ACL file (password hashes) with the server's umask: keep it private.
        return {"umask": 0o077}

    def healthy(self) -> bool:
        """A raw, unauthenticated PING (over verified TLS when it serves TLS): NOAUTH proves the server
        answers (LOADING does not).

        Raw because redis-py retries a refused handshake with backoff for seconds."""
        try:
            with socket.create_connection((HOST, self.port), timeout=2) as raw:
                sock = raw if self.tls is None else ssl.create_default_context(cafile=self.tls.ca).wrap_socket(
                    raw, server_hostname=HOST)
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:  # ssl.SSLError included
            return False

    def _tls_options(self) -> dict:
        """redis-py's options for this server: verified TLS when it serves TLS."""
        if self.tls is None:
            return {}
        return {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Check the admin can AUTH. A running server only re-reads its ACL file
        through ACL LOAD, which needs the old password we never stored, so a
        changed credential asks for a restart instead of half-applying it."""
        credential = self.require(credential)
        try:
            with redis_py.Redis(host=HOST, port=self.port, username=credential.user, password=credential.password,
                                socket_timeout=2, retry=None, **self._tls_options()) as client:
                client.ping()
                self._append_every_write(client)
        except redis_py.AuthenticationError:
            raise self.error("apply the admin credential to",
                             "the running server has another admin password; restart it to re-apply: "
                             "python -m tools.engines stop redis && python -m tools.engines start redis"
                             ) from None
        return False

    def _append_every_write(self, client: redis_py.Redis) -> None:
        """Turn the append-only file on in a server started without it (from a snapshot alone, or by an
        earlier release): Redis writes it from the data in memory, in the background. Waits a while for
        it, but a large data set may take longer: that is no failure (stopping the server now would cut
        the switch short), and until the file is whole the snapshot still stands."""
        if client.config_get("appendonly").get("appendonly") == "yes":
            return
        client.config_set("appendfsync", "always")
        client.config_set("appendonly", "yes")
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            persistence = client.info("persistence")
            if not persistence.get("aof_rewrite_in_progress") and not persistence.get("aof_rewrite_scheduled"):
                return
            time.sleep(0.05)

    def _config(self, append_only: bool) -> str:
        listen = [f"port {self.port}"] if self.tls is None else [
            "port 0", f"tls-port {self.port}", f"tls-cert-file {self.tls.cert}", f"tls-key-file {self.tls.key}",
            f"tls-ca-cert-file {self.tls.ca}", "tls-auth-clients optional"]
        return "\n".join([
            f"bind {HOST}",
            *listen,
            "protected-mode yes",
            "daemonize no",
            'logfile ""',  # stdout, which the launcher sends to the engine log
            f"dir {self.data_dir}",
            f"aclfile {self.acl_file}",
            f"appendonly {'yes' if append_only else 'no'}",
            "appendfsync always",
            # One logical db per project's redis_index: 16 runs out quickly on a shared server.
            "databases 64",
            'proc-title-template "{title} {listen-addr} {config-file}"',
            "",
        ])


def _acl(credential: Credential, tenant_users: list[str]) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", credential.user):
        raise ValueError(f"redis admin user name {credential.user!r} has characters an ACL file cannot hold")
    digest = hashlib.sha256(credential.password.encode()).hexdigest()
    # `default` cannot log in (off, no password), but keeps every permission: Redis 7.0 replays each
    # MULTI/EXEC of the append-only file (a script's writes, a purge, a tenant's transaction) as
    # `default`, and without them drops it with NOPERM at every start, bringing back what it undid.
    lines = ["user default off ~* &* +@all", f"user {credential.user} on #{digest} ~* &* +@all", *tenant_users]
    return "\n".join(lines) + "\n"


ENGINE = Redis()
