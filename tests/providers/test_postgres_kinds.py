"""The postgres `role` and `user` kinds and `database` extensions against the real local server.

Every kind: create; create again (adoption, no change); update in place; a
replace-classified diff; drift through read; retained and purged delete;
identity conflicts that change nothing; bad params; tenant isolation; and
concurrent runs of two "stacks" serialized by the advisory lock.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql

from providers.credentials import hashed_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, Unsupported
from providers.identity import Identity
from providers.postgres import DDL_LOCK_KEY, Database, Role, User, _database_exists
from providers.identity import PREFIXED
from tests.providers.conftest import props

PG = {"host": "127.0.0.1", "port": 25432}


@pytest.fixture
def admin_conn(admin):
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", autocommit=True) as conn:
        yield conn


@pytest.fixture
def cleanup(admin_conn, owner):
    """Drops every database and role whose name starts with the test's owner, retained or not."""
    yield
    for (name,) in admin_conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (owner,)).fetchall():
        admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    for (name,) in admin_conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (owner,)).fetchall():
        admin_conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def database(configure, cleanup):
    return configure(Database())


@pytest.fixture
def role(configure, cleanup):
    return configure(Role())


@pytest.fixture
def user(configure, cleanup):
    return configure(User())


def connect(outs: dict, dbname: str | None = None) -> psycopg.Connection:
    return psycopg.connect(**PG, user=outs["user"], password=outs["password"],
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


def extensions(admin, database: str) -> list[str]:
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password, dbname=database) as conn:
        return [r[0] for r in conn.execute("SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1")]


def check_failures(provider, inputs: dict) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check({}, inputs).failures}


# --- database: extensions and drift --------------------------------------------


def test_database_extensions_create_adopt_update_and_drift(database, owner, admin, admin_conn):
    inputs = props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto", "citext", "citext"]})
    inputs = database.check({}, inputs).inputs
    assert inputs["params"]["extensions"] == ["citext", "pgcrypto"]  # normalized: sorted, unique
    outs = database.create(inputs).outs
    assert extensions(admin, owner) == ["citext", "pgcrypto"]
    assert database.create(inputs).outs["password"] == outs["password"]  # adoption changes nothing
    assert database.read("id", outs).outs["params"] == outs["params"]

    changed = {**inputs, "params": {**inputs["params"], "extensions": ["citext", "hstore"]}}
    diff = database.diff("id", outs, changed)
    assert diff.changes and diff.replaces == []
    outs = database.update("id", outs, changed).outs
    assert extensions(admin, owner) == ["citext", "hstore"]

    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname=owner, autocommit=True) as conn:
        conn.execute("DROP EXTENSION hstore")  # out of band
    refreshed = database.read("id", outs).outs
    assert refreshed["params"]["extensions"] == ["citext"]
    assert database.diff("id", refreshed, changed).changes  # the next up re-creates it


def test_extensions_go_into_the_databases_public_schema(database, owner, admin):
    database.create(database.check({}, props("postgres", "pg", "database", owner, owner,
                                             {"extensions": ["citext", "hstore"]})).inputs)
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password, dbname=owner) as conn:
        schemas = conn.execute("SELECT e.extname, n.nspname FROM pg_extension e JOIN pg_namespace n "
                               "ON n.oid = e.extnamespace WHERE e.extname <> 'plpgsql' ORDER BY 1").fetchall()
    assert schemas == [("citext", "public"), ("hstore", "public")]


def test_a_tenants_search_path_never_runs_its_code_as_the_admin(database, owner, admin_conn):
    """The tenant owns its database, so it may set the database's search_path and put an operator of
    its own ahead of PostgreSQL's: an admin query there would run it as superuser."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, {"extensions": ["citext"]})).inputs
    outs = database.create(inputs).outs
    with connect(outs) as tenant:
        tenant.execute(sql.SQL(
            "CREATE FUNCTION public.hijack(a name, b name) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN "
            "IF pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN "
            "EXECUTE {}; END IF; RETURN a OPERATOR(pg_catalog.<>) b; END $$"
        ).format(sql.Literal(f"ALTER ROLE {outs['user']} SUPERUSER")))
        for operator in ("<>", "="):
            tenant.execute(f"CREATE OPERATOR public.{operator} (LEFTARG = name, RIGHTARG = name, FUNCTION = public.hijack)")
        tenant.execute(sql.SQL("ALTER DATABASE {} SET search_path = public, pg_catalog").format(sql.Identifier(owner)))

    outs = database.read("id", outs).outs  # a refresh
    changed = {**inputs, "params": {**inputs["params"], "connection_limit": 7, "extensions": ["hstore"]}}
    outs = database.update("id", outs, changed).outs
    database.create(changed)  # adoption
    superuser = admin_conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (outs["user"],)).fetchone()
    assert superuser == (False,)


def test_database_adopted_without_an_extension_drops_the_one_devstack_installed(database, owner, admin):
    """A retained database declared again with fewer extensions: the ledger says what the engine has."""
    outs = database.create(database.check({}, props("postgres", "pg", "database", owner, owner,
                                                    {"extensions": ["citext", "pgcrypto"]})).inputs).outs
    with connect(outs) as conn:  # the tenant's own extension is not devstack's to drop
        conn.execute("CREATE EXTENSION pg_trgm")
    again = database.check({}, props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto"]})).inputs
    adopted = database.create(again).outs
    assert extensions(admin, owner) == ["pg_trgm", "pgcrypto"]
    assert database.read("id", adopted).outs["params"] == adopted["params"]


def test_database_tenant_installed_extension_is_not_managed(database, owner, admin):
    outs = database.create(props("postgres", "pg", "database", owner, owner)).outs
    with connect(outs) as conn:  # pg_trgm is trusted: the owner may install it itself
        conn.execute("CREATE EXTENSION pg_trgm")
    assert database.read("id", outs).outs["params"]["extensions"] == []
    assert extensions(admin, owner) == ["pg_trgm"]


def test_database_extension_in_use_is_not_dropped(database, owner, admin):
    inputs = props("postgres", "pg", "database", owner, owner, {"extensions": ["citext"]})
    outs = database.create(inputs).outs
    with connect(outs) as conn:
        conn.execute("CREATE TABLE emails (address citext)")
    with pytest.raises(Unsupported, match="citext still in use"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "extensions": []}})
    assert extensions(admin, owner) == ["citext"]
    with connect(outs) as conn:
        assert conn.execute("SELECT count(*) FROM emails").fetchone() == (0,)


@pytest.mark.parametrize(
    "wanted, message",
    [
        pytest.param(["no_such_extension"], "'no_such_extension' is not available", id="unknown"),
        pytest.param(["file_fdw"], "'file_fdw' is not a trusted extension", id="untrusted"),
        pytest.param(["earthdistance"], "'earthdistance' requires 'cube', which is not listed", id="missing-requirement"),
    ],
)
def test_database_bad_extensions_change_nothing(database, owner, admin_conn, wanted, message):
    with pytest.raises(InvalidSpec, match=message):
        database.create(props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() is None
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None


@pytest.mark.parametrize("wanted, message", [
    (["no_such_extension"], "'no_such_extension' is not available"),
    (["file_fdw"], "'file_fdw' is not a trusted extension"),
])
def test_database_bad_extensions_fail_check_before_the_up(database, owner, admin_conn, wanted, message):
    """Said at the preview, new or changed, not half-way through the up after the workspace's other creates."""
    found = check_failures(database, props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert message in found["params.extensions"] and "the database was not made" in found["params.extensions"]
    made = database.create(props("postgres", "pg", "database", owner, owner)).outs
    changed = database.check(made, props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert [(f.property, message in f.reason, "was not changed" in f.reason) for f in changed.failures] == [
        ("params.extensions", True, True)]


def test_database_extension_names_with_a_dash_are_quoted(database, owner, admin):
    database.create(props("postgres", "pg", "database", owner, owner, {"extensions": ["uuid-ossp"]}))
    assert extensions(admin, owner) == ["uuid-ossp"]


@pytest.mark.parametrize(
    "params, field",
    [
        pytest.param({"extensions": ["Bad Name!"]}, "params.extensions", id="extension-name"),
        pytest.param({"extensions": "citext"}, "params.extensions", id="extensions-not-a-list"),
        pytest.param({"connectionLimit": -2}, "params.connectionLimit", id="limit-below-minus-one"),
        pytest.param({"owner": "x"}, "params.owner", id="unknown-param"),
    ],
)
def test_database_bad_params_name_the_field(database, owner, params, field):
    failures = check_failures(database, props("postgres", "pg", "database", owner, owner, params))
    assert any(name.startswith(field) for name in failures), failures


def test_database_encoding_in_any_spelling_reads_back_unchanged(database, owner):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, {"encoding": "utf-8"})).inputs
    assert inputs["params"]["encoding"] == "UTF8"  # as the server names it
    outs = database.create(inputs).outs
    refreshed = database.read("id", outs).outs
    assert not database.diff("id", refreshed, inputs).changes  # no replace after a refresh
    failures = check_failures(database, props("postgres", "pg", "database", owner, owner, {"encoding": "utf-16"}))
    assert "not a PostgreSQL server encoding" in failures["params.encoding"]


