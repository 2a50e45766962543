"""PostgreSQL: tenant databases, group roles and login users in a shared server.

Every identifier goes through `psycopg.sql.Identifier` and every value through
`sql.Literal` or a bound parameter. DDL runs in autocommit mode (CREATE
DATABASE cannot run in a transaction) under one server-wide advisory lock, so
two stacks creating tenants at once never race into "already exists" or
"tuple concurrently updated"; every step re-checks existence under that lock.

Ownership markers are COMMENTs (JSON, see `providers.base.ownership_marker`).
Roles of the `role` and `user` kinds also record their kind in the marker, so
a group role can never be adopted as a login user or the other way round.
Passwords reach the server only as SCRAM verifiers computed client-side by
libpq, so no plaintext password can show up in a server log line.
"""

from __future__ import annotations

import json
import re
import select
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Iterable, Iterator, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from providers import naming as naming_rules
from providers.base import KindProvider, Observed, referenced_name
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.clients import LazyModule
from providers.credentials import Rotation, hashed_password, login_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound, Unsupported, first_line
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance

# Imported on the first engine call: the program, check and diff never need them.
psycopg = LazyModule("psycopg")
sql = LazyModule("psycopg.sql")

ENGINE = "postgres"
MAX_IDENTIFIER_BYTES = 63
#: PostgreSQL's `integer`: the largest connection limit it takes.
INT4_MAX = 2**31 - 1
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_EXTENSION = re.compile(r"[a-z0-9_][a-z0-9_-]*")
# Any constant shared by all devstack processes; it only has to be stable.
DDL_LOCK_KEY = 0x6465767374616B  # "devstak"
#: How long one wait for the DDL lock lasts before ddl_lock looks at who holds it.
DDL_LOCK_ROUND = "1s"
#: How long a change holding the DDL lock waits for any other lock. A tenant's sessions can hold one on
#: its own database or role, or on what it granted another project's role, as long as they like, while
#: every other stack's PostgreSQL change waits for the DDL lock.
TENANT_LOCK_WAIT = "5s"
#: The namespace roles, users and databases' login roles share (KindProvider.namespace).
ROLE_NAMESPACE = "role"
#: The marker kind of a project's own login role (written by `database`, no "kind" key).
PROJECT_ROLE = "database"

#: Server features by major version, read in one place.
FEATURES = {
    "drop_database_force": lambda major: major >= 13,
    # Trusted extensions (installable by a database owner) exist since 13; before, treat none as trusted.
    "trusted_extensions": lambda major: major >= 13,
}


def identifier(name: str) -> str:
    """Map a devstack name to a PostgreSQL identifier, or raise InvalidSpec saying which rule it breaks."""
    mapped = name.replace("-", "_")
    if not mapped:
        raise InvalidSpec("map", repr(name), "a PostgreSQL identifier cannot be empty")
    if len(mapped.encode()) > MAX_IDENTIFIER_BYTES:
        raise InvalidSpec("map", repr(name), f"PostgreSQL identifiers are at most {MAX_IDENTIFIER_BYTES} bytes")
    if not _IDENTIFIER.fullmatch(mapped):
        raise InvalidSpec(
            "map", repr(name), "use lowercase letters, digits, '-' and '_', starting with a letter or '_'"
        )
    return mapped


#: The databases initdb makes: no project may have one of these names.
SERVER_DATABASES = frozenset({"postgres", "template0", "template1"})


def role_identifier(name: str) -> str:
    """`identifier`, for a role: PostgreSQL reserves `public`, `none` and every `pg_*` role name."""
    mapped = identifier(name)
    if mapped in ("public", "none") or mapped.startswith("pg_"):
        raise InvalidSpec("map", repr(name), f"PostgreSQL reserves the role name {mapped!r} "
                          "('public', 'none' and every 'pg_*' name)")
    return mapped


def tenant_role(owner: str) -> str:
    """The LOGIN role that owns a project's databases: the project name, mapped (`shop-x` is `shop_x`)."""
    return naming_rules.postgres_role(owner)


def namespaced_role(name: str, owner: str, *, naming: int) -> str:
    """The engine name of a project's group role or login user: `<owner>_<name>` (PREFIXED); SANITIZED:
    the name itself, sanitized, and `<owner>_<owner>` for the one named after the project, as `<owner>`
    is the login role of the project's databases."""
    project = tenant_role(owner)  # a broken owner is reported as such, not as a broken combined name
    if naming == PREFIXED:
        return role_identifier(f"{owner}_{name}")
    return naming_rules.postgres_role(f"{project}_{project}" if name == owner else name)


