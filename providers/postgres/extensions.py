"""The extensions a `database` lists: only trusted ones, installed by the admin, dropped when unlisted.

devstack owns the extensions it installs (the admin role does); those a tenant
installed itself are the tenant's and never touched.
"""

from __future__ import annotations

from providers.errors import InvalidSpec, Unsupported
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.postgres.client import FEATURES, admin_connection, psycopg, server_major, sql, tenant_database


def managed_extensions(instance: SharedInstance, database: str) -> list[str]:
    """Extensions devstack installed: those owned by the admin role (a tenant's own are owned by the tenant).
    A catalog read, which no tenant's lock holds up: a plain session (every database observe reads it)."""
    with admin_connection(instance, database) as conn:
        rows = conn.execute(
            "SELECT e.extname FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner "
            "WHERE r.rolname = current_user AND e.extname <> 'plpgsql' ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


EXTENSIONS_FIX = "list only trusted extensions from pg_available_extensions, with the ones they require"


def check_extensions(conn: psycopg.Connection, ident: Identity, wanted: list[str], verb: str = "create") -> None:
    """InvalidSpec, before anything changes, for an unknown, untrusted or incomplete extension list."""
    problems = extension_problems(conn, wanted)
    if problems:
        raise InvalidSpec(verb, f"database {ident}", "params.extensions: " + "; ".join(problems), EXTENSIONS_FIX)


def extension_problems(conn: psycopg.Connection, wanted: list[str]) -> list[str]:
    """What is wrong with an extension list: unknown, untrusted, or without one a listed one requires.

    Only trusted extensions (those a database owner may install itself) are
    allowed: devstack installs them as admin, and an untrusted one (file_fdw,
    adminpack, dblink ...) could hand a tenant superuser-only powers.
    """
    if not wanted:
        return []
    trusted_column = sql.SQL("v.trusted" if FEATURES["trusted_extensions"](server_major(conn)) else "false")
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


def create_extensions(instance: SharedInstance, database: str, wanted: list[str]) -> None:
    if not wanted:
        return
    with tenant_database(instance, database) as conn:
        # Into the database's public schema, as its owner's own CREATE EXTENSION would put it (not into
        # pg_catalog, first on the admin's path); the scripts run under a search_path PostgreSQL sets.
        conn.execute("SET search_path = public")
        for name in wanted:
            # CASCADE only ever adds extensions that are listed too (checked before).
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {} CASCADE").format(sql.Identifier(name)))


def drop_extensions(instance: SharedInstance, ident: Identity, database: str, names: list[str],
                     verb: str = "update") -> None:
    """Drop in one statement (so dependencies among them are fine), never CASCADE into tenant objects."""
    if not names:
        return
    with tenant_database(instance, database) as conn:
        try:
            conn.execute(sql.SQL("DROP EXTENSION IF EXISTS {}").format(sql.SQL(", ").join(map(sql.Identifier, names))))
        except psycopg.errors.DependentObjectsStillExist as err:
            raise Unsupported(
                verb, f"database {ident}",
                f"extension(s) {', '.join(names)} still in use: {err.diag.message_detail or err}",
                "drop the objects that use them first, or keep the extensions listed",
            ) from err