def test_database_adopted_only_with_the_encoding_it_has(database, owner, admin_conn):
    """Ours already (a retained replace), with another encoding: refused, not silently recorded as declared."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    admin_conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(owner)))
    admin_conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0").format(
        sql.Identifier(owner), sql.Identifier(owner)))
    admin_conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
        sql.Identifier(owner), sql.Literal(json.dumps({"managed-by": "devstack", "owner": owner}))))
    with pytest.raises(Unsupported, match='exists with params.encoding "SQL_ASCII".*declare encoding: "SQL_ASCII"') as refused:
        database.create(inputs)
    # The way to the new value takes two ups: purge set on the old one first (its delete honours that).
    assert 'first set `purge: true` keeping encoding: "SQL_ASCII" and run `pulumi up`, then change encoding' \
        in str(refused.value)
    assert database.read("id", outs).outs["params"]["encoding"] == "SQL_ASCII"


def test_database_public_access_granted_outside_is_drift_and_revoked(database, owner, admin_conn):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    assert outs["isolated"] is True and database.read("id", outs).outs["isolated"] is True
    admin_conn.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO PUBLIC").format(sql.Identifier(owner)))
    refreshed = database.read("id", outs).outs
    assert refreshed["isolated"] is False
    diff = database.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    database.update("id", refreshed, inputs)  # the next up revokes it
    assert database.read("id", outs).outs["isolated"] is True


def test_database_access_granted_outside_to_another_role_is_drift_and_revoked(database, owner, admin_conn):
    """Not only PUBLIC: another project's login let in by hand could connect and use the database."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    intruder = sql.Identifier(f"{owner}_intruder")
    admin_conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(intruder))
    try:
        admin_conn.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(sql.Identifier(owner), intruder))
        refreshed = database.read("id", outs).outs
        assert refreshed["isolated"] is False and database.diff("id", refreshed, inputs).changes
        database.update("id", refreshed, inputs)
        assert database.read("id", outs).outs["isolated"] is True
        let_in = admin_conn.execute("SELECT has_database_privilege(%s, %s, 'CONNECT')",
                                    (f"{owner}_intruder", owner)).fetchone()[0]
        assert let_in is False
    finally:
        admin_conn.execute(sql.SQL("DROP OWNED BY {}").format(intruder))
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(intruder))


@pytest.mark.parametrize("kind", ["database", "user"])
def test_password_reset_outside_is_drift_and_set_again(kind, database, user, owner, admin_conn):
    provider = {"database": database, "user": user}[kind]
    inputs = provider.check({}, props("postgres", "pg", kind, owner if kind == "database" else "app", owner,
                                      credentials="generated")).inputs
    outs = provider.create(inputs).outs
    assert provider.read("id", outs).outs["passwordInSync"] is True
    admin_conn.execute(sql.SQL("ALTER ROLE {} PASSWORD 'reset-by-hand'").format(sql.Identifier(outs["user"])))
    refreshed = provider.read("id", outs).outs
    assert refreshed["passwordInSync"] is False
    diff = provider.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    updated = provider.update("id", refreshed, inputs).outs  # the next up sets the stored one again
    assert updated["password"] == outs["password"]
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect({**outs, "database": "postgres"})  # the server took the password: only CONNECT is missing
    assert provider.read("id", updated).outs["passwordInSync"] is True


@pytest.mark.parametrize("change", ["VALID UNTIL '2000-01-01'", "NOLOGIN", "CONNECTION LIMIT 0"])
@pytest.mark.parametrize("kind", ["database", "user"])
def test_a_login_disabled_outside_is_drift_and_enabled_again(kind, change, database, user, owner, admin_conn):
    """The password still matches, but the DSN no longer logs in: an expired password, NOLOGIN, or no
    connections allowed (the database's role has no limit of its own; a user's is its param)."""
    provider = {"database": database, "user": user}[kind]
    inputs = provider.check({}, props("postgres", "pg", kind, owner if kind == "database" else "app", owner)).inputs
    if kind == "user":
        database.create(props("postgres", "pg", "database", owner, owner))
    outs = provider.create(inputs).outs
    admin_conn.execute(sql.SQL("ALTER ROLE {} ").format(sql.Identifier(outs["user"])) + sql.SQL(change))
    with pytest.raises(psycopg.OperationalError):
        connect({**outs, "database": owner}).close()
    refreshed = provider.read("id", outs).outs
    if change == "CONNECTION LIMIT 0" and kind == "user":  # a param of its own: the usual param drift
        assert refreshed["params"]["connection_limit"] == 0
    else:
        assert refreshed["login"] is False
    diff = provider.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    updated = provider.update("id", refreshed, inputs).outs
    connect({**updated, "database": owner}).close()
    assert provider.diff("id", provider.read("id", updated).outs, inputs).changes is False


