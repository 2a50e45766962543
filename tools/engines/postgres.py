"""The postgres engine: Debian's PostgreSQL 15 on 127.0.0.1:25432.

DEVSTACK_POSTGRES_BIN names another install's bin dir (the tests run a PostgreSQL 16 from the
`pgserver` wheel beside it); its lib and share dirs sit next to it, and the server's OS user must be
able to run it.

initdb and the server refuse to run as root, so when we are root both run as
the `postgres` OS user, with the data and socket dirs owned by it. Auth:
- host (TCP) connections: scram-sha-256 only;
- local socket: peer for the bootstrap superuser `postgres`, mapped from the
  OS user running the server and from the one running this script (root can
  become postgres anyway); that is how the admin role's password is set.
With `--tls` the server takes TCP connections over TLS only (`hostssl`), with
copies of the TLS files in its data dir that the postgres OS user owns (the
server refuses a key anyone else may read).
The admin role (the credential's user) is a superuser whose password is set
with ALTER ROLE over that socket, as a SCRAM verifier computed client-side by
libpq, so no plaintext password reaches a file, argv, the server or its log.

Tenants: every start revokes PUBLIC's default CONNECT on the maintenance
database `postgres` and on `template1` (`close_maintenance_database`), so a
project's role gets into its own database and no other; superusers (the
admin) are not affected.
"""
from __future__ import annotations

import getpass
import os
import pwd
import signal
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql

from tools.engines.base import HOST, Credential, Engine, base_environment, write_private
from tools.engines.ports import PORTS

#: Debian's PostgreSQL 15, unless DEVSTACK_POSTGRES_BIN names another install's bin dir.
BIN = Path(os.environ.get("DEVSTACK_POSTGRES_BIN") or "/usr/lib/postgresql/15/bin")
#: The server's copies of the TLS files, in its data dir.
TLS_COPIES = {"cert": "server.crt", "key": "server.key", "ca": "root.crt"}
SUPERUSER = "postgres"  # bootstrap superuser: socket-only, no password
#: The databases initdb makes that admit sessions: closed to PUBLIC on every start.
SERVER_DATABASES = ("postgres", "template1")


