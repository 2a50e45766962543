"""An admin with CREATEDB and CREATEROLE but not SUPERUSER, as RDS, Cloud SQL and Azure give, on the real
local servers, PostgreSQL 15 and 16 (16 changed what CREATEROLE may do): each kind's create, read, update (a
rotation), delete and isolation, the admin a member of a project's role only while it acts as it, and what
`devstack doctor` says of it."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg import sql
from pydantic import SecretStr

from providers.errors import Conflict, Unsupported
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.postgres.client import LIMITED_MODE, SUPERUSER_MODE
from providers.postgres.database import Database
from providers.postgres.role import Role
from providers.postgres.user import User
from tests.conftest import configured
from tests.providers.conftest import props
from tests.providers.postgres.helpers import PG, connect, role_facts


@pytest.fixture(scope="module", params=["pg15", "pg16"])
def server(request) -> dict:
    """The address of each server the tests run on: the local engine (15), then a PostgreSQL 16."""
    return PG if request.param == "pg15" else request.getfixturevalue("postgres16")


@pytest.fixture
def admin_conn(admin, server):
    """The superuser admin's session on the server under test (the `cleanup` fixture's too)."""
    with psycopg.connect(**server, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def limited(admin, server):
    """(name, password) of a role `devstack_limited_<hex>` WITH LOGIN CREATEDB CREATEROLE and no SUPERUSER, let
    into `postgres` as a managed server lets its admin (the local engine closes it to all but superusers);
    dropped after the module with whatever grants it still holds."""
    name, password = f"devstack_limited_{secrets.token_hex(4)}", secrets.token_urlsafe(18)
    with psycopg.connect(**server, user=admin["postgres"].user, password=admin["postgres"].password, dbname="postgres",
                         autocommit=True) as conn:
        role = sql.Identifier(name)
        conn.execute(sql.SQL("CREATE ROLE {} WITH LOGIN CREATEDB CREATEROLE NOSUPERUSER PASSWORD {}")
                     .format(role, sql.Literal(password)))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE postgres TO {}").format(role))
        try:
            yield name, password
        finally:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
            conn.execute(sql.SQL("DROP ROLE {}").format(role))


def as_admin(kind, server: dict, user: str, password: str):
    """`kind` configured with instance `pg` (the server at `server`) whose admin is `user`."""
    shared = {"pg": {"engine": "postgres", **server, "adminUser": user, "adminSecret": "pgLimitedAdmin"}}
    return configured(kind, {"shared": shared}, {"postgres": password})


def acted_as(conn: psycopg.Connection, admin: str, owner: str) -> list[str]:
    """The project's roles whose privileges `admin` has: none once a call is over."""
    return [name for (name,) in conn.execute(
        "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s) AND pg_has_role(%s, oid, 'USAGE') ORDER BY 1",
        (owner, admin)).fetchall()]


def refused(outs: dict, dbname: str | None = None) -> str:
    with pytest.raises(psycopg.OperationalError) as err:
        connect(outs, dbname).close()
    return str(err.value)


def test_a_database_lives_and_dies_under_a_limited_admin(server, limited, owner, cleanup, admin_conn):
    database = as_admin(Database(), server, *limited)
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    assert database.create(inputs).outs["password"] == outs["password"]  # run twice: adopted
    assert admin_conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                              (owner,)).fetchone() == (owner,)
    assert acted_as(admin_conn, limited[0], owner) == []  # a member only while it acted as the role
    # It keeps CONNECT, granted by the owner, and records the workspace where only an admin writes.
    assert f"{limited[0]}=c/{owner}" in admin_conn.execute(
        "SELECT datacl::text FROM pg_database WHERE datname = %s", (owner,)).fetchone()[0]
    assert admin_conn.execute(
        "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase "
        "WHERE d.datname = %s AND s.setrole = %s::regrole", (owner, limited[0])).fetchone() == (
        ["application_name=devstack.workspace=test"],)
    with connect(outs) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (owner, owner)
    read = database.read("id", outs).outs
    assert (read["isolated"], read["login"], read["marked"]) == (True, True, True)
    assert database.diff("id", read, inputs).changes is False

    rotated_inputs = {**inputs, "params": {**inputs["params"], "rotation": 1, "connection_limit": 5}}
    rotated = database.update("id", read, rotated_inputs).outs
    assert rotated["password"] != outs["password"]
    connect(rotated).close()
    assert "password authentication failed" in refused(outs)
    assert admin_conn.execute("SELECT datconnlimit FROM pg_database WHERE datname = %s", (owner,)).fetchone() == (5,)

    other = database.create(props("postgres", "pg", "database", f"{owner}x", f"{owner}x")).outs
    assert 'permission denied for database' in refused(other, owner)  # another project's role stays out
    assert 'permission denied for database' in refused(rotated, other["database"])

    session = connect(rotated)  # the project's own session: the admin, acting as its role, ends it
    database.delete("id", {**rotated, "purge": True})
    with pytest.raises(psycopg.OperationalError):
        session.execute("SELECT 1")
    for gone in ("SELECT 1 FROM pg_database WHERE datname = %s", "SELECT 1 FROM pg_roles WHERE rolname = %s"):
        assert admin_conn.execute(gone, (owner,)).fetchone() is None
    assert is_stale(database.read("id", rotated).outs)
    database.delete("id", {**other, "purge": True})
    assert acted_as(admin_conn, limited[0], owner) == []