def test_a_database_its_owner_made_a_template_is_drift_undone_and_still_purged(database, owner, admin_conn):
    """The tenant may set IS_TEMPLATE on its own database: any role that may create databases can then
    copy it, data and all, and DROP DATABASE refuses a template (a purge failed with a traceback)."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, purge=True)).inputs
    outs = database.create(inputs).outs
    as_tenant(outs, "ALTER DATABASE {} IS_TEMPLATE true")
    refreshed = database.read("id", outs).outs
    assert refreshed["isolated"] is False and database.diff("id", refreshed, inputs).changes
    database.update("id", refreshed, inputs)
    template = "SELECT datistemplate FROM pg_database WHERE datname = %s"
    assert admin_conn.execute(template, (owner,)).fetchone() == (False,)
    as_tenant(outs, "ALTER DATABASE {} IS_TEMPLATE true")
    database.delete("id", outs)  # purged as it is, a template again
    assert admin_conn.execute(template, (owner,)).fetchone() is None


def test_a_database_its_owner_closed_to_sessions_is_drift_not_an_engine_down(database, owner, admin_conn):
    """ALLOW_CONNECTIONS false (the tenant may set it) shuts everyone out, the admin too: a refresh must
    report the database's login as broken, not fail the whole stack saying the server is down."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto"]})).inputs
    outs = database.create(inputs).outs
    as_tenant(outs, "ALTER DATABASE {} ALLOW_CONNECTIONS false", admin_conn)
    refreshed = database.read("id", outs).outs
    assert refreshed["login"] is False and refreshed["params"]["extensions"] == ["pgcrypto"]
    database.update("id", refreshed, inputs)
    connect(outs).close()
    assert database.diff("id", database.read("id", outs).outs, inputs).changes is False


def test_a_database_marker_its_owner_removed_is_drift_and_written_again(database, owner, admin_conn):
    """Still the project's by its role, but a scan (gc) would take a database without its marker for foreign."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    as_tenant(outs, "COMMENT ON DATABASE {} IS NULL")
    refreshed = database.read("id", outs).outs
    assert refreshed["marked"] is False and database.diff("id", refreshed, inputs).changes
    database.update("id", refreshed, inputs)
    comment = admin_conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                                 (owner,)).fetchone()[0]
    assert json.loads(comment)["owner"] == owner
    assert database.diff("id", database.read("id", outs).outs, inputs).changes is False


def test_database_drift_owner_changed_and_encoding_replaces(database, owner, admin_conn):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    relocaled = {**inputs, "params": {**inputs["params"], "locale": "C"}, "purge": True}
    assert database.diff("id", {**outs, "purge": True}, relocaled).replaces == ["params.locale"]
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(owner + "_other")))
    admin_conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(owner), sql.Identifier(owner + "_other")))
    refreshed = database.read("id", outs).outs
    assert refreshed["user"] == owner + "_other"
    diff = database.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []  # the next up gives it back to the project's role
    database.update("id", refreshed, inputs)
    assert admin_conn.execute(
        "SELECT r.rolname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = %s", (owner,)
    ).fetchone() == (owner,)
    # Handed to another project by the admin (its owner now that project's marked role, which only the
    # admin can make): gone from this ledger; update and purge refuse to touch it.
    other = f"{owner}x"
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(other)))
    admin_conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(
        sql.Identifier(other), sql.Literal(json.dumps({"managed-by": "devstack", "owner": other}))))
    admin_conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(owner), sql.Identifier(other)))
    assert database.read("id", outs).id == ""
    with pytest.raises(Conflict, match=f"belongs to project '{other}'.*nothing was changed"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "connection_limit": 3}})
    with pytest.raises(Conflict, match=f"belongs to project '{other}'.*nothing was dropped"):
        database.delete("id", {**outs, "purge": True})
    assert _database_exists(admin_conn, owner)


# --- role ---------------------------------------------------------------------


def test_role_create_adopt_update_and_replace(role, owner, admin_conn):
    inputs = role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs
    first = role.create(inputs)
    assert first.id == f"postgres/pg/role/readers@{owner}"
    assert first.outs["role"] == f"{owner}_readers"
    facts = role_facts(admin_conn, f"{owner}_readers")
    assert facts["login"] is False and facts["inherit"] is True
    assert facts["marker"] == {"managed-by": "devstack", "owner": owner, "stack": "test", "kind": "role"}
    second = role.create(inputs)  # run twice: adopted, nothing changes
    assert second.outs == first.outs and role_facts(admin_conn, f"{owner}_readers") == facts

    changed = {**inputs, "params": {"inherit": False}}
    assert role.diff("id", first.outs, changed).replaces == []
    outs = role.update("id", first.outs, changed).outs
    assert role_facts(admin_conn, f"{owner}_readers")["inherit"] is False
    assert role.diff("id", outs, {**changed, "name": "writers"}).replaces == ["name"]


def test_role_drift_login_inherit_owner_and_drop(role, owner, admin_conn):
    inputs = role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs
    outs = role.create(inputs).outs
    name = sql.Identifier(f"{owner}_readers")
    admin_conn.execute(sql.SQL("ALTER ROLE {} LOGIN NOINHERIT").format(name))
    refreshed = role.read("id", outs).outs
    assert refreshed["params"]["inherit"] is False and refreshed["login"] is True
    diff = role.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    role.update("id", refreshed, inputs)
    assert role_facts(admin_conn, f"{owner}_readers")["login"] is False
    admin_conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(
        name, sql.Literal(json.dumps({"managed-by": "devstack", "owner": "intruder", "kind": "role"}))))
    assert role.read("id", outs).id == ""  # another project's now: gone from this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        role.update("id", outs, inputs)
    admin_conn.execute(sql.SQL("DROP ROLE {}").format(name))
    assert role.read("id", outs).id == ""


def test_role_retained_then_purged_with_grants_in_a_project_database(role, database, owner, admin_conn):
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    outs = role.create(props("postgres", "pg", "role", "readers", owner)).outs
    with connect(db) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(sql.Identifier(outs["role"])))
    role.delete("id", outs)  # no purge: retained
    assert role_facts(admin_conn, outs["role"]) is not None
    role.delete("id", {**outs, "purge": True})  # the grant in the project's database does not block it
    assert role_facts(admin_conn, outs["role"]) is None
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (0,)
    role.delete("id", {**outs, "purge": True})  # already gone is fine


def test_role_of_another_project_and_foreign_role_conflict(role, owner, admin_conn):
    role.create(props("postgres", "pg", "role", "b_c", owner))
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):  # {owner}_b + c = {owner}_b_c too
        role.create(props("postgres", "pg", "role", "c", f"{owner}_b"))
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(f"{owner}_foreign")))
    with pytest.raises(Conflict, match=f"'{owner}_foreign' \\(declared 'foreign'\\) already exists .* devstack does not manage"):
        role.create(props("postgres", "pg", "role", "foreign", owner))
    assert role_facts(admin_conn, f"{owner}_foreign")["marker"] is None  # untouched


def test_role_bad_params_and_names(role, owner):
    failures = check_failures(role, props("postgres", "pg", "role", "readers", owner, {"inherit": "maybe", "login": True}))
    assert set(failures) == {"params.inherit", "params.login"}
    with pytest.raises(InvalidSpec, match="lowercase letters"):
        Role.engine_name("Read Ers", owner, naming=PREFIXED)
    with pytest.raises(InvalidSpec, match="at most 63 bytes"):
        Role.engine_name("r" * 60, owner, naming=PREFIXED)


# --- user ---------------------------------------------------------------------


def test_user_joins_project_role_and_reaches_the_project_database(user, database, owner, admin_conn):
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner)).inputs
    first = user.create(inputs)
    assert first.outs["user"] == f"{owner}_app" and first.outs["database"] == owner
    second = user.create(inputs)  # adoption: same predictable password, no change
    assert second.outs == first.outs
    facts = role_facts(admin_conn, f"{owner}_app")
    assert facts["login"] is True and facts["member_of"] == [owner]
    assert facts["marker"]["kind"] == "user" and facts["marker"]["owner"] == owner
    with connect(db) as conn:  # the schema, made with the database's own credentials
        conn.execute("CREATE TABLE events (id int)")
    with connect(first.outs) as conn:  # CONNECT and table privileges through membership of the owner role
        conn.execute("INSERT INTO events VALUES (1)")
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1,)


def breach_is_drift_then_repaired(*resources: tuple) -> None:
    """Each (provider, outs, inputs): refresh says `isolated: false`, diff sees a change, and an update
    makes a later refresh say `isolated: true` again."""
    for provider, outs, inputs in resources:
        refreshed = provider.read("id", outs).outs
        assert refreshed["isolated"] is False and provider.diff("id", refreshed, inputs).changes
        provider.update("id", refreshed, inputs)
        assert provider.read("id", outs).outs["isolated"] is True


def test_reach_granted_outside_to_a_tenant_role_is_drift_and_taken_back(user, database, owner, admin_conn):
    """A server-wide power on a user, or a login from outside the project made a member of the project's
    role (so inheriting its database): refresh reports `isolated: false`, the next up takes it back,
    and the project's own user stays a member."""
    db_inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    db = database.create(db_inputs).outs
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner)).inputs
    app = user.create(inputs).outs
    intruder = f"{owner}_intruder"
    admin_conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(intruder)))
    try:
        admin_conn.execute(sql.SQL("ALTER ROLE {} CREATEROLE").format(sql.Identifier(f"{owner}_app")))
        admin_conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner), sql.Identifier(intruder)))
        breach_is_drift_then_repaired((database, db, db_inputs), (user, app, inputs))
        assert role_facts(admin_conn, intruder)["member_of"] == []
        assert role_facts(admin_conn, f"{owner}_app")["member_of"] == [owner]
        assert admin_conn.execute("SELECT rolcreaterole FROM pg_roles WHERE rolname = %s",
                                  (f"{owner}_app",)).fetchone() == (False,)
    finally:
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(intruder)))