class Postgres(Engine):
    name = "postgres"
    port = PORTS["postgres"]
    # SIGTERM is a "smart" shutdown that waits for every client session to
    # end; SIGINT is the "fast" one that disconnects them and still shuts down cleanly.
    stop_signal = signal.SIGINT

    @property
    def socket_dir(self) -> Path:
        return self.dir / "run"

    def command(self) -> list[str]:
        tls = [] if self.tls is None else [
            "-c", "ssl=on", "-c", f"ssl_cert_file={self.data_dir / TLS_COPIES['cert']}",
            "-c", f"ssl_key_file={self.data_dir / TLS_COPIES['key']}",
            "-c", f"ssl_ca_file={self.data_dir / TLS_COPIES['ca']}"]
        return [str(BIN / "postgres"), "-D", str(self.data_dir),
                "-c", f"listen_addresses={HOST}", "-c", f"port={self.port}",
                "-c", f"unix_socket_directories={self.socket_dir}", *tls]

    def signature(self) -> list[str]:
        # The trailing space keeps a sibling data dir (".../data2") from matching.
        return [str(BIN / "postgres"), f"-D {self.data_dir} "]

    def launch_options(self) -> dict:
        if os.geteuid() != 0:
            return {}
        account = pwd.getpwnam(SUPERUSER)
        # extra_groups=[] drops root's supplementary groups, which Popen would otherwise keep.
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def prepare(self, credential: Credential | None) -> None:
        """initdb on first start; (re)write the auth files on every cold start."""
        self.require(credential)
        if not (BIN / "postgres").exists():
            fix = ("set DEVSTACK_POSTGRES_BIN to a PostgreSQL bin dir" if "DEVSTACK_POSTGRES_BIN" in os.environ
                   else "run scripts/setup")
            raise self.error("start", f"no PostgreSQL server binary at {BIN / 'postgres'} ({fix})")
        for path in (self.data_dir, self.socket_dir):
            path.mkdir(mode=0o700, exist_ok=True)
            self._chown(path)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        self._write_auth_files()
        if self.tls is not None:
            self._copy_tls_files()

    def healthy(self) -> bool:
        try:
            with self._superuser() as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Make the admin role exist as a superuser with this password, and close `postgres` to tenants.

        A no-op when the admin can already log in over TCP with it; otherwise
        the role is created or its password replaced (a new credential is
        thereby re-applied to existing data). Runs on every start, cold or
        not, so the revoke also reaches a running server and a data dir that still grants CONNECT."""
        credential = self.require(credential)
        self.close_maintenance_database()
        if self._admin_can_login(credential):
            return False
        with self._superuser() as conn:
            verifier = conn.pgconn.encrypt_password(
                credential.password.encode(), credential.user.encode(), b"scram-sha-256").decode()
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [credential.user]).fetchone()
            conn.execute(sql.SQL("{} ROLE {} WITH SUPERUSER LOGIN PASSWORD {}").format(
                sql.SQL("ALTER" if exists else "CREATE"), sql.Identifier(credential.user), sql.Literal(verifier)))
        if not self._admin_can_login(credential):
            raise self.error("apply the admin credential to", f"role {credential.user} still cannot log in over TCP")
        return True

    def close_maintenance_database(self) -> list[str]:
        """REVOKE CONNECT FROM PUBLIC on the server's own databases; those it was still granted on (idempotent).

        Every database grants PUBLIC CONNECT when it is made: on `postgres` (and `template1`) that let any
        project's role in, to take the advisory key of devstack's DDL lock, or use TEMPORARY there. devstack
        revokes it on each project database; the server's own are the engine's to close. Superusers (the
        admin) connect regardless; `template0` admits no sessions at all."""
        closed = []
        with self._superuser() as conn:
            for database in SERVER_DATABASES:
                if conn.execute("SELECT has_database_privilege('public', %s, 'CONNECT')", [database]).fetchone()[0]:
                    conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))
                    closed.append(database)
        return closed

    def _admin_can_login(self, credential: Credential) -> bool:
        verified = {} if self.tls is None else {"sslmode": "verify-full", "sslrootcert": str(self.tls.ca)}
        try:
            with psycopg.connect(host=HOST, port=self.port, user=credential.user, password=credential.password,
                                 dbname="postgres", connect_timeout=3, **verified):
                return True
        except psycopg.OperationalError:
            return False

    def _superuser(self) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=self.port, user=SUPERUSER,
                               dbname="postgres", connect_timeout=3, autocommit=True)

    def _initdb(self) -> None:
        argv = [str(BIN / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                "--auth-local=peer", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C"]
        with open(self.log_file, "ab") as log:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  cwd=self.dir, env=base_environment(),
                                  **self.launch_options())
        if done.returncode != 0:
            raise self.error("initialize", f"initdb exited with code {done.returncode}")

    def _write_auth_files(self) -> None:
        """pg_hba: peer (mapped) for the bootstrap superuser on the socket, scram elsewhere (TCP over TLS only
        when the server serves it)."""
        mapped = sorted({_server_os_user(), getpass.getuser()})
        files = {
            "pg_hba.conf": "\n".join([
                "# generated by tools/engines/postgres.py; rewritten on every cold start",
                f"local all {SUPERUSER} peer map=devstack",
                "local all all scram-sha-256",
                f"{'host' if self.tls is None else 'hostssl'} all all {HOST}/32 scram-sha-256",
                ""]),
            "pg_ident.conf": "".join(f"devstack {user} {SUPERUSER}\n" for user in mapped),
        }
        for name, text in files.items():
            write_private(self.data_dir / name, text)
            self._chown(self.data_dir / name)

    def _copy_tls_files(self) -> None:
        """The server certificate, its key and the CA, as files of the server's OS user (the key 0600)."""
        for source, name in TLS_COPIES.items():
            write_private(self.data_dir / name, getattr(self.tls, source).read_text())
            self._chown(self.data_dir / name)

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            account = pwd.getpwnam(SUPERUSER)
            os.chown(path, account.pw_uid, account.pw_gid)


def _server_os_user() -> str:
    return SUPERUSER if os.geteuid() == 0 else getpass.getuser()


ENGINE = Postgres()