#: Settings every admin session pins. A tenant owns its database and may `ALTER DATABASE ... SET`
#: anything a user may set, for every session there, the admin's included (a client's own settings
#: win): a search_path putting its functions and operators ahead of PostgreSQL's would run them as
#: superuser; a `role` would run the admin's statements as another project's role; read-only
#: transactions or tiny timeouts would make another project's purge fail in its database, and a library
#: to preload that does not exist would shut every session out of it.
ADMIN_SETTINGS = (
    "search_path=pg_catalog,pg_temp", "role=none", "default_transaction_read_only=off",
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


def admin_options(address: str) -> str:
    major = _majors.get(address, 0)
    # Pinned like the rest (an unknown setting refuses the session, so only where the server has it).
    settings = ADMIN_SETTINGS + ((f"idle_session_timeout={ADMIN_IDLE_LIMIT}",) if major >= 14 else ())
    return " ".join(f"-c {setting}" for setting in settings)


#: Why the admin must be a superuser (CREATEDB and CREATEROLE, managed PostgreSQL's admin, fall short: an
#: up failed part-way with InsufficientPrivilege and left roles that only a superuser could drop).
ADMIN_NEEDS = ("devstack hands each project's databases to the project's role, and revokes, reassigns and drops "
               "them, which PostgreSQL allows only a superuser for roles it is not a member of")


def superuser_fix(instance: SharedInstance) -> str:
    """What an admin that is not a superuser needs (the provider's refusal and the doctor say it alike)."""
    return (f"give {instance.admin_user!r} SUPERUSER, or set shared.{instance.name}.adminUser to a superuser")


@contextmanager
def admin_connection(instance: SharedInstance, dbname: str = "postgres") -> Iterator[psycopg.Connection]:
    """An autocommit admin connection; EngineUnavailable when the server does not answer.

    A session on `postgres` that ends cleanly is kept for the process's next call (see _kept_sessions).
    """
    what, options = f"postgres instance {instance.name!r} at {instance.address}", admin_options(instance.address)
    limit_at_login = "idle_session_timeout" in options
    key = (instance.host, instance.port, instance.admin_user, instance.password(), dbname, options)
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
            host=instance.host,
            port=instance.port,
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
            hint = f"check devstack:{instance.admin_secret} in the stack config" if refused else instance.start_hint()
        raise EngineUnavailable("connect to", what, first, hint) from err
    if conn.info.parameter_status("is_superuser") != "on":  # the server reports it at login: no query
        conn.close()
        raise Unsupported("use", what, f"its admin role {instance.admin_user!r} is not a superuser",
                          f"{ADMIN_NEEDS}: {superuser_fix(instance)}; nothing was changed")
    _majors.setdefault(instance.address, conn.info.server_version // 10000)
    return conn


#: Admin sessions on `postgres` left by calls that ended cleanly, reset, by server, login and startup
#: options, with the time each was left. A new session costs the server a backend (some 18 ms of its
#: CPU on this project's machine) and the provider a SCRAM login, and a database's create alone makes
#: two calls; a deployment's calls run on up to the provider's worker count of threads, so a few
#: sessions serve them all.
SessionKey = tuple[str, int, str, str, str, str]  # host, port, user, password, database, startup options
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
        psycopg.connect(host=instance.host, port=instance.port, user=user, password=password,
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


def _major(conn: psycopg.Connection) -> int:
    return conn.info.server_version // 10000


# --- roles: shared by all three kinds ------------------------------------


def kind_marker(ident: Identity, stack: str) -> str:
    """The ownership marker of a `role` or `user`: the base marker plus the kind."""
    return json.dumps({**json.loads(ownership_marker(ident, stack)), "kind": ident.kind}, sort_keys=True)


@dataclass(frozen=True)
class RoleRow:
    """A role as pg_roles shows it, with its parsed ownership marker."""

    name: str
    login: bool
    inherit: bool
    connection_limit: int
    comment: str | None
    #: (name, marker) of each role it is a member of: what it inherits.
    groups: tuple[tuple[str, str | None], ...] = ()
    #: Server-wide attributes it has (SUPERUSER, CREATEROLE ...): devstack gives a tenant role none.
    powers: tuple[str, ...] = ()
    #: (name, marker) of each role that is a member of it, so inherits what it may do (the admin and
    #: superusers left out).
    members: tuple[tuple[str, str | None], ...] = ()
    #: Its password has expired (VALID UNTIL in the past): it no longer logs in with any.
    expired: bool = False

    @property
    def logs_in(self) -> bool:
        """LOGIN, and a password that has not expired."""
        return self.login and not self.expired

    @property
    def member_of(self) -> tuple[str, ...]:
        """The names of its groups."""
        return tuple(group for group, _ in self.groups)

    def breached(self, owner: str) -> bool:
        """Whether it reaches past project `owner`: a server-wide power, a member from outside the project,
        or membership of a role from outside it (another project's, or a predefined one such as
        pg_read_server_files, which reads any file the server can)."""
        return bool(self.powers) or any(marker_owner(comment) != owner for _, comment in self.members + self.groups)

    @property
    def owner(self) -> str | None:
        return marker_owner(self.comment)

    @property
    def workspace(self) -> str | None:
        return marker_field(self.comment, "stack")

    @property
    def marker_kind(self) -> str:
        return marker_kind(self.comment)


def marker_kind(comment: str | None) -> str:
    """The kind a role's marker records: `role`, `user`, or (none recorded) the project's own role."""
    try:
        return str(json.loads(comment or "").get("kind", PROJECT_ROLE))
    except (ValueError, AttributeError):
        return PROJECT_ROLE


def role_row(conn: psycopg.Connection, name: str) -> RoleRow | None:
    """The role `name`, or None when it does not exist (not found is a value, not an error)."""
    row = conn.execute(
        """
        SELECT r.rolcanlogin, r.rolinherit, r.rolconnlimit, shobj_description(r.oid, 'pg_authid'),
               ARRAY(SELECT json_build_array(g.rolname, shobj_description(g.oid, 'pg_authid'))::text
                     FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                     WHERE m.member = r.oid ORDER BY 1),
               ARRAY_REMOVE(ARRAY[CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
                                  CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
                                  CASE WHEN r.rolreplication THEN 'REPLICATION' END,
                                  CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END], NULL),
               -- Members, but the admin (PostgreSQL 16 makes a non-superuser creator one) and superusers,
               -- who reach everything anyway.
               ARRAY(SELECT json_build_array(u.rolname, shobj_description(u.oid, 'pg_authid'))::text
                     FROM pg_auth_members m JOIN pg_roles u ON u.oid = m.member
                     WHERE m.roleid = r.oid AND u.rolname <> current_user AND NOT u.rolsuper ORDER BY 1),
               coalesce(r.rolvaliduntil < now(), false)
        FROM pg_roles r WHERE r.rolname = %s
        """,
        (name,),
    ).fetchone()
    if row is None:
        return None
    groups = tuple(tuple(json.loads(group)) for group in row[4])
    members = tuple(tuple(json.loads(member)) for member in row[6])
    return RoleRow(name, row[0], row[1], row[2], row[3], groups, tuple(row[5]), members, row[7])


def _contain(conn: psycopg.Connection, row: RoleRow, owner: str) -> None:
    """Take back what was granted outside devstack to reach past the project (see RoleRow.breached)."""
    if row.powers:
        conn.execute(sql.SQL("ALTER ROLE {} WITH NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS")
                     .format(sql.Identifier(row.name)))
    for member, comment in row.members:
        if marker_owner(comment) != owner:
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(row.name), sql.Identifier(member)))
    for group, comment in row.groups:
        if marker_owner(comment) != owner:
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), sql.Identifier(row.name)))


def _password_literal(conn: psycopg.Connection, role: str, password: str) -> sql.Literal:
    """A SCRAM verifier computed by libpq: the server never sees the plaintext."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return sql.Literal(verifier.decode())


def _set_password(conn: psycopg.Connection, role: str, password: str) -> None:
    """The project's role logs in with `password`, whatever was changed out of band (an expiry, a limit)."""
    conn.execute(
        sql.SQL("ALTER ROLE {} WITH LOGIN CONNECTION LIMIT -1 VALID UNTIL 'infinity' PASSWORD {}").format(
            sql.Identifier(role), _password_literal(conn, role, password)
        )
    )