def test_roles_from_outside_granted_to_tenant_roles_are_drift_and_taken_back(database, role, user, owner, admin_conn):
    """A predefined role (pg_read_server_files: any file the server can read) or another project's role
    granted to the project's login role or its group role: refresh reports `isolated: false`, the next
    up revokes it, and the user, a member of the login role, can no longer read server files. A grant
    between the project's own roles stays."""
    db_inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    db = database.create(db_inputs).outs
    role_inputs = role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs
    readers = role.create(role_inputs).outs
    app = user.create(user.check({}, props("postgres", "pg", "user", "app", owner)).inputs).outs
    other = f"{owner}x"  # another project's role
    admin_conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(other)))
    try:
        admin_conn.execute(sql.SQL("GRANT pg_read_server_files, {} TO {}").format(sql.Identifier(other), sql.Identifier(owner)))
        admin_conn.execute(sql.SQL("GRANT pg_execute_server_program TO {}").format(sql.Identifier(f"{owner}_readers")))
        admin_conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(f"{owner}_readers"), sql.Identifier(owner)))
        with connect(app) as conn:  # the user inherits it through the login role
            conn.execute("CREATE TEMP TABLE leak (line text)")
            assert conn.execute("COPY leak FROM '/etc/passwd'").rowcount > 0
        breach_is_drift_then_repaired((database, db, db_inputs), (role, readers, role_inputs))
        assert role_facts(admin_conn, owner)["member_of"] == [f"{owner}_readers"]
        assert role_facts(admin_conn, f"{owner}_readers")["member_of"] == []
        with connect(app) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TEMP TABLE leak (line text)")
            conn.execute("COPY leak FROM '/etc/passwd'")
    finally:
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(other)))