def test_roles_and_users_live_and_die_under_a_limited_admin(server, limited, owner, cleanup, admin_conn):
    database, role, user = (as_admin(kind, server, *limited) for kind in (Database(), Role(), User()))
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    readers = role.create(role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs).outs
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner, {"role": "readers"})).inputs
    app = user.create(inputs).outs
    assert role_facts(admin_conn, f"{owner}_app")["member_of"] == sorted([owner, f"{owner}_readers"])
    with connect(db) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(sql.Identifier(readers["role"])))

    updated = role.update("id", readers, {**readers, "params": {"inherit": False}}).outs
    assert role_facts(admin_conn, f"{owner}_readers")["inherit"] is False
    rotated = user.update("id", app, {**inputs, "params": {**inputs["params"], "rotation": 1}}).outs
    assert rotated["password"] != app["password"] and "password authentication failed" in refused(app)
    with connect(rotated) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (0,)
    read = user.read("id", rotated).outs
    assert (read["isolated"], read["login"]) == (True, True)
    assert role.read("id", updated).outs["isolated"] is True

    other = database.create(props("postgres", "pg", "database", f"{owner}x", f"{owner}x")).outs
    assert 'permission denied for database' in refused(rotated, other["database"])
    database.delete("id", {**other, "purge": True})

    role.delete("id", {**updated, "purge": True})  # its grant in the project's database is dropped there first
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (0,)
    session = connect(rotated)  # a user's session: the admin acts as the user too to end it
    database.delete("id", {**db, "purge": True})
    with pytest.raises(psycopg.OperationalError):
        session.execute("SELECT 1")
    user.delete("id", {**rotated, "purge": True})
    assert [role_facts(admin_conn, name) for name in (owner, f"{owner}_app", f"{owner}_readers")] == [None] * 3
    assert acted_as(admin_conn, limited[0], owner) == []


def test_a_purge_stops_at_a_session_it_may_not_end_and_says_so(server, limited, owner, cleanup, admin, admin_conn):
    """A superuser's session in the database: a CREATEDB CREATEROLE admin may not end it, so DROP DATABASE
    WITH (FORCE) refuses; a Conflict says how to go on, and the next purge, the session gone, drops it."""
    database = as_admin(Database(), server, *limited)
    outs = database.create(props("postgres", "pg", "database", owner, owner)).outs
    with psycopg.connect(**server, user=admin["postgres"].user, password=admin["postgres"].password, dbname=owner):
        with pytest.raises(Conflict, match=rf"cannot drop database postgres/pg/database/{owner}@{owner}: .*(?i:superuser).*: a session there is "
                                           rf"not one the admin '{limited[0]}' may end \(end it .*GRANT pg_signal_backend "
                                           rf"TO {limited[0]}"):
            database.delete("id", {**outs, "purge": True})
    assert admin_conn.execute("SELECT datconnlimit FROM pg_database WHERE datname = %s", (owner,)).fetchone() == (0,)
    assert acted_as(admin_conn, limited[0], owner) == []
    database.delete("id", {**outs, "purge": True})
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() is None


def test_a_power_only_a_superuser_takes_back_is_named_with_its_fix(server, limited, owner, cleanup, admin_conn):
    """REPLICATION given to a project's role outside devstack: a limited admin may not take it back (nor even
    name it in ALTER ROLE), and says who may."""
    role = as_admin(Role(), server, *limited)
    outs = role.create(props("postgres", "pg", "role", "readers", owner)).outs
    admin_conn.execute(sql.SQL("ALTER ROLE {} REPLICATION").format(sql.Identifier(outs["role"])))
    assert role.read("id", outs).outs["isolated"] is False
    with pytest.raises(Unsupported, match=rf"cannot contain role '{outs['role']}': it was given REPLICATION .* only a "
                                          rf"superuser .*have a superuser run ALTER ROLE {outs['role']} WITH NOREPLICATION"):
        role.update("id", outs, outs)
    assert acted_as(admin_conn, limited[0], owner) == []


