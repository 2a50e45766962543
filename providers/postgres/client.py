"""PostgreSQL admin sessions: connecting, keeping sessions between calls, the DDL lock, server features.

Every admin session pins its settings at login (ADMIN_SETTINGS), so nothing a
tenant sets on its own database steers the admin's statements. DDL runs in
autocommit mode (CREATE DATABASE cannot run in a transaction) under one
server-wide advisory lock, so two stacks creating tenants at once never race
into "already exists" or "tuple concurrently updated".
"""

from __future__ import annotations

import select
import socket
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

from providers.clients import LazyModule
from providers.errors import Conflict, EngineUnavailable, Unsupported, first_line
from providers.instances import SharedInstance

# Imported on the first engine call: the program, check and diff never need them.
psycopg = LazyModule("psycopg")
sql = LazyModule("psycopg.sql")

#: The engine's name in messages and in what a scan finds.
ENGINE_NAME = "postgres"

# Any constant shared by all devstack processes; it only has to be stable.
DDL_LOCK_KEY = 0x6465767374616B  # "devstak"
#: How long one wait for the DDL lock lasts before ddl_lock looks at who holds it.
DDL_LOCK_ROUND = "1s"
#: How long a change holding the DDL lock waits for any other lock. A tenant's sessions can hold one on
#: its own database or role, or on what it granted another project's role, as long as they like, while
#: every other stack's PostgreSQL change waits for the DDL lock.
TENANT_LOCK_WAIT = "5s"

#: Server features by major version, read in one place.
FEATURES = {
    "drop_database_force": lambda major: major >= 13,
    # Trusted extensions (installable by a database owner) exist since 13; before, treat none as trusted.
    "trusted_extensions": lambda major: major >= 13,
    # GRANT ... WITH INHERIT/SET options, and CREATEROLE acting only on roles it holds ADMIN OPTION on.
    "role_grant_options": lambda major: major >= 16,
}

#: The first libpq that reads `sslrootcert=system` (the system's trust store).
LIBPQ_SYSTEM_ROOTS = 160000

#: PostgreSQL's `integer`: the largest connection limit it takes.
INT4_MAX = 2**31 - 1


#: Settings every admin session pins. A tenant owns its database and may `ALTER DATABASE ... SET`
#: anything a user may set, for every session there, the admin's included (a client's own settings
#: win): a search_path putting its functions and operators ahead of PostgreSQL's would run them as
#: superuser; a `role` would run the admin's statements as another project's role; read-only
#: transactions or tiny timeouts would make another project's purge fail in its database, and a library
#: to preload that does not exist would shut every session out of it. An admin that is not a superuser
#: records a database's workspace in its own application_name there: pinned too, it names the session.
ADMIN_SETTINGS = (
    "search_path=pg_catalog,pg_temp", "role=none", "application_name=devstack", "default_transaction_read_only=off",
    r"default_transaction_isolation=read\ committed", "statement_timeout=0", "lock_timeout=0",
    "idle_in_transaction_session_timeout=0", "local_preload_libraries=",
)
#: The server ends an admin session idle this long (PostgreSQL 14 and later). devstack's own never idle
#: that long (kept between calls for KEPT_SECONDS at most, holding no lock); one whose client died
#: without closing its socket (a machine gone, a half-open connection) would otherwise hold the DDL
#: lock, and stall every stack's PostgreSQL change on the server, for as long as TCP takes to notice:
#: hours.
ADMIN_IDLE_LIMIT = "60s"
#: Server major versions by address, learnt from the first admin session (always in `postgres`).
_majors: dict[str, int] = {}
#: Seconds an admin session waits for the server's answer to one statement. A server that stops answering
#: without closing the connection (stopped, a partition) would otherwise hold the command, and the DDL lock
#: its session may hold, for ever. No admin statement takes this long: its lock waits are bounded at 5 s.
ANSWER_LIMIT = 60.0