def test_the_admin_or_a_superuser_as_a_member_is_no_breach(database, owner, admin_conn):
    """PostgreSQL 16 makes a non-superuser admin a member of every role it creates; a superuser reaches
    everything anyway. Neither is drift, and neither is revoked."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    root = f"{owner}_root"
    admin_conn.execute(sql.SQL("CREATE ROLE {} SUPERUSER").format(sql.Identifier(root)))
    try:
        admin_conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner), sql.Identifier(root)))
        admin_conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(owner)))
        assert database.read("id", outs).outs["isolated"] is True
        database.update("id", outs, inputs)
        assert role_facts(admin_conn, root)["member_of"] == [owner]
    finally:
        admin_conn.execute(sql.SQL("REVOKE {} FROM CURRENT_USER").format(sql.Identifier(owner)))
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(root)))


def test_user_before_its_database_gets_a_placeholder_the_database_adopts(user, database, owner, admin_conn):
    outs = user.create(props("postgres", "pg", "user", "app", owner)).outs
    assert role_facts(admin_conn, owner)["login"] is False  # placeholder project role
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    assert role_facts(admin_conn, owner)["login"] is True
    with connect(outs) as conn, connect(db):
        assert conn.execute("SELECT current_database()").fetchone() == (owner,)


def test_user_placeholder_is_dropped_with_the_last_user(user, owner, admin_conn):
    outs = user.create(props("postgres", "pg", "user", "app", owner)).outs
    user.delete("id", {**outs, "purge": True})
    assert role_facts(admin_conn, f"{owner}_app") is None
    assert role_facts(admin_conn, owner) is None


def test_user_group_membership_updates_in_place(user, role, owner, admin_conn):
    role.create(props("postgres", "pg", "role", "readers", owner))
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner, {"role": "readers"})).inputs
    outs = user.create(inputs).outs
    assert role_facts(admin_conn, f"{owner}_app")["member_of"] == sorted([owner, f"{owner}_readers"])
    changed = {**inputs, "params": {**inputs["params"], "role": None, "connection_limit": 4}}
    assert user.diff("id", outs, changed).replaces == []
    outs = user.update("id", outs, changed).outs
    facts = role_facts(admin_conn, f"{owner}_app")
    assert facts["member_of"] == [owner] and facts["limit"] == 4


def test_user_naming_a_missing_group_changes_nothing(user, owner, admin_conn):
    with pytest.raises(InvalidSpec, match="params.role names 'readers'.*does not exist.*kind: role, name: readers"):
        user.create(props("postgres", "pg", "user", "app", owner, {"role": "readers"}))
    assert role_facts(admin_conn, f"{owner}_app") is None and role_facts(admin_conn, owner) is None


@pytest.mark.parametrize("policy", ["predictable", "generated"])
def test_user_rotation_changes_the_password_in_place(user, database, owner, policy):
    database.create(props("postgres", "pg", "database", owner, owner))
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner, credentials=policy)).inputs
    outs = user.create(inputs).outs
    kept = user.update("id", outs, {**inputs, "params": {**inputs["params"], "connection_limit": 9}}).outs
    assert kept["password"] == outs["password"]  # no rotation asked: the password stays
    rotated_inputs = {**inputs, "params": {**inputs["params"], "connection_limit": 9, "rotation": 1}}
    diff = user.diff("id", kept, rotated_inputs)
    assert diff.changes and diff.replaces == []
    rotated = user.update("id", kept, rotated_inputs).outs
    assert rotated["password"] != outs["password"]
    with connect(rotated):
        pass
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(outs)
    again = user.update("id", rotated, rotated_inputs).outs  # same rotation value: no new password
    assert again["password"] == rotated["password"]


def test_user_predictable_rotation_is_a_derivation(configure, owner, cleanup):
    first, second = configure(User()), configure(User())  # two processes compute the same password
    inputs = props("postgres", "pg", "user", "app", owner, {"rotation": "2025-q3"})
    assert first.create(inputs).outs["password"] == second.create(inputs).outs["password"]


def test_user_drift_membership_login_limit_and_drop(user, owner, admin_conn):
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner)).inputs
    outs = user.create(inputs).outs
    name = sql.Identifier(f"{owner}_app")
    admin_conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(owner), name))
    admin_conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN CONNECTION LIMIT 1").format(name))
    refreshed = user.read("id", outs).outs
    assert refreshed["member_of"] == [] and refreshed["login"] is False
    assert refreshed["params"]["connection_limit"] == 1
    diff = user.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    user.update("id", refreshed, inputs)
    facts = role_facts(admin_conn, f"{owner}_app")
    assert (facts["member_of"], facts["login"], facts["limit"]) == ([owner], True, -1)
    admin_conn.execute(sql.SQL("DROP ROLE {}").format(name))
    assert user.read("id", outs).id == ""


def test_user_retained_then_purged_keeps_its_tables_with_the_project(user, database, owner, admin_conn):
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    outs = user.create(props("postgres", "pg", "user", "app", owner)).outs
    with connect(outs) as conn:
        conn.execute("CREATE TABLE made_by_user (id int)")
    user.delete("id", outs)
    assert role_facts(admin_conn, f"{owner}_app") is not None
    user.delete("id", {**outs, "purge": True})
    assert role_facts(admin_conn, f"{owner}_app") is None
    with connect(db) as conn:  # the table stays, handed to the project's role
        assert conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'made_by_user'").fetchone() == (owner,)


def test_user_conflicts_change_nothing(user, role, owner, admin_conn):
    user.create(props("postgres", "pg", "user", "b_c", owner))
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
        user.create(props("postgres", "pg", "user", "c", f"{owner}_b"))
    # The same engine name declared as a role of the same project.
    with pytest.raises(Conflict, match="already exists as project .*'s user, not as a role") as refused:
        role.create(props("postgres", "pg", "role", "b_c", owner))
    assert "if this declaration was that user before its kind changed, drop the user first" in refused.value.hint
    assert role_facts(admin_conn, f"{owner}_b_c")["login"] is True
    # The project's role taken by something devstack does not manage.
    other = f"{owner}x"
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(other)))
    with pytest.raises(Conflict, match="project's role .* devstack does not manage"):
        user.create(props("postgres", "pg", "user", "app", other))
    assert role_facts(admin_conn, f"{other}_app") is None


def test_user_bad_params_name_the_field(user, owner):
    failures = check_failures(user, props("postgres", "pg", "user", "app", owner,
                                          {"rotation": True, "connectionLimit": "many", "password": "x"}))
    assert set(failures) == {"params.rotation", "params.connectionLimit", "params.password"}
    assert "integer or a non-empty string" in failures["params.rotation"]
    assert check_failures(user, props("postgres", "pg", "user", "app", owner, {"rotation": ""})) == {
        "params.rotation": failures["params.rotation"]}
    assert User.references == {"role": "role", "database": "database"}


# --- predictable credentials: the project's name (spec 27) ------------------------------


@pytest.fixture
def acme(configure, admin_conn):
    """Project `acme` of spec 27's example on a server where nothing else holds that name; purged after."""
    if admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'acme'").fetchone():
        pytest.skip("project acme is up on this server (examples/acme?): not this test's to take or drop")
    database = configure(Database())
    inputs = database.check({}, props("postgres", "pg", "database", "acme", "acme", purge=True)).inputs
    yield database, inputs
    database.delete("id", inputs)


