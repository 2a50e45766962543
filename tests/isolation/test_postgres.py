"""PostgreSQL: project A's database login (PG* as `devstack env` gives them) against B's database and roles.

A's role may connect to its own database only; the server refuses B's (and
its own maintenance database) at login, FATAL 42501 "permission denied for
database". What A could try from inside its own database on B's objects
(drop or alter B's database, alter, drop, join or become B's roles) is
refused as InsufficientPrivilege.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql

from tests.isolation.conftest import Matrix, Op, Tenants, cases

ENGINE = "postgres"


def login(tenants: Tenants, dbname: str) -> psycopg.Connection:
    """A session of A's service, as its PG* variables give it, on database `dbname`."""
    env = tenants.env(tenants.a, ENGINE)
    return psycopg.connect(host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"],
                           password=env["PGPASSWORD"], dbname=dbname, autocommit=True, connect_timeout=5)


def database(tenants: Tenants, project: str) -> str:
    return tenants.env(project, ENGINE)["PGDATABASE"]


def roles(tenants: Tenants, project: str) -> dict[str, str]:
    """Engine names of the project's roles: its login role, its `readers` role and its `app` user."""
    out = lambda kind, name: tenants.resource(project, f"pg/{kind}/{name}")  # noqa: E731
    return {"login": tenants.env(project, ENGINE)["PGUSER"], "readers": out("role", f"{project}-readers")["role"],
            "app": out("user", f"{project}-app")["user"]}


def denied(err: BaseException) -> str | None:
    """The server's permission error: refused at login (FATAL 42501, which libpq reports without its code)
    or InsufficientPrivilege on a statement."""
    if isinstance(err, psycopg.errors.InsufficientPrivilege):
        return "InsufficientPrivilege"
    if isinstance(err, psycopg.OperationalError) and "permission denied for database" in str(err):
        return "42501 permission denied for database"
    return None


@pytest.fixture(scope="module")
def seeded(tenants: Tenants) -> Tenants:
    """Each project's service makes a table `items` with one row in its own database, with its own login."""
    for project in (tenants.a, tenants.b):
        env = tenants.env(project, ENGINE)
        with psycopg.connect(host=env["PGHOST"], port=int(env["PGPORT"]), user=env["PGUSER"],
                             password=env["PGPASSWORD"], dbname=env["PGDATABASE"], autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id int)")
            conn.execute("INSERT INTO items VALUES (1)")
    return tenants


def in_target(statement: str, expect: Callable[[list], bool] = lambda rows: True):
    """Connect to the target's database as A and run `statement` there."""
    def run(tenants: Tenants, target: str) -> None:
        with login(tenants, database(tenants, target)) as conn:
            cur = conn.execute(statement)
            rows = cur.fetchall() if cur.description else []
            assert expect(rows), rows
    return run


def from_own(template: str):
    """From A's own database, a statement on the target's objects: {db} its database, {login}, {readers},
    {app} its roles."""
    def run(tenants: Tenants, target: str) -> None:
        names = {"db": sql.Identifier(database(tenants, target)),
                 **{k: sql.Identifier(v) for k, v in roles(tenants, target).items()}}
        with login(tenants, database(tenants, tenants.a)) as conn:
            conn.execute(sql.SQL(template).format(**names))
    return run


def scratch_table(tenants: Tenants, target: str) -> None:
    with login(tenants, database(tenants, target)) as conn:
        conn.execute("CREATE TABLE scratch (id int)")
        conn.execute("DROP TABLE scratch")


def maintenance_db(tenants: Tenants, target: str) -> None:
    login(tenants, "postgres").close()



OPS = [
    Op("connect", lambda tenants, target: login(tenants, database(tenants, target)).close()),
    Op("read: SELECT", in_target("SELECT id FROM items", lambda rows: (1,) in rows)),
    Op("write: INSERT", in_target("INSERT INTO items VALUES (2)")),
    Op("list: pg_tables", in_target("SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
                                    lambda rows: ("items",) in rows)),
    Op("delete: DELETE rows", in_target("DELETE FROM items WHERE id = 2")),
    Op("delete: DROP TABLE", scratch_table),
    Op("administer: ALTER DATABASE", from_own("ALTER DATABASE {db} SET application_name = 'iso'")),
    Op("administer: DROP DATABASE", from_own("DROP DATABASE {db}"), own=False),
    Op("administer: ALTER ROLE", from_own("ALTER ROLE {login} PASSWORD 'taken-over'"), own=False),
    Op("administer: DROP ROLE user", from_own("DROP ROLE {app}"), own=False),
    Op("administer: GRANT role", from_own("GRANT {readers} TO CURRENT_USER"), own=False),
    Op("administer: SET ROLE", from_own("SET ROLE {login}"), own=False),
    Op("connect: maintenance db", maintenance_db, own=False),
]


@pytest.mark.parametrize("op,target", cases(OPS))
def test_postgres(seeded: Tenants, matrix: Matrix, op: Op, target: str) -> None:
    matrix.run(ENGINE, seeded, op, target, denied)