@lru_cache(maxsize=None)
def _answering_connection() -> type:
    """psycopg's Connection, every wait on the server bounded by ANSWER_LIMIT (made on first use: psycopg
    is imported on the first engine call)."""

    class AnsweringConnection(psycopg.Connection):
        def wait(self, gen: Any, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            return super().wait(gen, *args, timeout=ANSWER_LIMIT if timeout is None else timeout, **kwargs)

    return AnsweringConnection


def tls_params(instance: SharedInstance) -> dict[str, str]:
    """libpq's connection parameters for reaching `instance` (none for plaintext): `verify-full` against the
    CA (or the system's store), `require` (encrypted, unverified) with `verify: false`; a serverName other
    than the host is what libpq checks (`host`) while it connects to the host's address (`hostaddr`)."""
    tls = instance.tls
    if tls is None:
        return {}
    if not tls.verify:
        params = {"sslmode": "require"}
    elif ca := tls.ca_path():
        params = {"sslmode": "verify-full", "sslrootcert": ca}
    elif psycopg.pq.version() >= LIBPQ_SYSTEM_ROOTS:
        params = {"sslmode": "verify-full", "sslrootcert": "system"}
    else:  # an older libpq knows no `system`: it reads ~/.postgresql/root.crt
        params = {"sslmode": "verify-full"}
    if cert := tls.client_cert():
        params |= {"sslcert": cert[0], "sslkey": cert[1]}
    if tls.server_name and tls.server_name != instance.host:
        params |= {"host": tls.server_name, "hostaddr": _address_of(instance.host)}
    return params


def connect_params(instance: SharedInstance) -> dict[str, Any]:
    """Where and how to connect to `instance`: host and port, with its TLS parameters."""
    return {"host": instance.host, "port": instance.port, **tls_params(instance)}


def _address_of(host: str) -> str:
    """`hostaddr` takes an address only: a host name is resolved here (libpq would, for `host`)."""
    return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]


def refusal(err: BaseException) -> str:
    """A server's refusal as one line: its message, and its DETAIL when it gives one (from 16 on PostgreSQL
    says there, not in the message, which attribute or option a privilege needs)."""
    detail = getattr(getattr(err, "diag", None), "message_detail", None)
    return f"{first_line(err)}: {detail[:1].lower()}{detail[1:].rstrip('.')}" if detail else first_line(err)


def connection_hint(instance: SharedInstance, err: BaseException) -> str:
    """What to do when a connect failed: the TLS settings for a TLS failure, else start the server."""
    text = str(err)
    if instance.tls is not None and ("SSL" in text or "certificate" in text or "does not support" in text):
        return instance.tls_hint()
    return instance.start_hint()


def admin_options(address: str) -> str:
    major = _majors.get(address, 0)
    # Pinned like the rest (an unknown setting refuses the session, so only where the server has it).
    settings = ADMIN_SETTINGS + ((f"idle_session_timeout={ADMIN_IDLE_LIMIT}",) if major >= 14 else ())
    return " ".join(f"-c {setting}" for setting in settings)


#: What devstack does with the admin: a superuser may do it all; so may a role with CREATEDB and CREATEROLE
#: (managed PostgreSQL's admin), made a member of a project's role for the time it acts as that role.
ADMIN_NEEDS = ("devstack hands each project's databases to the project's role, and revokes, reassigns and drops "
               "them: a superuser may, and so may a role with CREATEDB and CREATEROLE, which devstack makes a "
               "member of a project's role for the time it acts as that role")
#: The admin's mode, as `devstack doctor` names it.
SUPERUSER_MODE, LIMITED_MODE = "superuser", "CREATEDB+CREATEROLE"


def admin_fix(instance: SharedInstance) -> str:
    """What an admin that is neither needs (the provider's refusal and the doctor say it alike)."""
    return (f"ALTER ROLE {instance.admin_user} CREATEDB CREATEROLE (or SUPERUSER), as a role that may, or set "
            f"shared.{instance.name}.adminUser to a role that has them")


def is_superuser(conn: psycopg.Connection) -> bool:
    """Whether the session's login is a superuser (the server reports it at login: no query)."""
    return conn.info.parameter_status("is_superuser") == "on"