def test_a_predictable_database_logs_in_with_the_dsn_spec_27_documents(acme):
    database, inputs = acme
    outs = database.create(inputs).outs
    assert (outs["user"], outs["password"], outs["database"]) == ("acme", "acme", "acme")
    with psycopg.connect("postgres://acme:acme@127.0.0.1:25432/acme", connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("acme", "acme")


def test_a_predictable_user_logs_in_with_the_project_name(user, database, owner):
    database.create(props("postgres", "pg", "database", owner, owner))
    outs = user.create(user.check({}, props("postgres", "pg", "user", "app", owner)).inputs).outs
    assert (outs["user"], outs["password"]) == (f"{owner}_app", owner)
    with connect(outs) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (f"{owner}_app",)


def test_a_database_an_earlier_release_made_keeps_its_hashed_password(database, owner):
    """Earlier releases derived `dev-<sha256>`, which the project's services hold: a re-up, a refresh, an
    update and a second database of the project keep it; a `rotation` moves it to the project's name."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    hashed = hashed_password(Identity.from_props(inputs), owner)
    with psycopg.connect(**PG, user=outs["user"], password=outs["password"], dbname=owner, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(owner), sql.Literal(hashed)))
    earlier = {**outs, "password": hashed}  # the server and the state as an earlier release's create left them
    assert database.diff("id", earlier, inputs).changes is False
    assert database.read("id", earlier).outs == earlier  # no drift
    changed = {**inputs, "params": {**inputs["params"], "connection_limit": 7}}
    updated = database.update("id", earlier, changed).outs
    assert updated["password"] == hashed
    second = database.create(database.check({}, props("postgres", "pg", "database", f"{owner}_logs", owner)).inputs).outs
    assert second["password"] == hashed
    for outs_ in (updated, second):
        connect(outs_).close()
    opted = database.update("id", updated, {**changed, "params": {**changed["params"], "rotation": 0}}).outs
    assert opted["password"] == owner
    connect(opted).close()
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(updated)


# --- isolation and concurrency ------------------------------------------------------


@pytest.mark.parametrize("server_db", ["postgres", "template1"])
def test_tenants_cannot_connect_to_the_servers_databases_and_a_start_closes_them_again(database, owner, admin,
                                                                                       admin_conn, server_db):
    """Every database grants PUBLIC CONNECT when made, `postgres` and `template1` too: the engine revokes it
    on each start (here a start of the running server, which only re-checks it), idempotently; the admin,
    a superuser, still connects there."""
    from tools.engines.postgres import ENGINE

    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    refused = f'permission denied for database "{server_db}"'
    with pytest.raises(psycopg.OperationalError, match=refused):
        connect(mine, server_db)
    grant = sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(server_db))
    admin_conn.execute(grant)  # PostgreSQL's default, as on a server devstack does not run
    try:
        connect(mine, server_db).close()
        assert "already running" in ENGINE.start(admin["postgres"])
    finally:
        closed_here = ENGINE.close_maintenance_database()
    assert closed_here == []  # the start had closed it; a second run changes nothing
    with pytest.raises(psycopg.OperationalError, match=refused):
        connect(mine, server_db)
    connect(mine).close()
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname=server_db) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (admin["postgres"].user,)


def test_users_of_one_project_cannot_reach_another_projects_database(user, database, owner):
    other = f"{owner}b"
    database.create(props("postgres", "pg", "database", owner, owner))
    db_b = database.create(props("postgres", "pg", "database", other, other)).outs
    user_a = user.create(props("postgres", "pg", "user", "app", owner)).outs
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect(user_a, db_b["database"])
    with connect(user_a) as conn:  # nor act as B's role inside its own database
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other)))


def test_grants_from_another_projects_database_never_block_a_purge(database, user, owner, admin_conn):
    """A tenant may grant its tables to any role, another project's too: that project's purge must still
    drop its roles (LOGIN, with a password), not fail on the grant at every up."""
    other = f"{owner}b"
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    theirs = database.create(props("postgres", "pg", "database", other, other)).outs
    their_user = user.create(props("postgres", "pg", "user", "app", other)).outs
    with connect(mine) as tenant:
        tenant.execute("CREATE TABLE bait (x int)")
        tenant.execute(sql.SQL("GRANT SELECT ON bait TO {}, {}").format(sql.Identifier(other), sql.Identifier(their_user["user"])))
    user.delete("id", {**their_user, "purge": True})
    database.delete("id", {**theirs, "purge": True})
    left = admin_conn.execute("SELECT rolname FROM pg_roles WHERE rolname IN (%s, %s)", (other, their_user["user"]))
    assert left.fetchall() == []
    with connect(mine) as tenant:  # the granting project's table stays
        assert tenant.execute("SELECT count(*) FROM bait").fetchone() == (0,)


def _bait_for(mine: dict, grantee: str) -> None:
    with connect(mine) as tenant:
        tenant.execute("CREATE TABLE bait (x int)")
        tenant.execute(sql.SQL("GRANT SELECT ON bait TO {}").format(sql.Identifier(grantee)))


def _whole(admin_conn, outs: dict) -> bool:
    """The database and its LOGIN role both still there."""
    return _database_exists(admin_conn, outs["database"]) and role_facts(admin_conn, outs["user"]) is not None


@pytest.mark.timeout(120)
def test_a_lock_another_project_holds_fails_a_purge_whole_and_soon(database, owner, admin_conn):
    """A tenant may hold a lock on what it granted another project's role, for as long as it likes: that
    project's purge waits a bounded time (it holds the instance's DDL lock meanwhile), then fails as a
    Conflict naming the database, with its own database and role left whole for the next try."""
    other = f"{owner}b"
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    theirs = database.create(props("postgres", "pg", "database", other, other)).outs
    _bait_for(mine, other)
    holder = connect(mine)
    holder.autocommit = False
    holder.execute("LOCK TABLE bait IN ACCESS EXCLUSIVE MODE")
    holder.execute(sql.SQL("GRANT INSERT ON bait TO {}").format(sql.Identifier(other)))
    release = threading.Timer(40, holder.rollback)  # without a bound the purge would wait for this
    release.start()
    try:
        with pytest.raises(Conflict) as refused:
            database.delete("id", {**theirs, "purge": True})
        assert repr(owner) in str(refused.value) and _whole(admin_conn, theirs)
    finally:
        release.cancel()
        holder.rollback()
        holder.close()
    database.delete("id", {**theirs, "purge": True})  # the lock gone, the purge goes through
    assert not _database_exists(admin_conn, other) and role_facts(admin_conn, other) is None


@pytest.mark.timeout(120)
def test_a_grant_another_project_has_not_committed_fails_the_purge_soon_and_a_rerun_finishes(database, owner, admin_conn):
    """A grant to another project's role not yet committed is invisible to the release but holds the role:
    its DROP ROLE waits a bounded time and fails as a Conflict saying its database is dropped and how the
    rerun drops the role; once the grant is committed, the rerun takes it back and drops the role."""
    other = f"{owner}b"
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    theirs = database.create(props("postgres", "pg", "database", other, other)).outs
    with connect(mine) as tenant:
        tenant.execute("CREATE TABLE bait (x int)")
    holder = connect(mine)
    holder.autocommit = False
    holder.execute(sql.SQL("GRANT SELECT ON bait TO {}").format(sql.Identifier(other)))
    release = threading.Timer(40, holder.rollback)  # without a bound the purge would wait for this
    release.start()
    try:
        with pytest.raises(Conflict, match="the database was dropped and its login role is left"):
            database.delete("id", {**theirs, "purge": True})
        assert not _database_exists(admin_conn, other) and role_facts(admin_conn, other) is not None
    finally:
        release.cancel()
        holder.commit()  # the grant lands now
        holder.close()
    database.delete("id", {**theirs, "purge": True})  # the rerun: the role goes, grant and all
    assert role_facts(admin_conn, other) is None


def test_a_database_closed_to_sessions_fails_another_projects_purge_whole(database, owner, admin_conn):
    """Its owner may close its database to every session after granting another project's role something
    there: that grant cannot be taken back, so the other project's purge fails as a Conflict naming it
    (not as its engine being down) before dropping anything."""
    other = f"{owner}b"
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    theirs = database.create(props("postgres", "pg", "database", other, other)).outs
    _bait_for(mine, other)
    as_tenant(mine, "ALTER DATABASE {} ALLOW_CONNECTIONS false", admin_conn)
    with pytest.raises(Conflict) as refused:
        database.delete("id", {**theirs, "purge": True})
    assert "refuses every session" in str(refused.value) and _whole(admin_conn, theirs)
    database.update("id", database.read("id", mine).outs, props("postgres", "pg", "database", owner, owner))
    database.delete("id", {**theirs, "purge": True})
    assert not _database_exists(admin_conn, other) and role_facts(admin_conn, other) is None


def test_a_database_marker_its_owner_rewrote_is_drift_and_decides_no_owner(database, owner, admin_conn):
    """The database's owner may COMMENT on it: the owner is read from its role's marker, which only the
    admin can write. A comment naming another project, or any text, is drift the next up writes over."""
    from devstack.scan import scan

    inputs = props("postgres", "pg", "database", owner, owner, purge=True, stack="ours@c0ffee")
    outs = database.create(inputs).outs
    for forged in (json.dumps({"managed-by": "devstack", "owner": f"{owner}b", "stack": "ours@c0ffee"}), "my app db"):
        with connect(outs) as tenant:
            tenant.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(owner), sql.Literal(forged)))
        refreshed = database.read("id", outs).outs  # not gone: still the project's by its role
        assert refreshed["marked"] is False and database.diff("id", refreshed, inputs).changes
        found = [f for f in scan(database._instances["pg"], {"database"}) if f.engine_name == owner]
        assert [(f.owner, f.stack) for f in found] == [(owner, "ours@c0ffee")] and found[0].doubt
    database.update("id", refreshed, inputs)
    assert database.read("id", outs).outs["marked"] is True
    database.delete("id", refreshed)
    assert not _database_exists(admin_conn, owner)


def test_a_database_records_its_workspace_where_its_owner_cannot_write(database, owner, admin_conn):
    """Its owner may name another workspace in its COMMENT, or set `devstack.workspace` on its database
    or its own role there: none of it is the record (a setting of the admin's own role in the database),
    so none of it keeps the database from this workspace's purge."""
    inputs = props("postgres", "pg", "database", owner, owner, purge=True, stack="ours@c0ffee")
    outs = database.create(inputs).outs
    forged = json.dumps({"managed-by": "devstack", "owner": owner, "stack": "elsewhere@000000000000"})
    with connect(outs) as tenant:
        tenant.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(owner), sql.Literal(forged)))
        for attempt in ("ALTER DATABASE {db} SET devstack.workspace = 'elsewhere@000000000000'",
                        "ALTER ROLE {role} IN DATABASE {db} SET devstack.workspace = 'elsewhere@000000000000'"):
            try:  # refused by the server, or recorded where devstack does not read
                tenant.execute(sql.SQL(attempt).format(db=sql.Identifier(owner), role=sql.Identifier(outs["user"])))
            except psycopg.errors.InsufficientPrivilege:
                pass
    assert database.observe(database._instances["pg"], Identity.from_props(inputs)).workspace == "ours@c0ffee"
    database.delete("id", outs)
    assert not _database_exists(admin_conn, owner)


