"""Every database and role in a PostgreSQL server, ours or not, with the markers the kinds write.

A project's LOGIN role is part of its `database` (marker kind "database"), not a
resource of its own; one left behind by its database is listed as that
database. Objects inside a tenant database are data, not resources.
"""

from __future__ import annotations

from typing import Any

from providers.engine import Found
from providers.instances import SharedInstance
from providers.markers import marker_field, marker_owner
from providers.postgres.client import ENGINE_NAME, admin_connection, ddl_lock
from providers.postgres.database import RECORDED_WORKSPACES, database_workspace
from providers.postgres.roles import database_owner


def scan(instance: SharedInstance, kinds: set[str]) -> list[Found]:
    """Databases and roles with their COMMENT markers (template databases and pg_* roles skipped)."""
    found: list[Found] = []
    with admin_connection(instance) as conn, ddl_lock(conn, shared=True):
        if "database" in kinds:
            rows = conn.execute(
                "SELECT d.datname, shobj_description(d.oid, 'pg_database'), r.rolname, "
                f"shobj_description(r.oid, 'pg_authid'), {RECORDED_WORKSPACES} "
                "FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
                "WHERE NOT d.datistemplate AND d.datname <> 'postgres' ORDER BY 1"
            ).fetchall()
            for name, comment, owner_role, role_comment, recorded in rows:
                # As the provider tells it: a database owned by a project's role is that project's, whatever
                # its COMMENT says (its owner may rewrite that). Without a COMMENT of the same project, though,
                # it is not provably ours: one made by hand for that role looks the same, so only the ledger
                # makes it this workspace's.
                owner = database_owner(comment, owner_role, role_comment)
                doubt = None if marker_owner(comment) == owner else (
                    "its COMMENT marker is missing or names another project; its owning role's decides (a create "
                    "cut short, a comment its owner rewrote, or a database made by hand for that role)")
                found.append(Found(ENGINE_NAME, instance.name, "database", name, owner,
                                   database_workspace(recorded), doubt=doubt))
            found += _databases_dropped_but_their_role(conn, instance)
        if kinds & {"role", "user"}:
            rows = conn.execute(
                "SELECT rolname, rolcanlogin, shobj_description(oid, 'pg_authid') FROM pg_roles "
                "WHERE rolname !~ '^pg_' ORDER BY 1"
            ).fetchall()
            for name, login, comment in rows:
                kind = _role_kind(comment, login)
                if kind in kinds:
                    found.append(_pg_found(instance, kind, name, comment))
    return found


def _databases_dropped_but_their_role(conn: Any, instance: SharedInstance) -> list[Found]:
    """A purge cut short between DROP DATABASE and DROP ROLE leaves the project's LOGIN role, password
    and all, owning nothing; a refresh then marks the database stale. Listed as that database, so gc
    --prune finishes the drop (the provider drops such a role when the database is gone)."""
    rows = conn.execute(
        "SELECT r.rolname, shobj_description(r.oid, 'pg_authid') FROM pg_roles r "
        "WHERE r.rolcanlogin AND NOT EXISTS (SELECT 1 FROM pg_database d WHERE d.datdba = r.oid) ORDER BY 1"
    ).fetchall()
    return [Found(ENGINE_NAME, instance.name, "database", name, marker_owner(comment), marker_field(comment, "stack"))
            for name, comment in rows if marker_owner(comment) is not None and _role_kind(comment, True) is None]


def _role_kind(comment: str | None, login: bool) -> str | None:
    """`role`/`user` from the marker; None for a project role (part of its `database`)."""
    if marker_owner(comment) is None:
        return "user" if login else "role"
    kind = marker_field(comment, "kind") or "database"
    return kind if kind in ("role", "user") else None


def _pg_found(instance: SharedInstance, kind: str, name: str, comment: str | None) -> Found:
    return Found(ENGINE_NAME, instance.name, kind, name, marker_owner(comment), marker_field(comment, "stack"))