def _comment_role(conn: psycopg.Connection, role: str, marker: str) -> None:
    conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(sql.Identifier(role), sql.Literal(marker)))


def _set_memberships(conn: psycopg.Connection, row: RoleRow, expected: Iterable[str]) -> None:
    """Grant the expected group memberships and revoke every other one."""
    wanted = set(expected)
    member = sql.Identifier(row.name)
    for group in sorted(wanted - set(row.member_of)):
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), member))
    for group in sorted(set(row.member_of) - wanted):
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), member))


def _release_role(instance: SharedInstance, conn: psycopg.Connection, role: str, heir: str | None,
                  spare: str | None = None) -> None:
    """Make `role` droppable: hand what it owns to `heir` and revoke its privileges, in every database
    but `spare` (one about to be dropped whole).

    REASSIGN/DROP OWNED act on one database at a time; pg_shdepend tells which
    databases hold anything of the role. Objects go to the project's role (the
    data stays with the project's database); only grants are dropped. A database
    that refuses sessions or keeps a lock past TENANT_LOCK_WAIT is a Conflict.
    """
    rows = conn.execute(
        """
        SELECT DISTINCT d.datname, d.datallowconn, shobj_description(d.oid, 'pg_database'), r.rolname,
                        shobj_description(r.oid, 'pg_authid')
        FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = d.datdba
        WHERE s.refclassid = 'pg_authid'::regclass
          AND s.refobjid = (SELECT oid FROM pg_roles WHERE rolname = %s) AND d.datname NOT IN ('postgres', %s)
        """,
        (role, spare or ""),
    ).fetchall()
    for database, allows_sessions, *marks in rows:
        holder = database_owner(*marks)
        where = f"database {database!r} " + (f"of project {holder!r}" if holder else "(not devstack's)")
        if not allows_sessions:
            raise Conflict("release", f"role {role!r}", f"{where} holds grants to it and refuses every session "
                           "(ALLOW_CONNECTIONS false)", f"run it again once {where} lets sessions in (the next "
                           "up of its workspace does)")
        with _tenant_database(instance, database) as other, _bounded(role, where):
            _reassign_and_drop_owned(other, role, heir)
    with _bounded(role, "another project"):
        _reassign_and_drop_owned(conn, role, heir)  # also revokes grants on shared objects (databases)


def _drop_role(instance: SharedInstance, conn: psycopg.Connection, role: str, heir: str | None) -> None:
    """Release `role` (see _release_role), then drop it. A grant another project made meanwhile (one not
    yet committed is invisible to the release, and holds the role) is released once more."""
    for attempt in (1, 2):
        _release_role(instance, conn, role, heir)
        with _bounded(role, "another project"):
            try:
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                return
            except psycopg.errors.DependentObjectsStillExist:
                if attempt == 2:
                    raise Conflict("release", f"role {role!r}", "another project granted it something again meanwhile",
                                   "run it again") from None


@contextmanager
def _tenant_database(instance: SharedInstance, database: str) -> Iterator[psycopg.Connection]:
    """An admin session in a project's own database, opened while another holds the DDL lock: the wait
    ddl_lock sets there does not reach this one, so a lock a tenant holds here is waited for at most
    TENANT_LOCK_WAIT too (then LockNotAvailable, which ddl_lock makes a Conflict). Unbounded, it stalled
    every stack's change, and the idle session holding the lock outlived ADMIN_IDLE_LIMIT."""
    with admin_connection(instance, database) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(TENANT_LOCK_WAIT)))
        yield conn


@contextmanager
def _bounded(role: str, where: str) -> Iterator[None]:
    """Releasing `role`, under a wait of at most TENANT_LOCK_WAIT for a lock (ddl_lock's, or set on a
    connection of its own): another project holding one on `role`, or on what it owns or was granted in
    `where` (a transaction left open), and its catalog change racing ours, are a Conflict naming it."""
    hint = f"run it again once {where} lets it"
    try:
        yield
    except psycopg.errors.LockNotAvailable:
        raise Conflict("release", f"role {role!r}", f"a session of {where} held a lock on it, or on what it owns or "
                       f"was granted there, for over {TENANT_LOCK_WAIT}", hint) from None
    except psycopg.errors.InternalError_ as err:
        if "concurrently updated" not in str(err):
            raise
        raise Conflict("release", f"role {role!r}", f"{where} changed the role's grants meanwhile", hint) from None


def _reassign_and_drop_owned(conn: psycopg.Connection, role: str, heir: str | None) -> None:
    if heir is not None:
        conn.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(sql.Identifier(role), sql.Identifier(heir)))
    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))


# --- database -------------------------------------------------------------


#: The encodings a PostgreSQL database can have (the server-side ones), as the server names them.
SERVER_ENCODINGS = (
    "SQL_ASCII EUC_JP EUC_CN EUC_KR EUC_TW EUC_JIS_2004 UTF8 MULE_INTERNAL LATIN1 LATIN2 LATIN3 LATIN4 LATIN5 "
    "LATIN6 LATIN7 LATIN8 LATIN9 LATIN10 WIN1256 WIN1258 WIN866 WIN874 KOI8R WIN1251 WIN1252 ISO_8859_5 "
    "ISO_8859_6 ISO_8859_7 ISO_8859_8 WIN1250 WIN1253 WIN1254 WIN1255 WIN1257 KOI8U"
).split()


def _spelling(name: str) -> str:
    # How the server compares encoding names: case and punctuation do not count ("utf-8" is UTF8).
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ENCODINGS = {_spelling(name): name for name in SERVER_ENCODINGS} | {"unicode": "UTF8"}


