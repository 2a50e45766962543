"""The postgres `database` kind against the real local server."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql

from providers.credentials import hashed_password
from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import Identity
from providers.lifecycle import is_stale, without_clocks
from providers.postgres.database import Database, _database_exists
from tests.providers.conftest import props
from tests.providers.postgres.helpers import PG, as_tenant, check_failures, connect
from tools.engines.ports import PORTS


def test_create_then_create_again_adopts_without_change(database, owner, admin_conn):
    inputs = props("postgres", "pg", "database", owner, owner)
    first = database.create(inputs)
    second = database.create(inputs)  # run twice: same id, same predictable password
    assert first.id == second.id == f"postgres/pg/database/{owner}@{owner}"
    assert first.outs["password"] == second.outs["password"]
    with connect(first.outs) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (owner,)
    comment = admin_conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (owner,)
    ).fetchone()[0]
    assert '"owner": "' + owner + '"' in comment and '"managed-by": "devstack"' in comment


def test_public_cannot_connect(database, owner, admin_conn):
    database.create(props("postgres", "pg", "database", owner, owner))
    acl = admin_conn.execute("SELECT datacl::text FROM pg_database WHERE datname = %s", (owner,)).fetchone()[0]
    assert "=Tc/" not in acl and "=c/" not in acl  # no grant to PUBLIC (empty grantee)


def test_update_in_place_and_drift_detection(database, owner, admin_conn):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    changed = {**inputs, "params": {**outs["params"], "connection_limit": 7}}
    assert database.diff(outs["name"], outs, changed).replaces == []
    outs = database.update("id", outs, changed).outs
    limit = admin_conn.execute("SELECT datconnlimit FROM pg_database WHERE datname = %s", (owner,)).fetchone()
    assert limit == (7,)
    # Drift: changed behind Pulumi's back, read reports the live value.
    admin_conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 2").format(sql.Identifier(owner)))
    assert database.read("id", outs).outs["params"]["connection_limit"] == 2
    # Dropped behind Pulumi's back: read returns a blank id.
    admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(owner)))
    assert is_stale(database.read("id", outs).outs)


def test_retained_delete_keeps_data_and_purged_delete_drops(database, owner, admin_conn):
    outs = database.create(props("postgres", "pg", "database", owner, owner)).outs
    database.delete("id", outs)  # purge not asked for
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() == (1,)
    with connect(outs):  # a session open during a purge must not block it
        database.delete("id", {**outs, "purge": True})
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() is None
    database.delete("id", {**outs, "purge": True})  # already gone is fine


def test_database_of_another_project_is_a_conflict(database, owner, admin_conn):
    database.create(props("postgres", "pg", "database", owner, owner))
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
        database.create(props("postgres", "pg", "database", owner, "intruder"))


def test_foreign_database_is_a_conflict_and_untouched(database, owner, admin_conn):
    admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(owner)))
    with pytest.raises(Conflict, match="devstack does not manage"):
        database.create(props("postgres", "pg", "database", owner, owner))
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None


def test_a_project_whose_login_role_name_is_taken_is_told_to_rename_the_project(database, owner, admin_conn):
    """A role of the project's name that devstack does not manage (the server's own `postgres`, say): the
    database does not exist, so "choose another name for this resource" would not help."""
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(owner)))
    try:
        with pytest.raises(Conflict, match=f"its project's login role '{owner}' already exists .* something devstack "
                                           "does not manage .* the project needs another name"):
            database.create(props("postgres", "pg", "database", f"x_{owner}", owner))
        assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (f"x_{owner}",)).fetchone() is None
    finally:
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(owner)))


def test_a_renamed_stack_adds_a_database_though_the_login_role_keeps_the_old_name(database, owner, admin_conn):
    """An update re-marks a database, never its project's login role, whose marker keeps the stack's old
    name after `pulumi stack rename`: the new database of the renamed stack is not another workspace's."""
    first = database.create(props("postgres", "pg", "database", owner, owner, stack="local@abc")).outs
    database.update("id", first, {**first, "stack": "dev@abc"})  # the first up after the rename
    made = database.create(props("postgres", "pg", "database", f"{owner}-two", owner, stack="dev@abc")).outs
    try:
        assert made["user"] == first["user"]
    finally:
        database.delete("id", {**made, "purge": True})


def test_a_locale_the_server_lacks_is_invalid_spec_and_leaves_no_role(database, owner, admin_conn):
    """The server checks locales, not the model: refused, the call leaves nothing behind (a role without
    its database is invisible to gc). Check says so first, so the preview fails rather than the up."""
    result = database.check({}, props("postgres", "pg", "database", owner, owner, {"locale": "xx_YY.UTF-8"}))
    found = {f.property: f.reason for f in result.failures}
    assert "no locale 'xx_YY.UTF-8'" in found["params.locale"] and "the database was not made" in found["params.locale"]
    inputs = result.inputs
    with pytest.raises(InvalidSpec, match=r"params.locale 'xx_YY.UTF-8'.*set params.locale to a locale the server has"):
        database.create(inputs)
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() is None


