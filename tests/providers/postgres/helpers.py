"""Helpers the postgres provider tests share: the local server's address and a project's session on it."""

from __future__ import annotations

import json

import psycopg
from psycopg import sql

from tools.engines.ports import PORTS

PG = {"host": "127.0.0.1", "port": PORTS["postgres"]}


def connect(outs: dict, dbname: str | None = None) -> psycopg.Connection:
    """A session of the project's user on the server its outputs name (the local one if they name none)."""
    return psycopg.connect(host=outs.get("host", PG["host"]), port=outs.get("port", PG["port"]),
                           user=outs["user"], password=outs["password"],
                           dbname=dbname or outs["database"], connect_timeout=5, autocommit=True)


def as_tenant(outs: dict, statement: str, admin_conn: psycopg.Connection | None = None) -> None:
    """Run `statement` on the database as its own project role (`{}` is the database's name): what a
    tenant may do to its database without any admin. From a session there (`postgres` is closed to it),
    or, given `admin_conn`, from the admin's session as that role (SET ROLE: the server checks the
    role's privileges), for what cannot be done from inside the database (closing it to sessions)."""
    statement = sql.SQL(statement).format(sql.Identifier(outs["database"]))
    if admin_conn is None:
        with connect(outs) as tenant:
            tenant.execute(statement)
        return
    admin_conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(outs["user"])))
    try:
        admin_conn.execute(statement)
    finally:
        admin_conn.execute("RESET ROLE")


def role_facts(conn, name: str) -> dict | None:
    row = conn.execute(
        "SELECT rolcanlogin, rolinherit, rolconnlimit, shobj_description(oid, 'pg_authid'),"
        " ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid ORDER BY 1)"
        " FROM pg_roles r WHERE rolname = %s", (name,)).fetchone()
    if row is None:
        return None
    return {"login": row[0], "inherit": row[1], "limit": row[2], "marker": json.loads(row[3] or "null"), "member_of": row[4]}


def check_failures(provider, inputs: dict) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check({}, inputs).failures}