class DatabaseSpec(BaseModel):
    """Params of a `database`. Encoding and locale are fixed at creation; the rest updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    encoding: str = "UTF8"
    locale: str = "C.UTF-8"
    connection_limit: int = Field(default=-1, ge=-1, le=INT4_MAX, alias="connectionLimit")
    #: Extensions devstack installs (as admin) inside the database; sorted and unique.
    extensions: list[str] = Field(default_factory=list)
    #: Change it to change the project role's password in place (a new random one, or a new derivation).
    rotation: Rotation = None

    @field_validator("encoding")
    @classmethod
    def _server_encoding(cls, value: str) -> str:
        # Stored as the server reports it, so a refresh of `encoding: utf-8` reads no change
        # (which, encoding being fixed at creation, would mean a replace).
        try:
            return _ENCODINGS[_spelling(value)]
        except KeyError:
            raise ValueError(f"{value!r} is not a PostgreSQL server encoding (e.g. UTF8, LATIN1, SQL_ASCII)") from None

    @model_validator(mode="after")
    def _encoding_fits_locale(self) -> "DatabaseSpec":
        # The server refuses CREATE DATABASE when the locale's codeset is another encoding (C and
        # POSIX fit any; SQL_ASCII, for a superuser, any locale): said here, before a replacement
        # has dropped the old database.
        codeset = self.locale.partition(".")[2].partition("@")[0]
        wanted = _ENCODINGS.get(_spelling(codeset))
        if wanted and wanted != self.encoding and self.encoding != "SQL_ASCII":
            raise ValueError(f"encoding {self.encoding!r} does not fit locale {self.locale!r}, whose codeset is "
                             f"{wanted}: set locale: C (it fits any encoding), or encoding: {wanted}")
        return self

    @field_validator("extensions")
    @classmethod
    def _extension_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _EXTENSION.fullmatch(name):
                raise ValueError(f"{name!r} is not an extension name (lowercase letters, digits, '_' and '-')")
        return sorted(set(value))


class Database(KindProvider):
    """The project's LOGIN role plus a database owned by it, CONNECT revoked from PUBLIC.

    `read` reports in `isolated` whether PUBLIC and every other role are still kept out; a grant made
    outside Pulumi shows as drift, and the next update revokes it again.
    """

    engine = ENGINE
    kind = "database"
    Spec = DatabaseSpec
    login_per_owner = True  # every database of a project owns (and logs in as) the project's role
    create_only = frozenset({"encoding", "locale"})
    refusable_in_place = frozenset({"extensions"})  # one the server lacks, or not trusted
    attributes = ("host", "port", "user", "database", "password")
    secret_outputs = ("password",)

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        tenant_role(owner)  # the owner must map too: it names the role
        mapped = identifier(name) if naming == PREFIXED else naming_rules.postgres_identifier(name)
        if mapped in SERVER_DATABASES:
            raise InvalidSpec("map", repr(name), f"every PostgreSQL server has a database {mapped!r} of its own; "
                              "choose another name")
        return mapped

    @classmethod
    def owner_objects(cls, host: str, port: int, owner: str) -> tuple[tuple[str, str, int, str, str], ...]:
        return (Role.object_named(host, port, tenant_role(owner)),)

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        assert isinstance(spec, DatabaseSpec)
        with admin_connection(instance) as conn:
            try:
                # The server resolves a collation's locale as CREATE DATABASE does; pg_temp and the
                # rollback leave nothing behind.
                with conn.transaction(force_rollback=True):
                    conn.execute(sql.SQL("CREATE COLLATION pg_temp.devstack_locale_probe (LOCALE = {})")
                                 .format(sql.Literal(spec.locale)))
            except psycopg.errors.InvalidParameterValue as err:
                return [("locale", f"the server has no locale {spec.locale!r} ({first_line(err)})",
                         "set params.locale to one the server has: `locale -a` on its machine; C.UTF-8 always works")]
            problems = _extension_problems(conn, spec.extensions)
        return [("extensions", "; ".join(problems), EXTENSIONS_FIX)] if problems else []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        database = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_connection(instance) as conn, ddl_lock(conn, shared=True):
            row = conn.execute(
                """
                SELECT r.rolname, shobj_description(d.oid, 'pg_database'), shobj_description(r.oid, 'pg_authid'),
                       pg_encoding_to_char(d.encoding), d.datcollate, d.datconnlimit,
                       -- No ACL at all means the defaults, which let PUBLIC connect. Anyone but the
                       -- owner (PUBLIC, another project's role) let in is a breach. So is a template,
                       -- which any role that may create databases can copy, data and all.
                       NOT d.datistemplate AND
                       NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                                   WHERE a.grantee <> d.datdba AND a.privilege_type IN ('CONNECT', 'TEMPORARY')),
                       d.datallowconn, {recorded}
                FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba
                WHERE d.datname = %s
                """.format(recorded=RECORDED_WORKSPACES),
                (database,),
            ).fetchone()
            if row is None:
                return None
            owner_role, marker, role_marker, encoding, collate, connection_limit, isolated, allows_sessions, recorded = row
            owner = database_owner(marker, owner_role, role_marker)
            params = {"encoding": encoding, "locale": collate, "connection_limit": connection_limit}
            logs_in = True
            if owner is not None:  # never open sessions in a database we do not manage
                if allows_sessions:  # its owner may turn ALLOW_CONNECTIONS off: then nobody gets in, admin too
                    params["extensions"] = _managed_extensions(instance, database)
                row = role_row(conn, owner_role)
                isolated = isolated and not row.breached(owner)
                # The login of the database's DSN: NOLOGIN, an expired password or a limit of the role's
                # own (0 refuses every session) break it while the password still matches.
                logs_in = allows_sessions and row.logs_in and row.connection_limit == -1
        # Its owner may remove or rewrite the comment: still the project's by its role, but a scan reads it.
        # Made before its workspace was recorded apart (or the record removed): the next up writes both.
        workspace = database_workspace(recorded)
        attributes = {"user": owner_role, "isolated": isolated, "login": logs_in,
                      "marked": owner is not None and marker_owner(marker) == owner and workspace is not None}
        return Observed(owner=owner, params=params, attributes=attributes, workspace=workspace)

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, DatabaseSpec)
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        marker = ownership_marker(ident, props.get("stack", ""))
        with admin_connection(instance) as conn, ddl_lock(conn):
            # Re-checked under the lock: another stack may have taken the name since observe.
            self._check_database_owner(conn, ident, database)
            _check_extensions(conn, ident, spec.extensions)
            password = self._joining_password(instance, conn, ident, role, props)
            made_role = self._ensure_role(conn, ident, role, password, marker)
            adopted = _database_exists(conn, database)
            if not adopted:
                try:
                    conn.execute(
                        sql.SQL(
                            "CREATE DATABASE {} OWNER {} ENCODING {} LOCALE {} TEMPLATE template0"
                        ).format(
                            sql.Identifier(database),
                            sql.Identifier(role),
                            sql.Literal(spec.encoding),
                            sql.Literal(spec.locale),
                        )
                    )
                except (psycopg.errors.WrongObjectType, psycopg.errors.InvalidParameterValue) as err:
                    if made_role:  # a role without its database would be left to nobody
                        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                    raise InvalidSpec(
                        "create", f"database {ident}",
                        f"the server refused params.locale {spec.locale!r} with params.encoding {spec.encoding!r}: "
                        f"{first_line(err)}",
                        "set params.locale to a locale the server has (`locale -a` on its machine; C.UTF-8 always "
                        "works) whose codeset is the encoding; nothing was created",
                    ) from err
            self._converge(conn, database, role, spec, marker, ident.owner)
            if adopted:  # what an earlier declaration had installed and this one no longer lists goes, as on update
                unlisted = set(_managed_extensions(instance, database)) - set(spec.extensions)
                _drop_extensions(instance, ident, database, sorted(unlisted), "create")
            _create_extensions(instance, database, spec.extensions)
        return self._attributes(instance, database, role, password)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        password = login_password(ident, role, new, old)
        marker = ownership_marker(ident, new.get("stack", ""))
        spec = DatabaseSpec.model_validate(new.get("params") or {})
        removed = set((old.get("params") or {}).get("extensions") or []) - set(spec.extensions)
        with admin_connection(instance) as conn, ddl_lock(conn):
            # Re-checked under the lock: dropped (and maybe made anew by another project) since the observe.
            if not _database_exists(conn, database):
                raise NotFound("update", f"database {ident}", "it no longer exists",
                               "run `pulumi refresh`, then `pulumi up` to create it again")
            self._check_database_owner(conn, ident, database, "update")
            _check_extensions(conn, ident, spec.extensions, "update")
            if password != old.get("password") or False in (old.get("passwordInSync"), old.get("login")):
                _set_password(conn, role, password)
            self._converge(conn, database, role, spec, marker, ident.owner)
            _drop_extensions(instance, ident, database, sorted(removed))
            _create_extensions(instance, database, spec.extensions)
        return self._attributes(instance, database, role, password)

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        with admin_connection(instance) as conn, ddl_lock(conn):
            if not _database_exists(conn, database):
                # A drop cut short after DROP DATABASE: its LOGIN role (with a password) must go too,
                # and then the drop is done (gc lists such a role as the database).
                if _project_role_is_ours(conn, ident) and not _owns_a_database(conn, role):
                    _drop_role(instance, conn, role, None)
                    return
                raise NotFound("drop", f"database {ident}", "it does not exist")
            # Re-created by someone else since the last refresh: never drop theirs.
            self._check_database_owner(conn, ident, database, "drop")
            # The role goes with the last database it owns. Another project may have granted it something
            # in its own database: that goes first, so when that project keeps it from going (a lock held,
            # sessions refused) the database and its role are left whole for the next try.
            last = not _owns_a_database(conn, role, besides=database)
            if last:
                try:
                    _release_role(instance, conn, role, None, spare=database)
                except Conflict as err:
                    raise Conflict(err.verb, err.what, err.cause, err.hint + "; nothing was dropped") from None
            # Block new sessions, end only this database's sessions, then drop (a template cannot be dropped).
            conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false CONNECTION LIMIT 0").format(sql.Identifier(database)))
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )
            force = sql.SQL(" WITH (FORCE)") if FEATURES["drop_database_force"](_major(conn)) else sql.SQL("")
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)) + force)
            if last and role_row(conn, role) is not None:
                try:
                    _drop_role(instance, conn, role, None)
                except Conflict as err:
                    raise Conflict(err.verb, err.what, err.cause,
                                   f"{err.hint}; the database was dropped and its login role is left until then: "
                                   "`pulumi up` again (without --refresh, which would forget the database) drops it") from None

    def drift(self, olds: dict[str, Any]) -> list[str]:
        expected_user = tenant_role(olds["owner"]) if olds.get("owner") else None
        drifted = ["user"] if olds.get("user") not in (None, expected_user) else []
        # CONNECT or TEMPORARY granted to PUBLIC again: other projects' logins could get in.
        return drifted + [attribute for attribute in ("isolated", "login", "marked") if olds.get(attribute) is False]

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool:
        return password_works(instance, user, password)

    # --- steps -----------------------------------------------------------

    def _check_database_owner(self, conn: psycopg.Connection, ident: Identity, database: str, verb: str = "create") -> None:
        """Conflict when `database` exists with another project's marker (or none); under the DDL lock."""
        row = conn.execute(
            "SELECT shobj_description(d.oid, 'pg_database'), r.rolname, shobj_description(r.oid, 'pg_authid') "
            "FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = %s", (database,)
        ).fetchone()
        if row is not None and database_owner(*row) != ident.owner:
            raise self._conflict(verb, ident, Observed(owner=database_owner(*row)))

    @staticmethod
    def _joining_password(instance: SharedInstance, conn: psycopg.Connection, ident: Identity, role: str,
                          props: dict[str, Any]) -> str:
        """The password of the project's role as a database joins it: every database of the project logs
        in as that role, so one that has a legacy hashed password keeps it (the services of
        the other databases hold it) until a `rotation` or `credentials` says otherwise."""
        password = login_password(ident, role, props)
        unrotated = (props.get("params") or {}).get("rotation") is None  # a role with a legacy hash has none
        if props.get("credentials", "predictable") != "predictable" or not unrotated or role_row(conn, role) is None:
            return password
        hashed = hashed_password(ident, role)
        return hashed if password_works(instance, role, hashed) else password

    def _ensure_role(self, conn: psycopg.Connection, ident: Identity, role: str, password: str, marker: str) -> bool:
        """Create the project's LOGIN role, or take over its existing one; True when it was created."""
        row = role_row(conn, role)
        if row is not None and (row.owner != ident.owner or row.marker_kind != PROJECT_ROLE):
            holder = (f"project {row.owner!r}" if row.owner and row.owner != ident.owner
                      else f"project {row.owner!r} as a {row.marker_kind}" if row.owner
                      else "something devstack does not manage")
            raise Conflict("create", f"database {ident}",
                           f"its project's login role {role!r} already exists in postgres instance "
                           f"{ident.instance!r} and belongs to {holder}",
                           "every database of a project logs in as a role named after the project, so the project "
                           "needs another name on this server; nothing was changed")
        if row is not None:  # its password is the login of the databases it owns, whichever workspace's
            # Their own markers say whose they are (each update re-marks a database, never the role).
            for sibling, recorded in conn.execute(
                    "SELECT d.datname, {recorded} FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
                    "WHERE r.rolname = %s ORDER BY 1".format(recorded=RECORDED_WORKSPACES), (role,)).fetchall():
                self._refuse_elsewhere("create", ident, Observed(owner=ident.owner, workspace=database_workspace(recorded)),
                                       marker_field(marker, "stack"),
                                       held=f"its project's login role {role!r}, the login of database {sibling!r},")
        with conn.transaction():  # never a role without its marker, whatever cuts the call short
            if row is None:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), _password_literal(conn, role, password)
                    )
                )
            else:
                _set_password(conn, role, password)  # also turns a placeholder made by `user` into a LOGIN role
            _comment_role(conn, role, marker)
        return row is None

    def _converge(self, conn: psycopg.Connection, database: str, role: str, spec: DatabaseSpec, marker: str,
                  owner: str) -> None:
        """Bring owner, connection limit, grants, the owner role's reach and marker in line; each step is idempotent."""
        db = sql.Identifier(database)
        with conn.transaction():
            _contain(conn, role_row(conn, role), owner)
            conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, sql.Identifier(role)))
            # Its owner may set both (a tenant can): a template others can copy, a database nobody can open.
            conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false ALLOW_CONNECTIONS true").format(db))
            conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(db, sql.Literal(spec.connection_limit)))
            conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
            for (grantee,) in conn.execute(_LET_IN, (database,)).fetchall():  # granted outside devstack
                conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM {}").format(db, sql.Identifier(grantee)))
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(db, sql.Literal(marker)))
            # Its workspace where only an admin writes: a setting of the admin's own role in the database.
            conn.execute(sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET devstack.workspace = {}")
                         .format(db, sql.Literal(marker_field(marker, "stack") or "")))

    @staticmethod
    def _attributes(instance: SharedInstance, database: str, role: str, password: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "user": role, "database": database, "password": password,
                "isolated": True, "login": True, "marked": True, "passwordInSync": True}