def test_a_locale_the_server_lacks_fails_check_before_a_replacement_drops_the_database(database, owner, admin_conn):
    """A replacement deletes first: a new locale the server lacks must stop at check, the data kept."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, purge=True)).inputs
    outs = database.create(inputs).outs
    with connect(outs) as conn:
        conn.execute("CREATE TABLE kept (v int)")
    moved = props("postgres", "pg", "database", owner, owner, {"locale": "xx_YY.UTF-8"}, purge=True)
    found = {f.property: f.reason for f in database.check(inputs, moved).failures}
    assert "no locale 'xx_YY.UTF-8'" in found["params.locale"] and "not replaced" in found["params.locale"]
    assert database.check(inputs, props("postgres", "pg", "database", owner, owner, {"locale": "C"},
                                        purge=True)).failures == []
    with connect(outs) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)


def test_an_update_rechecks_the_owner_under_the_lock(database, owner, admin_conn, monkeypatch):
    """Dropped and made anew by another project between the update's observe and its DDL: theirs now,
    never given to this project's role (its purge would have dropped their data)."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    observe = database.observe

    def taken_meanwhile(*args):
        seen = observe(*args)
        name = sql.Identifier(owner)
        admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))
        admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
        admin_conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            name, sql.Literal(json.dumps({"managed-by": "devstack", "owner": "someone-else"}))))
        return seen

    monkeypatch.setattr(database, "observe", taken_meanwhile)
    with pytest.raises(Conflict, match="someone-else"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "connection_limit": 3}})
    owner_role = admin_conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                                    (owner,)).fetchone()[0]
    assert owner_role != owner


def test_an_update_of_a_database_dropped_meanwhile_says_to_refresh(database, owner, admin_conn, monkeypatch):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    observe = database.observe

    def dropped_meanwhile(*args):
        seen = observe(*args)
        admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(owner)))
        return seen

    monkeypatch.setattr(database, "observe", dropped_meanwhile)
    with pytest.raises(NotFound, match="it no longer exists.*run `pulumi refresh`"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "connection_limit": 3}})


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
    # admin can make): stale in this ledger; update and purge refuse to touch it.
    other = f"{owner}x"
    admin_conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(other)))
    admin_conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(
        sql.Identifier(other), sql.Literal(json.dumps({"managed-by": "devstack", "owner": other}))))
    admin_conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(owner), sql.Identifier(other)))
    assert is_stale(database.read("id", outs).outs)
    with pytest.raises(Conflict, match=f"belongs to project '{other}'.*nothing was changed"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "connection_limit": 3}})
    with pytest.raises(Conflict, match=f"belongs to project '{other}'.*nothing was dropped"):
        database.delete("id", {**outs, "purge": True})
    assert _database_exists(admin_conn, owner)


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
    with psycopg.connect(f"postgres://acme:acme@127.0.0.1:{PORTS['postgres']}/acme", connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("acme", "acme")


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
    assert without_clocks(database.read("id", earlier).outs) == without_clocks(earlier)  # no drift
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


def test_a_create_cut_between_create_database_and_its_marker_is_adopted(database, owner, admin_conn):
    """CREATE DATABASE runs outside any transaction: a cut before COMMENT leaves it bare, owned by the
    project's (marked) role. The next create finishes it instead of calling it foreign forever."""
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    outs = database.create(inputs).outs
    admin_conn.execute(sql.SQL("COMMENT ON DATABASE {} IS NULL").format(sql.Identifier(owner)))
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(owner)))
    assert not is_stale(database.read("id", outs).outs)  # the ledger keeps it, active
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


def test_a_drop_cut_after_drop_database_drops_the_role_when_run_again(database, owner, admin_conn):
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner, credentials="generated")).inputs
    database.create(inputs)
    admin_conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(owner)))  # the first drop, cut there
    database.delete("id", {**inputs, "purge": True})
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None


def test_a_database_declared_without_a_workspace_reads_back_unchanged(database, owner):
    """Its workspace record is then empty: recorded all the same, so a refresh finds nothing to write again."""
    inputs = database.check({}, {**props("postgres", "pg", "database", owner, owner), "stack": ""}).inputs
    outs = database.create(inputs).outs
    refreshed = database.read("id", outs).outs
    assert refreshed["marked"] is True and database.diff("id", refreshed, inputs).changes is False