@pytest.mark.timeout(120)
def test_a_lock_a_tenant_holds_on_its_own_database_fails_a_change_soon(database, owner, admin_conn):
    """A transaction left open on the project's own database (a COMMENT, say) holds a lock every ALTER
    DATABASE needs: the change waits a bounded time under the DDL lock, then is a Conflict, and other
    changes go on."""
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    holder = connect(mine)
    holder.autocommit = False
    holder.execute(sql.SQL("COMMENT ON DATABASE {} IS 'mine'").format(sql.Identifier(owner)))
    release = threading.Timer(40, holder.rollback)
    release.start()
    try:
        changed = props("postgres", "pg", "database", owner, owner, {"connection_limit": 8})
        with pytest.raises(Conflict, match="held a lock this change needs"):
            database.update("id", mine, database.check({}, changed).inputs)
        database.create(props("postgres", "pg", "database", f"{owner}b", f"{owner}b"))  # the DDL lock is free
    finally:
        release.cancel()
        holder.rollback()
        holder.close()


@pytest.mark.timeout(120)
def test_a_tenants_open_transaction_fails_an_extension_change_soon(database, owner, admin_conn):
    """Extensions are made in a session of the project's own database, beside the one holding the DDL
    lock: a tenant's uncommitted CREATE EXTENSION there must not stall every stack's change until it ends."""
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    holder = connect(mine)
    holder.autocommit = False
    holder.execute("CREATE EXTENSION IF NOT EXISTS pgcrypto")
    release = threading.Timer(40, holder.rollback)
    release.start()
    started = time.monotonic()
    try:
        changed = props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto"]})
        with pytest.raises(Conflict, match="held a lock this change needs"):
            database.update("id", mine, database.check({}, changed).inputs)
        assert time.monotonic() - started < 20
        database.create(props("postgres", "pg", "database", f"{owner}b", f"{owner}b"))  # the DDL lock is free
    finally:
        release.cancel()
        holder.rollback()
        holder.close()


def test_a_tenants_database_settings_never_steer_the_admins_sessions(database, user, owner, admin_conn):
    """The owner of a database may `ALTER DATABASE ... SET` a role, read-only transactions or timeouts for
    every session there, the admin's too: another project's purge, which takes back what was granted to
    its user in this database, must run there as the admin and succeed."""
    other = f"{owner}b"
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    database.create(props("postgres", "pg", "database", other, other))
    their_user = user.create(props("postgres", "pg", "user", "app", other)).outs
    with connect(mine) as tenant:
        tenant.execute("CREATE TABLE bait (x int)")
        tenant.execute(sql.SQL("GRANT SELECT ON bait TO {}").format(sql.Identifier(their_user["user"])))
        for setting in (sql.SQL("role = {}").format(sql.Literal(other)), sql.SQL("default_transaction_read_only = on"),
                        sql.SQL("lock_timeout = 1"), sql.SQL("statement_timeout = 1"), sql.SQL("idle_session_timeout = 1"),
                        sql.SQL("local_preload_libraries = 'devstack_no_such_library'")):
            tenant.execute(sql.SQL("ALTER DATABASE {} SET ").format(sql.Identifier(owner)) + setting)
    user.delete("id", {**their_user, "purge": True})
    assert role_facts(admin_conn, their_user["user"]) is None
    assert database.read("id", mine).outs["isolated"] is True  # a refresh there reads as the admin