#: Roles other than the owner granted CONNECT or TEMPORARY on a database: devstack grants none.
_LET_IN = """
    SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_database d, aclexplode(d.datacl) a
    WHERE d.datname = %s AND a.grantee NOT IN (0, d.datdba) AND a.privilege_type IN ('CONNECT', 'TEMPORARY')
"""


def database_owner(marker: str | None, owner_role: str, role_marker: str | None) -> str | None:
    """The project a database belongs to: its owning role's when that is a project's own role, else the
    one its COMMENT names. Only the admin may comment on a role, while the database's owner (the tenant)
    may rewrite the database's comment to anything, another project included; and a create cut between
    CREATE DATABASE and its COMMENT leaves none (a project role is only ever made with its marker)."""
    owner = marker_owner(role_marker)
    if owner and marker_kind(role_marker) == PROJECT_ROLE and owner_role == tenant_role(owner):
        return owner
    return marker_owner(marker)


#: The workspaces recorded for a database in a setting of an admin's own role there (`devstack.workspace`),
#: which only an admin can write: its owner, the tenant, may rewrite the database's COMMENT at will.
RECORDED_WORKSPACES = """
    (SELECT array_agg(DISTINCT substr(c, length('devstack.workspace=') + 1))
     FROM pg_db_role_setting s JOIN pg_roles a ON a.oid = s.setrole, unnest(s.setconfig) c
     WHERE s.setdatabase = d.oid AND (a.rolsuper OR (a.rolcreaterole AND a.rolcreatedb))
       AND c LIKE 'devstack.workspace=%%')
"""