def admin_mode(conn: psycopg.Connection) -> str | None:
    """SUPERUSER_MODE, LIMITED_MODE, or None when the login may do neither devstack needs."""
    if is_superuser(conn):
        return SUPERUSER_MODE
    row = conn.execute("SELECT rolcreatedb AND rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()
    return LIMITED_MODE if row == (True,) else None


@contextmanager
def admin_connection(instance: SharedInstance, dbname: str = "postgres") -> Iterator[psycopg.Connection]:
    """An autocommit admin connection; EngineUnavailable when the server does not answer.

    A session on `postgres` that ends cleanly is kept for the process's next call (see _kept_sessions).
    """
    what, options = f"postgres instance {instance.name!r} at {instance.address}", admin_options(instance.address)
    limit_at_login = "idle_session_timeout" in options
    # TLS settings in the key: a session verified one way is no session of an instance set another.
    key = (instance.host, instance.port, instance.admin_user, instance.password(), dbname, options, instance.tls)
    conn = _kept_session(key) or _new_admin_session(instance, dbname, what, options)
    # The process's first session went out before the server's version was known: its limit is SET, and
    # the reset before reuse (RESET ALL) would undo that. Sessions on a project's database are never
    # kept: one left there would hold off its DROP DATABASE.
    keep = dbname == "postgres" and (limit_at_login or conn.info.server_version < 140000)
    clean = False
    try:
        if conn.info.server_version >= 140000 and not limit_at_login:
            conn.execute(sql.SQL("SET idle_session_timeout = {}").format(sql.Literal(ADMIN_IDLE_LIMIT)))
        yield conn
        clean = True
    # psycopg's own wait timeout (private in name; Connection.wait raises it from 3.3, pyproject's floor). The
    # session's state is unknown: closed, so nothing waits on it again.
    except psycopg.errors._WaitTimeout as err:
        raise instance.stopped_answering(f"no answer within {ANSWER_LIMIT:.0f}s") from err
    except psycopg.errors.IdleSessionTimeout as err:  # the server runs: it ended a session left idle
        raise EngineUnavailable("keep talking to", what, f"it ended this admin session after it sat idle for "
                                f"{ADMIN_IDLE_LIMIT} ({first_line(err)})", "nothing more was changed; run it again"
                                ) from err
    except psycopg.OperationalError as err:
        if not conn.broken:
            raise
        raise instance.stopped_answering(err) from err
    finally:
        if not (clean and keep and _kept(key, conn)):
            conn.close()


def _new_admin_session(instance: SharedInstance, dbname: str, what: str, options: str) -> psycopg.Connection:
    try:
        conn = _answering_connection().connect(
            **connect_params(instance),
            user=instance.admin_user,
            password=instance.password(),
            dbname=dbname,
            autocommit=True,
            connect_timeout=5,
            options=options,
        )
    except psycopg.OperationalError as err:
        first = first_line(err)
        if "too many clients" in str(err) or "connection slots are reserved" in str(err):
            raise EngineUnavailable("connect to", what, first, "the server is out of connection slots: see who holds "
                                    "them in pg_stat_activity, then run it again") from err
        refused = "password authentication failed" in str(err)  # it runs: the admin secret is wrong
        if f'database "{dbname}" does not exist' in str(err):  # it runs, too: starting it would not help
            hint = ("create it (CREATE DATABASE postgres): devstack's admin connects there first" if dbname == "postgres"
                    else "it was dropped meanwhile: `pulumi refresh` records that, then run it again")
        else:
            hint = (f"check devstack:{instance.admin_secret} in the stack config" if refused
                    else connection_hint(instance, err))
        raise EngineUnavailable("connect to", what, first, hint) from err
    if admin_mode(conn) is None:
        conn.close()
        raise Unsupported("use", what, f"its admin role {instance.admin_user!r} is neither a superuser nor has "
                          "CREATEDB and CREATEROLE", f"{ADMIN_NEEDS}: {admin_fix(instance)}; nothing was changed")
    _majors.setdefault(instance.address, conn.info.server_version // 10000)
    return conn


#: Admin sessions on `postgres` left by calls that ended cleanly, reset, by server, login and startup
#: options, with the time each was left. A new session costs the server a backend and the provider a
#: SCRAM login, and a database's create alone makes
#: two calls; a deployment's calls run on up to the provider's worker count of threads, so a few
#: sessions serve them all.
SessionKey = tuple[str, int, str, str, str, str, Any]  # host, port, user, password, database, options, TLS
_kept_sessions: dict[SessionKey, list[tuple[float, Any]]] = {}
_kept_lock = threading.Lock()
#: Sessions kept per server and login, and for how long: well inside ADMIN_IDLE_LIMIT, past which the
#: server ends a session.
KEPT_SESSIONS, KEPT_SECONDS = 8, 20.0


def _kept(key: SessionKey, conn: psycopg.Connection) -> bool:
    """Keep `conn` for the next call when it is whole and idle; reset first: no advisory lock (the DDL lock)
    and no setting of this call survives (the pinned ones are the session's own). False when it was not kept."""
    if conn.broken or conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    try:
        # Not DISCARD ALL: it also drops the statements psycopg has prepared on the session, unbeknown to it.
        conn.execute("RESET ALL")
        conn.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        return False
    with _kept_lock:
        kept = _kept_sessions.setdefault(key, [])
        if len(kept) >= KEPT_SESSIONS:
            return False
        kept.append((time.monotonic(), conn))
    return True


def _kept_session(key: SessionKey) -> psycopg.Connection | None:
    """A kept session the server has not ended meanwhile, or None."""
    while True:
        with _kept_lock:
            kept = _kept_sessions.get(key)
            if not kept:
                return None
            since, conn = kept.pop()
        # The server says nothing to an idle session unless it ends it (restarted, terminated, idle too
        # long): then the socket reads, and that session is dropped, not handed out.
        if time.monotonic() - since < KEPT_SECONDS and not select.select([conn.fileno()], [], [], 0)[0]:
            return conn
        conn.close()


def password_works(instance: SharedInstance, user: str, password: str) -> bool:
    """Whether `user` can still log in with `password`: false only when the server says the password is wrong.

    A refresh's check for a password reset outside Pulumi. The server authenticates
    before it looks at the database, so any other refusal (no CONNECT, a connection
    limit) means the password itself was accepted.
    """
    try:
        psycopg.connect(**connect_params(instance), user=user, password=password,
                        dbname="postgres", connect_timeout=5).close()
    except psycopg.OperationalError as err:
        return "password authentication failed" not in str(err)
    return True


@contextmanager
def ddl_lock(conn: psycopg.Connection, shared: bool = False) -> Iterator[None]:
    """Serialize tenant DDL across every process talking to this server.

    DDL takes the lock exclusively. `observe` takes it shared: it then never
    sees another stack's half-made resource (a role created but not yet
    commented reads as "foreign" and would be a false conflict).
    """
    suffix = "_shared" if shared else ""
    take = sql.SQL("SELECT pg_advisory_lock{}(%s)").format(sql.SQL(suffix))
    # Any role that may connect to this database can take an advisory lock, a tenant's too: wait in
    # rounds and, between them, look at who holds it, so such a holder is named instead of waited on.
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(DDL_LOCK_ROUND)))
    try:
        while True:
            try:
                conn.execute(take, (DDL_LOCK_KEY,))
                break
            except psycopg.errors.LockNotAvailable:
                _refuse_foreign_ddl_lock_holders(conn)
    except BaseException:
        if not conn.closed and not conn.broken:
            conn.execute("SET lock_timeout = 0")
        raise
    # Held, every other stack's change waits: what it does waits at most TENANT_LOCK_WAIT for a lock
    # (a tenant's transaction left open on its own database or role, say).
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(TENANT_LOCK_WAIT)))
    try:
        yield
    except psycopg.errors.LockNotAvailable:
        raise Conflict("change", f"postgres at {conn.info.host}:{conn.info.port}",
                       f"a session held a lock this change needs for over {TENANT_LOCK_WAIT} (a transaction left "
                       "open on a project's own database or role, say)",
                       "nothing more was changed; run it again once that session ends (pg_stat_activity shows it)") from None
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("SET lock_timeout = 0")
            conn.execute(sql.SQL("SELECT pg_advisory_unlock{}(%s)").format(sql.SQL(suffix)), (DDL_LOCK_KEY,))