def test_two_stacks_in_parallel_never_collide(configure, owner, admin_conn, cleanup):
    """5 rounds x 4 threads: two provider instances (two stacks) race on one project's database, role and users.
    Each stack's `adopt` names the other for the project (else the second would be refused, as it should)."""
    rounds = 5
    stacks = []
    for index in range(2):
        adopt = dict.fromkeys((f"{owner}r{round_}" for round_ in range(rounds)), f"stack{1 - index}")
        stacks.append((configure(Database(), adopt), configure(Role(), adopt), configure(User(), adopt)))

    def one_stack(round_owner: str, thread: int) -> None:
        database, role, user = stacks[thread % 2]
        stack = f"stack{thread % 2}"
        database.create(props("postgres", "pg", "database", round_owner, round_owner, stack=stack))
        role.create(props("postgres", "pg", "role", "readers", round_owner, stack=stack))
        user.create(props("postgres", "pg", "user", f"u{thread}", round_owner, {"role": "readers"}, stack=stack))

    started = time.monotonic()
    for round_ in range(rounds):
        round_owner = f"{owner}r{round_}"
        with ThreadPoolExecutor(max_workers=4) as pool:
            for future in [pool.submit(one_stack, round_owner, thread) for thread in range(4)]:
                future.result()  # re-raises "already exists" / "tuple concurrently updated" if any
        for thread in range(4):
            facts = role_facts(admin_conn, f"{round_owner}_u{thread}")
            assert facts["member_of"] == sorted([round_owner, f"{round_owner}_readers"])
    print(f"5 rounds x 4 threads: {time.monotonic() - started:.2f}s")


# --- calls cut short ------------------------------------------------------------


def test_a_create_cut_between_create_database_and_its_marker_is_adopted(database, owner, admin_conn):
    """CREATE DATABASE runs outside any transaction: a cut before COMMENT leaves it bare, owned by the
    project's (marked) role. The next create finishes it instead of calling it foreign forever."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    admin_conn.execute(sql.SQL("COMMENT ON DATABASE {} IS NULL").format(sql.Identifier(owner)))
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(owner)))
    assert database.read("id", outs).id != ""  # the ledger keeps it
    adopted = database.create(inputs).outs
    assert adopted["isolated"] is True and database.read("id", adopted).outs["isolated"] is True
    marker = admin_conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                                (owner,)).fetchone()[0]
    assert json.loads(marker)["owner"] == owner
    # A bare database owned by anything else is still foreign.
    admin_conn.execute(sql.SQL("COMMENT ON DATABASE {} IS NULL").format(sql.Identifier(owner)))
    admin_conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO CURRENT_USER").format(sql.Identifier(owner)))
    with pytest.raises(Conflict, match="something devstack does not manage"):
        database.create(inputs)


@pytest.mark.parametrize("kind", ["database", "user"])
def test_a_connection_lost_mid_create_leaves_no_unmarked_role(kind, configure, cleanup, admin, owner, admin_conn,
                                                             local_workspace, monkeypatch):
    """The engine goes away between creating a role and marking it: EngineUnavailable (not a traceback),
    and no role without its marker, which every later up would refuse as foreign."""
    from providers import postgres
    from providers.errors import EngineUnavailable
    from tests.conftest import configured
    from tests.faults.proxy import Proxy

    proxy = Proxy(PG["port"]).start()
    workspace = {**local_workspace, "shared": {**local_workspace["shared"]}}
    workspace["shared"]["pg"] = {**workspace["shared"]["pg"], "port": proxy.port}
    provider = configured({"database": Database, "user": User}[kind](), workspace,
                          {engine: credential.password for engine, credential in admin.items()})
    comment_role = postgres._comment_role

    def cut_then_comment(conn, role, marker):
        proxy.stop()
        comment_role(conn, role, marker)

    monkeypatch.setattr(postgres, "_comment_role", cut_then_comment)
    name = owner if kind == "database" else "app"
    try:
        with pytest.raises(EngineUnavailable, match="it stopped answering in the middle of the call"):
            provider.create(provider.check({}, props("postgres", "pg", kind, name, owner)).inputs)
    finally:
        proxy.stop()
    roles = admin_conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (f"{owner}%",)).fetchall()
    assert roles == []


def test_a_drop_cut_after_drop_database_drops_the_role_when_run_again(database, owner, admin_conn):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, credentials="generated")).inputs
    database.create(inputs)
    admin_conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(owner)))  # the first drop, cut there
    database.delete("id", {**inputs, "purge": True})
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None


def test_a_wrong_admin_secret_says_to_check_it_not_to_start_the_engine(admin, local_workspace, owner):
    from providers.errors import EngineUnavailable
    from tests.conftest import configured

    passwords = {engine: credential.password for engine, credential in admin.items()}
    database = configured(Database(), local_workspace, {**passwords, "postgres": "not-the-admin-secret"})
    with pytest.raises(EngineUnavailable, match="password authentication failed") as refused:
        database.create(database.check({}, props("postgres", "pg", "database", owner, owner)).inputs)
    assert f"check devstack:{local_workspace['shared']['pg']['adminSecret']} in the stack config" in str(refused.value)


@pytest.mark.timeout(120)
def test_a_tenant_holding_the_ddl_lock_is_named_not_waited_on(database, owner, admin_conn):
    """Any role that may connect to the `postgres` database can take an advisory lock, devstack's DDL
    lock too: every change on the server would wait for it. It is a Conflict naming the session.

    The local engine closes `postgres` to tenants; a server devstack does not run may leave PUBLIC's
    CONNECT there, as granting it to this one role does."""
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect(mine, "postgres")
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE postgres TO {}").format(sql.Identifier(mine["user"])))
    with connect(mine, "postgres") as tenant:
        tenant.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK_KEY,))
        release = threading.Timer(40, lambda: tenant.execute("SELECT pg_advisory_unlock_all()"))
        release.start()  # without the check the create would wait for this
        try:
            with pytest.raises(Conflict, match=f"held by role '{owner}' \\(pid {tenant.info.backend_pid}\\)"):
                database.create(props("postgres", "pg", "database", f"{owner}b", f"{owner}b"))
            assert not _database_exists(admin_conn, f"{owner}b")
        finally:
            release.cancel()
    assert database.create(props("postgres", "pg", "database", f"{owner}b", f"{owner}b")).outs["database"] == f"{owner}b"


def test_a_server_out_of_connection_slots_is_named_as_such(database, owner, admin):
    """A tenant may open sessions until the server has none left (the admin's reserved ones taken too by
    other stacks' calls): that is said, not "start the engine"."""
    mine = database.create(props("postgres", "pg", "database", owner, owner)).outs
    held = []
    try:
        for login in ((mine["user"], mine["password"]),) * 200 + ((admin["postgres"].user, admin["postgres"].password),) * 10:
            try:
                held.append(psycopg.connect(**PG, user=login[0], password=login[1], dbname=owner, connect_timeout=5))
            except psycopg.OperationalError:
                continue  # this login's slots are all taken: the admin's reserved ones come next
        with pytest.raises(EngineUnavailable, match="out of connection slots") as refused:
            database.read("id", mine)
        assert "start it" not in str(refused.value)
    finally:
        for conn in held:
            conn.close()
    assert database.read("id", mine).outs["login"] is True


def test_a_database_declared_without_a_workspace_reads_back_unchanged(database, owner):
    """Its workspace record is then empty: recorded all the same, so a refresh finds nothing to write again."""
    inputs = database.check({}, {**props("postgres", "pg", "database", owner, owner), "stack": ""}).inputs
    outs = database.create(inputs).outs
    refreshed = database.read("id", outs).outs
    assert refreshed["marked"] is True and database.diff("id", refreshed, inputs).changes is False