def database_workspace(recorded: list[str] | None) -> str | None:
    """The workspace recorded for a database (RECORDED_WORKSPACES); None when none or two admins' differ
    ("" when the declaration had none: recorded, and proving nothing)."""
    return recorded[0] if recorded and len(recorded) == 1 else None


def _owns_a_database(conn: psycopg.Connection, role: str, besides: str = "") -> bool:
    return conn.execute(
        "SELECT 1 FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = %s AND d.datname <> %s",
        (role, besides),
    ).fetchone() is not None


def _database_exists(conn: psycopg.Connection, database: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is not None


def _managed_extensions(instance: SharedInstance, database: str) -> list[str]:
    """Extensions devstack installed: those owned by the admin role (a tenant's own are owned by the tenant).
    A catalog read, which no tenant's lock holds up: a plain session (every database observe reads it)."""
    with admin_connection(instance, database) as conn:
        rows = conn.execute(
            "SELECT e.extname FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner "
            "WHERE r.rolname = current_user AND e.extname <> 'plpgsql' ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


EXTENSIONS_FIX = "list only trusted extensions from pg_available_extensions, with the ones they require"


def _check_extensions(conn: psycopg.Connection, ident: Identity, wanted: list[str], verb: str = "create") -> None:
    """InvalidSpec, before anything changes, for an unknown, untrusted or incomplete extension list."""
    problems = _extension_problems(conn, wanted)
    if problems:
        raise InvalidSpec(verb, f"database {ident}", "params.extensions: " + "; ".join(problems), EXTENSIONS_FIX)


def _extension_problems(conn: psycopg.Connection, wanted: list[str]) -> list[str]:
    """What is wrong with an extension list: unknown, untrusted, or without one a listed one requires.

    Only trusted extensions (those a database owner may install itself) are
    allowed: devstack installs them as admin, and an untrusted one (file_fdw,
    adminpack, dblink ...) could hand a tenant superuser-only powers.
    """
    if not wanted:
        return []
    trusted_column = sql.SQL("v.trusted" if FEATURES["trusted_extensions"](_major(conn)) else "false")
    rows = conn.execute(
        sql.SQL(
            """
            SELECT e.name, {}, coalesce(v.requires, '{{}}')
            FROM pg_available_extensions e
            JOIN pg_available_extension_versions v ON v.name = e.name AND v.version = e.default_version
            WHERE e.name = ANY(%s)
            """
        ).format(trusted_column),
        (wanted,),
    ).fetchall()
    found = {name: (trusted, requires) for name, trusted, requires in rows}
    problems = [f"{name!r} is not available on this server" for name in wanted if name not in found]
    problems += [f"{name!r} is not a trusted extension" for name, (trusted, _) in found.items() if not trusted]
    problems += [
        f"{name!r} requires {missing!r}, which is not listed"
        for name, (_, requires) in found.items()
        for missing in requires
        if missing not in wanted
    ]
    return problems


def _create_extensions(instance: SharedInstance, database: str, wanted: list[str]) -> None:
    if not wanted:
        return
    with _tenant_database(instance, database) as conn:
        # Into the database's public schema, as its owner's own CREATE EXTENSION would put it (not into
        # pg_catalog, first on the admin's path); the scripts run under a search_path PostgreSQL sets.
        conn.execute("SET search_path = public")
        for name in wanted:
            # CASCADE only ever adds extensions that are listed too (checked before).
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {} CASCADE").format(sql.Identifier(name)))


def _drop_extensions(instance: SharedInstance, ident: Identity, database: str, names: list[str],
                     verb: str = "update") -> None:
    """Drop in one statement (so dependencies among them are fine), never CASCADE into tenant objects."""
    if not names:
        return
    with _tenant_database(instance, database) as conn:
        try:
            conn.execute(sql.SQL("DROP EXTENSION IF EXISTS {}").format(sql.SQL(", ").join(map(sql.Identifier, names))))
        except psycopg.errors.DependentObjectsStillExist as err:
            raise Unsupported(
                verb, f"database {ident}",
                f"extension(s) {', '.join(names)} still in use: {err.diag.message_detail or err}",
                "drop the objects that use them first, or keep the extensions listed",
            ) from err


# --- role and user --------------------------------------------------------


class _ProjectRoleKind(KindProvider):
    """What `role` and `user` share: the `<owner>_<name>` namespace, the kind marker, the release on drop."""

    engine = ENGINE
    # Roles and users are one PostgreSQL namespace: a role and a user of one name are one object.
    namespace = ROLE_NAMESPACE
    logins = True

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return namespaced_role(name, owner, naming=naming)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        with admin_connection(instance) as conn, ddl_lock(conn, shared=True):
            row = role_row(conn, self.engine_name(ident.name, ident.owner, naming=ident.naming))
        return None if row is None else self._observed(row)

    def _observed(self, row: RoleRow) -> Observed:
        raise NotImplementedError

    def _claim(self, conn: psycopg.Connection, ident: Identity, name: str, verb: str = "create") -> RoleRow | None:
        """The existing role `name` when it is ours and of this kind; None when free; Conflict otherwise."""
        row, kind = role_row(conn, name), self.kind
        if row is None:
            return None
        if row.owner != ident.owner:
            raise self._conflict(verb, ident, Observed(owner=row.owner))
        if row.marker_kind != kind:
            raise Conflict(
                verb, f"{self.kind} {ident}",
                f"{name!r} already exists as project {ident.owner!r}'s {row.marker_kind}, not as a {kind}",
                f"give one of the two declarations another `name`, or, if this declaration was that {row.marker_kind} "
                f"before its kind changed, drop the {row.marker_kind} first: declare it again with `purge: true` and "
                f"run `pulumi up`, remove it and run `pulumi up`, then add the {kind}; nothing was changed",
            )
        return row

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        name, project = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        with admin_connection(instance) as conn, ddl_lock(conn):
            if self._claim(conn, ident, name, "drop") is None:
                raise NotFound("drop", f"{self.kind} {ident}", "it does not exist")
            heir = project if _project_role_is_ours(conn, ident) else None
            _drop_role(instance, conn, name, heir)
            _drop_unused_placeholder(conn, ident)


def _project_role_is_ours(conn: psycopg.Connection, ident: Identity) -> bool:
    row = role_row(conn, tenant_role(ident.owner))
    return row is not None and row.owner == ident.owner and row.marker_kind == PROJECT_ROLE


def _drop_unused_placeholder(conn: psycopg.Connection, ident: Identity) -> None:
    """Drop the project role a `user` created ahead of its `database` once nothing uses it.

    A placeholder is NOLOGIN (a `database` makes it LOGIN when it adopts it),
    owns no database and has no members left.
    """
    project = tenant_role(ident.owner)
    row = role_row(conn, project)
    if row is None or row.login or row.owner != ident.owner or row.marker_kind != PROJECT_ROLE:
        return
    in_use = conn.execute(
        """
        SELECT 1 FROM pg_roles r WHERE r.rolname = %s AND (
            EXISTS (SELECT 1 FROM pg_database d WHERE d.datdba = r.oid)
            OR EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.roleid = r.oid)
            OR EXISTS (SELECT 1 FROM pg_shdepend s WHERE s.refobjid = r.oid AND s.refclassid = 'pg_authid'::regclass))
        """,
        (project,),
    ).fetchone()
    if not in_use:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(project)))