def _refuse_foreign_ddl_lock_holders(conn: psycopg.Connection) -> None:
    """Conflict when a role that can do no devstack DDL (a tenant's, say) holds the DDL lock."""
    holders = conn.execute(
        """
        SELECT DISTINCT r.rolname, l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        JOIN pg_roles r ON r.oid = a.usesysid
        WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = %s AND l.objid = %s AND NOT (r.rolsuper OR (r.rolcreaterole AND r.rolcreatedb))
        ORDER BY 1, 2
        """,
        (DDL_LOCK_KEY >> 32, DDL_LOCK_KEY & 0xFFFFFFFF),
    ).fetchall()
    if holders:
        sessions = ", ".join(f"role {name!r} (pid {pid})" for name, pid in holders)
        raise Conflict("take", f"the DDL lock of postgres at {conn.info.host}:{conn.info.port}",
                       f"held by {sessions}, which no devstack admin is: every devstack change on the server waits for it",
                       "nothing was changed; end that session as an admin (SELECT pg_terminate_backend(pid)) and run "
                       "it again")


def server_major(conn: psycopg.Connection) -> int:
    """The server's major version, the key of FEATURES."""
    return conn.info.server_version // 10000


@contextmanager
def tenant_database(instance: SharedInstance, database: str) -> Iterator[psycopg.Connection]:
    """An admin session in a project's own database, opened while another holds the DDL lock: the wait
    ddl_lock sets there does not reach this one, so a lock a tenant holds here is waited for at most
    TENANT_LOCK_WAIT too (then LockNotAvailable, which ddl_lock makes a Conflict). Unbounded, it would stall
    every stack's change, and the idle session holding the lock would outlive ADMIN_IDLE_LIMIT."""
    with admin_connection(instance, database) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(TENANT_LOCK_WAIT)))
        yield conn

