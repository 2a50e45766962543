"""PostgreSQL: tenant databases (and, later, roles and users) in a shared server.

Every identifier goes through `psycopg.sql.Identifier` and every value through
`sql.Literal` or a bound parameter. DDL runs in autocommit mode (CREATE
DATABASE cannot run in a transaction) under one server-wide advisory lock, so
two stacks creating tenants at once never race into "already exists".
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

import psycopg
from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field

from providers.base import KindProvider, Observed, marker_owner, ownership_marker
from providers.credentials import password_for
from providers.errors import EngineUnavailable, InvalidSpec, NotFound
from providers.identity import Identity
from providers.instances import SharedInstance

ENGINE = "postgres"
MAX_IDENTIFIER_BYTES = 63
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
# Any constant shared by all devstack processes; it only has to be stable.
DDL_LOCK_KEY = 0x6465767374616B  # "devstak"

#: Server features by major version, read in one place.
FEATURES = {
    "drop_database_force": lambda major: major >= 13,
}


def identifier(name: str) -> str:
    """Map a devstack name to a PostgreSQL identifier, or raise InvalidSpec saying which rule it breaks."""
    mapped = name.replace("-", "_")
    if not mapped:
        raise InvalidSpec("map", repr(name), "a PostgreSQL identifier cannot be empty")
    if len(mapped.encode()) > MAX_IDENTIFIER_BYTES:
        raise InvalidSpec("map", repr(name), f"PostgreSQL identifiers are at most {MAX_IDENTIFIER_BYTES} bytes")
    if not _IDENTIFIER.match(mapped):
        raise InvalidSpec(
            "map", repr(name), "use lowercase letters, digits, '-' and '_', starting with a letter or '_'"
        )
    return mapped


def tenant_role(owner: str) -> str:
    """The LOGIN role that owns a project's databases."""
    return identifier(owner)


@contextmanager
def admin_connection(instance: SharedInstance, dbname: str = "postgres") -> Iterator[psycopg.Connection]:
    """An autocommit admin connection; EngineUnavailable when the server does not answer."""
    try:
        conn = psycopg.connect(
            host=instance.host,
            port=instance.port,
            user=instance.admin_user,
            password=instance.password(),
            dbname=dbname,
            autocommit=True,
            connect_timeout=5,
        )
    except psycopg.OperationalError as err:
        raise EngineUnavailable(
            "connect to",
            f"postgres instance {instance.name!r} at {instance.address}",
            str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__,
            "start it with `python -m tools.engines start postgres`",
        ) from err
    with conn:
        yield conn


@contextmanager
def ddl_lock(conn: psycopg.Connection) -> Iterator[None]:
    """Serialize tenant DDL across every process talking to this server."""
    conn.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK_KEY,))
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (DDL_LOCK_KEY,))


class DatabaseSpec(BaseModel):
    """Params of a `database`. Encoding and locale are fixed at creation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    encoding: str = "UTF8"
    locale: str = "C.UTF-8"
    connection_limit: int = Field(default=-1, ge=-1, alias="connectionLimit")


class Database(KindProvider):
    """The project's LOGIN role plus a database owned by it, CONNECT revoked from PUBLIC."""

    engine = ENGINE
    kind = "database"
    Spec = DatabaseSpec
    create_only = frozenset({"encoding", "locale"})
    attributes = ("host", "port", "user", "database", "password")
    secret_outputs = ("password",)

    @classmethod
    def engine_name(cls, name: str, owner: str) -> str:
        tenant_role(owner)  # the owner must map too: it names the role
        return identifier(name)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        with admin_connection(instance) as conn:
            row = conn.execute(
                """
                SELECT r.rolname, shobj_description(d.oid, 'pg_database'),
                       pg_encoding_to_char(d.encoding), d.datcollate, d.datconnlimit
                FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba
                WHERE d.datname = %s
                """,
                (identifier(ident.name),),
            ).fetchone()
        if row is None:
            return None
        owner_role, marker, encoding, collate, connection_limit = row
        return Observed(
            owner=marker_owner(marker),
            params={"encoding": encoding, "locale": collate, "connection_limit": connection_limit},
            attributes={"user": owner_role},
        )

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, DatabaseSpec)
        database, role = identifier(ident.name), tenant_role(ident.owner)
        password = password_for(ident, role, props.get("credentials", "predictable"))
        marker = ownership_marker(ident, props.get("stack", ""))
        with admin_connection(instance) as conn, ddl_lock(conn):
            self._ensure_role(conn, ident, role, password, marker)
            if not _database_exists(conn, database):
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
            self._converge(conn, database, role, spec, marker)
        return self._attributes(instance, database, role, password)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        database, role = identifier(ident.name), tenant_role(ident.owner)
        previous = old.get("password") if old.get("credentials") == new.get("credentials") else None
        password = password_for(ident, role, new.get("credentials", "predictable"), previous)
        marker = ownership_marker(ident, new.get("stack", ""))
        with admin_connection(instance) as conn, ddl_lock(conn):
            if password != old.get("password"):
                _set_password(conn, role, password)
            self._converge(conn, database, role, DatabaseSpec.model_validate(new.get("params") or {}), marker)
        return self._attributes(instance, database, role, password)

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        database, role = identifier(ident.name), tenant_role(ident.owner)
        with admin_connection(instance) as conn, ddl_lock(conn):
            if not _database_exists(conn, database):
                raise NotFound("drop", f"database {ident}", "it does not exist")
            # Block new sessions, end only this database's sessions, then drop.
            conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 0").format(sql.Identifier(database)))
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )
            force = sql.SQL(" WITH (FORCE)") if FEATURES["drop_database_force"](conn.info.server_version // 10000) else sql.SQL("")
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)) + force)
            # The role may own other databases of the same project; keep it then.
            owns_more = conn.execute(
                "SELECT 1 FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = %s", (role,)
            ).fetchone()
            if not owns_more:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))

    def drift(self, olds: dict[str, Any]) -> list[str]:
        expected_user = tenant_role(olds["owner"]) if olds.get("owner") else None
        return ["user"] if olds.get("user") not in (None, expected_user) else []

    # --- steps -----------------------------------------------------------

    def _ensure_role(self, conn: psycopg.Connection, ident: Identity, role: str, password: str, marker: str) -> None:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = %s", (role,)
        ).fetchone()
        if row is None:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password))
            )
        elif marker_owner(row[0]) != ident.owner:
            raise self._conflict("create", ident, Observed(owner=marker_owner(row[0])))
        else:
            _set_password(conn, role, password)
        conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(sql.Identifier(role), sql.Literal(marker)))

    def _converge(self, conn: psycopg.Connection, database: str, role: str, spec: DatabaseSpec, marker: str) -> None:
        """Bring owner, connection limit, grants and marker in line; each step is idempotent."""
        db = sql.Identifier(database)
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, sql.Identifier(role)))
        conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(db, sql.Literal(spec.connection_limit)))
        conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
        conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(db, sql.Literal(marker)))

    @staticmethod
    def _attributes(instance: SharedInstance, database: str, role: str, password: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "user": role, "database": database, "password": password}


def _database_exists(conn: psycopg.Connection, database: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is not None


def _set_password(conn: psycopg.Connection, role: str, password: str) -> None:
    conn.execute(sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"database": Database}