class RoleSpec(BaseModel):
    """Params of a `role` (a NOLOGIN group role). Everything updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Whether the group itself inherits privileges of roles it is granted.
    inherit: bool = True


class Role(_ProjectRoleKind):
    """A NOLOGIN group role `<owner>_<name>` that a project's users can be members of."""

    kind = "role"
    Spec = RoleSpec
    attributes = ("host", "port", "role")
    name_attribute = "role"

    def _observed(self, row: RoleRow) -> Observed:
        return Observed(owner=row.owner, params={"inherit": row.inherit}, workspace=row.workspace,
                        attributes={"role": row.name, "login": row.login, "isolated": not row.breached(row.owner or "")})

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, RoleSpec)
        return self._apply(instance, ident, spec, props.get("stack", ""))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        return self._apply(instance, ident, RoleSpec.model_validate(new.get("params") or {}), new.get("stack", ""))

    def drift(self, olds: dict[str, Any]) -> list[str]:
        # A group role that can log in, or reaches past the project, was changed out of band.
        return (["login"] if olds.get("login") else []) + (["isolated"] if olds.get("isolated") is False else [])

    def _apply(self, instance: SharedInstance, ident: Identity, spec: RoleSpec, stack: str) -> dict[str, Any]:
        """Create the group role when missing, then converge its settings and marker (idempotent)."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_connection(instance) as conn, ddl_lock(conn):
            claimed = self._claim(conn, ident, name)
            with conn.transaction():  # never a role without its marker
                if claimed is None:
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
                inherit = sql.SQL("INHERIT" if spec.inherit else "NOINHERIT")
                conn.execute(sql.SQL("ALTER ROLE {} WITH NOLOGIN {}").format(sql.Identifier(name), inherit))
                _comment_role(conn, name, kind_marker(ident, stack))
                _contain(conn, role_row(conn, name), ident.owner)
        return {"host": instance.host, "port": instance.port, "role": name, "login": False, "isolated": True}


class UserSpec(BaseModel):
    """Params of a `user` (a LOGIN role). Everything updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The `name` of a `role` declaration of the same project this user joins.
    role: str | None = None
    #: The `name` of the project's database declaration the DSN points at (default: the project's name).
    database: str | None = None
    connection_limit: int = Field(default=-1, ge=-1, le=INT4_MAX, alias="connectionLimit")
    #: Change it to change the password in place (a new random one, or a new derivation).
    rotation: Rotation = None