def test_an_admin_without_createrole_is_refused_before_anything_is_made(server, owner, admin_conn):
    """CREATEDB alone falls short part-way through an up: said at once, by the provider and by the doctor."""
    from devstack import doctor

    manager, password = f"{owner}_mgr", secrets.token_urlsafe(12)
    admin_conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEDB PASSWORD {}").format(
        sql.Identifier(manager), sql.Literal(password)))
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE postgres TO {}").format(sql.Identifier(manager)))
    try:
        with pytest.raises(Unsupported, match=f"its admin role '{manager}' is neither a superuser nor has CREATEDB and "
                                              f"CREATEROLE.*ALTER ROLE {manager} CREATEDB CREATEROLE"):
            as_admin(Database(), server, manager, password).create(props("postgres", "pg", "database", owner, owner))
        assert admin_conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() == (0,)
        health = doctor.check_instance(instance(server, manager, password), ["database"], local_port=None)
        assert (health.ok, health.admin) == (False, False) and "neither a superuser" in health.problem
        assert "CREATEDB CREATEROLE" in health.fix
    finally:
        admin_conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE postgres FROM {}").format(sql.Identifier(manager)))
        for name in (owner, manager):
            admin_conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def instance(server: dict, user: str, password: str) -> SharedInstance:
    return SharedInstance(name="pg", engine="postgres", adminUser=user, adminSecret="pgAdmin",
                          admin_password=SecretStr(password), **server)


def test_the_doctor_says_which_mode_an_admin_is_in_and_what_it_cannot_do(server, limited, admin):
    from devstack import doctor

    health = doctor.check_instance(instance(server, *limited), ["database", "role", "user"], local_port=None)
    assert (health.ok, health.admin_mode) == (True, LIMITED_MODE), health
    [note] = [note for note in health.notes if note.startswith(f"admin mode {LIMITED_MODE}")]
    assert "cannot: take back SUPERUSER, REPLICATION or BYPASSRLS" in note
    assert f"GRANT pg_signal_backend TO {limited[0]}" in note  # it has no pg_signal_backend
    assert health.to_json()["adminMode"] == LIMITED_MODE
    assert ("alter or drop a role another admin made" in note) == (major(server, admin) >= 16)
    full = doctor.check_instance(instance(server, admin["postgres"].user, admin["postgres"].password), ["database"],
                                 local_port=None)
    assert (full.ok, full.admin_mode, full.notes) == (True, SUPERUSER_MODE, [])


def test_a_project_another_admin_made_is_the_limited_admins_on_16_only_with_admin_option(
        server, limited, owner, cleanup, admin, admin_conn):
    """A project the superuser admin made: a CREATEROLE admin may act as its role on 15; on 16 only once granted
    ADMIN OPTION on it, and until then its purge says so and drops nothing."""
    made = as_admin(Database(), server, admin["postgres"].user, admin["postgres"].password).create(
        props("postgres", "pg", "database", owner, owner)).outs
    database = as_admin(Database(), server, *limited)
    if admin_conn.info.server_version >= 160000:
        with pytest.raises(Unsupported, match=rf"cannot act as role '{owner}': .*: only roles with the ADMIN option on "
                                              rf"role \"{owner}\" may grant this role \(.*GRANT {owner} TO {limited[0]} "
                                              "WITH ADMIN OPTION"):
            database.delete("id", {**made, "purge": True})
        assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() == (1,)
        admin_conn.execute(sql.SQL("GRANT {} TO {} WITH ADMIN OPTION").format(*map(sql.Identifier, (owner, limited[0]))))
    database.delete("id", {**made, "purge": True})
    for gone in ("SELECT 1 FROM pg_database WHERE datname = %s", "SELECT 1 FROM pg_roles WHERE rolname = %s"):
        assert admin_conn.execute(gone, (owner,)).fetchone() is None


def major(server: dict, admin) -> int:
    with psycopg.connect(**server, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres") as conn:
        return conn.info.server_version // 10000


def test_a_noinherit_admin_is_unfit_before_16_and_acts_as_a_project_from_16_on(server, owner, cleanup, admin_conn):
    """Before 16 a membership gives a NOINHERIT role no privileges; from 16 on devstack grants its own WITH
    INHERIT TRUE, so such an admin makes and drops a project's database."""
    from devstack import doctor

    manager, password = f"{owner}_mgr", secrets.token_urlsafe(12)
    admin_conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOINHERIT CREATEDB CREATEROLE PASSWORD {}").format(
        sql.Identifier(manager), sql.Literal(password)))
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE postgres TO {}").format(sql.Identifier(manager)))
    health = doctor.check_instance(instance(server, manager, password), ["database"], local_port=None)
    if admin_conn.info.server_version < 160000:
        assert (health.ok, health.fix) == (False, f"ALTER ROLE {manager} INHERIT") and "NOINHERIT" in health.problem
        return
    assert (health.ok, health.admin_mode) == (True, LIMITED_MODE), health
    database = as_admin(Database(), server, manager, password)
    outs = database.create(props("postgres", "pg", "database", f"{owner}db", f"{owner}db")).outs
    with connect(outs) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (f"{owner}db",)
    database.delete("id", {**outs, "purge": True})
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (f"{owner}db",)).fetchone() is None