class User(_ProjectRoleKind):
    """A LOGIN role `<owner>_<name>`, member of the project's role and optionally of a group `role`."""

    kind = "user"
    Spec = UserSpec
    attributes = ("host", "port", "user", "password", "database")
    secret_outputs = ("password",)
    references: ClassVar[dict[str, str]] = {"role": "role", "database": "database"}
    default_references = frozenset({"database"})  # the DSN points at the project's database

    def _observed(self, row: RoleRow) -> Observed:
        return Observed(
            owner=row.owner,
            params={"connection_limit": row.connection_limit},
            attributes={"user": row.name, "login": row.logs_in, "member_of": list(row.member_of),
                        "isolated": not row.breached(row.owner or "")},
            workspace=row.workspace,
        )

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, UserSpec)
        return self._apply(instance, ident, spec, self._password(ident, props), props.get("stack", ""),
                           self._role(ident, props))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = UserSpec.model_validate(new.get("params") or {})
        return self._apply(instance, ident, spec, self._password(ident, new, old), new.get("stack", ""),
                           self._role(ident, new))

    def drift(self, olds: dict[str, Any]) -> list[str]:
        changed = ([] if olds.get("login", True) else ["login"]) + (["isolated"] if olds.get("isolated") is False else [])
        if "member_of" in olds and olds.get("owner"):
            try:
                expected = self._groups(olds["owner"], UserSpec.model_validate(olds.get("params") or {}),
                                        self._role(Identity.from_props(olds), olds))
            except (InvalidSpec, ValueError):
                return changed  # a broken spec is reported by create/update, not by a pure diff
            changed += [] if sorted(olds["member_of"]) == expected else ["member_of"]
        return changed

    def _password(self, ident: Identity, new: dict[str, Any], old: dict[str, Any] | None = None) -> str:
        return login_password(ident, self.engine_name(ident.name, ident.owner, naming=ident.naming), new, old)

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool:
        return password_works(instance, user, password)

    @staticmethod
    def _groups(owner: str, spec: UserSpec, role: str | None) -> list[str]:
        return sorted([tenant_role(owner), *([role] if role else [])])

    @staticmethod
    def _database(ident: Identity, spec: UserSpec) -> str:
        """The database the user's DSN names, as this user's naming maps its declaration."""
        return Database.engine_name(spec.database or ident.owner, ident.owner, naming=ident.naming)

    @staticmethod
    def _role(ident: Identity, props: Mapping[str, Any]) -> str | None:
        """The group role the user is a member of: as its resource records it, else as this user's naming maps it."""
        role = (props.get("params") or {}).get("role")
        if not role:
            return None
        return referenced_name(props, "role") or namespaced_role(role, ident.owner, naming=ident.naming)

    def _apply(
        self, instance: SharedInstance, ident: Identity, spec: UserSpec, password: str, stack: str, role: str | None
    ) -> dict[str, Any]:
        """Check everything first (nothing changes on a conflict), then create or converge."""
        name, project = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        database = self._database(ident, spec)
        groups = self._groups(ident.owner, spec, role)
        with admin_connection(instance) as conn, ddl_lock(conn):
            row = self._claim(conn, ident, name)
            project_row = self._check_project_role(conn, ident, project)
            if spec.role:
                self._check_group(conn, ident, spec.role, role)
            # One transaction: a role never exists without its marker, nor a login with the project's grants
            # but none of devstack's (a call cut short used to leave one that every later up refused).
            with conn.transaction():
                if project_row is None:
                    # The `database` that owns this role may not exist yet (Pulumi creates in parallel):
                    # a NOLOGIN placeholder it adopts later, under the same marker.
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(project)))
                    _comment_role(conn, project, ownership_marker(ident, stack))
                if row is None:
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
                conn.execute(
                    sql.SQL("ALTER ROLE {} WITH LOGIN INHERIT CONNECTION LIMIT {} VALID UNTIL 'infinity' PASSWORD {}").format(
                        sql.Identifier(name), sql.Literal(spec.connection_limit), _password_literal(conn, name, password)
                    )
                )
                _set_memberships(conn, role_row(conn, name), groups)
                _comment_role(conn, name, kind_marker(ident, stack))
                _contain(conn, role_row(conn, name), ident.owner)
        return {
            "host": instance.host, "port": instance.port, "user": name, "password": password,
            "database": database, "login": True, "member_of": groups, "passwordInSync": True, "isolated": True,
        }

    def _check_project_role(self, conn: psycopg.Connection, ident: Identity, project: str) -> RoleRow | None:
        row = role_row(conn, project)
        if row is not None and (row.owner != ident.owner or row.marker_kind != PROJECT_ROLE):
            raise Conflict(
                "create", f"{self.kind} {ident}",
                f"the project's role {project!r} exists but belongs to "
                + (f"project {row.owner!r}" if row.owner else "something devstack does not manage"),
                "rename the project or that role; nothing was changed",
            )
        return row

    def _check_group(self, conn: psycopg.Connection, ident: Identity, declared: str, group: str) -> None:
        row = role_row(conn, group)
        if row is None or row.owner != ident.owner or row.marker_kind != "role":
            cause = "it does not exist" if row is None else "it is not a `role` of this project"
            raise InvalidSpec(
                "create", f"{self.kind} {ident}", f"params.role names {declared!r} (postgres role {group!r}) but {cause}",
                f"declare `kind: role, name: {declared}` on this instance in project {ident.owner!r}",
            )


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"database": Database, "role": Role, "user": User}
