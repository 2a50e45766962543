"""The postgres `database` kind against the real local server."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest
from psycopg import sql

from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound
from providers import postgres
from providers.postgres import Database, admin_connection
from tests.conftest import configured
from tests.providers.conftest import props, stopped_answering

PG = {"host": "127.0.0.1", "port": 25432}


@pytest.fixture
def admin_conn(admin):
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", autocommit=True) as conn:
        yield conn


@pytest.fixture
def database(configure, owner, admin_conn):
    """A configured provider; drops whatever the test created, retained or not."""
    yield configure(Database())
    name = sql.Identifier(owner)
    admin_conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
    admin_conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))


def connect(outs: dict, dbname: str | None = None) -> psycopg.Connection:
    return psycopg.connect(**PG, user=outs["user"], password=outs["password"],
                           dbname=dbname or outs["database"], connect_timeout=5)


def test_an_admin_that_is_not_a_superuser_is_refused_before_anything_is_made(owner, admin_conn):
    """CREATEDB and CREATEROLE (managed PostgreSQL's admin) fell short part-way through an up, with a
    traceback, leaving login roles that only a superuser could drop. Said at once now, by the provider
    and by the doctor."""
    from pydantic import SecretStr

    from devstack import doctor
    from providers.errors import Unsupported
    from providers.instances import SharedInstance

    manager, password = f"{owner}_mgr", "mgr-secret-1"
    admin_conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEDB CREATEROLE PASSWORD {}").format(
        sql.Identifier(manager), sql.Literal(password)))
    # Managed PostgreSQL lets its admin into `postgres`; the local engine closes it to all but superusers.
    admin_conn.execute(sql.SQL("GRANT CONNECT ON DATABASE postgres TO {}").format(sql.Identifier(manager)))
    try:
        shared = {"pg": {"engine": "postgres", **PG, "adminUser": manager, "adminSecret": "pgAdmin"}}
        provider = configured(Database(), {"shared": shared}, {"postgres": password})
        with pytest.raises(Unsupported, match=f"its admin role '{manager}' is not a superuser.*give '{manager}' SUPERUSER"):
            provider.create(props("postgres", "pg", "database", owner, owner))
        assert admin_conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (owner,)).fetchone()[0] == 0
        instance = SharedInstance(name="pg", engine="postgres", adminUser=manager, adminSecret="pgAdmin",
                                  admin_password=SecretStr(password), **PG)
        health = doctor.check_instance(instance, ["database"], local_port=None)
        assert (health.ok, health.admin) == (False, False) and "is not a superuser" in health.problem
        assert "SUPERUSER" in health.fix
    finally:
        admin_conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE postgres FROM {}").format(sql.Identifier(manager)))
        for role in (owner, manager):  # the project's, had it been made (as it was before the fix)
            admin_conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


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
    assert database.read("id", outs).id == ""


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


def test_engine_down_names_engine_address_and_fix(configure, owner, local_workspace):
    provider = configure(Database())
    provider._instances["pg"] = provider._instances["pg"].model_copy(update={"port": 1})
    with pytest.raises(EngineUnavailable, match=r"postgres instance 'pg' at 127\.0\.0\.1:1.*tools\.engines start postgres"):
        provider.create(props("postgres", "pg", "database", owner, owner))


def test_a_database_missing_at_the_connect_is_not_told_to_start_the_server(configure):
    """The server answered that the database is not there, and the fix offered was to start the server."""
    instance = configure(Database())._instances["pg"]
    with pytest.raises(EngineUnavailable) as missing:
        with admin_connection(instance, "devstack_never_made"):
            pass
    assert 'database "devstack_never_made" does not exist' in str(missing.value)
    assert "dropped meanwhile" in str(missing.value) and "tools.engines start" not in str(missing.value)


def test_a_server_gone_in_the_middle_of_a_call_is_named_with_its_fix(through_proxy):
    """Not only at the connect: a server that goes away under an open connection is the engine's error."""
    instance, proxy = through_proxy(Database(), "pg")
    with pytest.raises(EngineUnavailable, match=stopped_answering("postgres", "pg", proxy.port)):
        with admin_connection(instance) as conn:
            proxy.stop()
            conn.execute("SELECT 1")


def test_a_server_that_stops_answering_without_closing_is_named_not_waited_on_for_ever(through_proxy, monkeypatch):
    """A server stopped (SIGSTOP) or cut off by a partition keeps the connection open: every admin statement
    had waited on it with no end, a `pulumi up` and the `devstack` verbs alike, holding the DDL lock."""
    monkeypatch.setattr(postgres, "ANSWER_LIMIT", 1.0)  # 60 s in earnest
    instance, proxy = through_proxy(Database(), "pg")
    with pytest.raises(EngineUnavailable, match=stopped_answering("postgres", "pg", proxy.port)) as stalled:
        with admin_connection(instance) as conn:
            proxy.stall()
            conn.execute("SELECT 1")
    assert stalled.value.cause.endswith("(no answer within 1s)")


def test_the_first_admin_session_of_a_process_has_the_idle_limit_too(configure, monkeypatch):
    """The server's version is learnt from the first session, which went out without the limit it needs."""
    monkeypatch.setattr(postgres, "_majors", {})
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance) as first, admin_connection(instance) as second:
        limits = [conn.execute("SHOW idle_session_timeout").fetchone()[0] for conn in (first, second)]
    assert limits == ["1min", "1min"]


def test_an_admin_session_left_idle_holding_the_ddl_lock_is_ended_by_the_server(configure, monkeypatch):
    """A provider whose client died without closing its socket (a machine gone) leaves its session idle on
    the server; holding the DDL lock, it stalled every stack's PostgreSQL change until TCP noticed: hours."""
    monkeypatch.setattr(postgres, "ADMIN_IDLE_LIMIT", "1s", raising=False)  # 60s in earnest
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance):
        pass  # learns the server's version, as any earlier call would have
    changed = threading.Event()

    def change() -> None:
        with admin_connection(instance) as conn, postgres.ddl_lock(conn):
            changed.set()

    # Had it been devstack's own session, left idle by a slow step elsewhere, its next statement says so.
    with pytest.raises(EngineUnavailable, match=r"it ended this admin session after it sat idle for 1s .*run it again"):
        with admin_connection(instance) as silent:
            silent.execute("SELECT pg_advisory_lock(%s)", (postgres.DDL_LOCK_KEY,))  # then says nothing more
            threading.Thread(target=change, daemon=True).start()
            try:
                assert changed.wait(15), "the change still waits for the idle session's DDL lock"
            finally:
                if not changed.is_set():
                    with admin_connection(instance) as admin:
                        admin.execute("SELECT pg_terminate_backend(%s)", (silent.info.backend_pid,))
                changed.wait(5)
            silent.execute("SELECT 1")


def _pid(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def test_the_next_admin_call_gets_the_last_ones_session_reset(configure, admin_conn):
    """A session per call cost the server a backend and the provider a login, twice per database created.
    Kept, it must not carry anything of the call before: the DDL lock, a changed setting."""
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance):
        pass  # learns the server's version, as any earlier call would have
    with admin_connection(instance) as first:
        pid, pinned = _pid(first), first.execute("SHOW search_path").fetchone()[0]
        first.execute("SET lock_timeout = '7s'")
        first.execute("SET search_path = public")
        first.execute("SELECT pg_advisory_lock(%s)", (postgres.DDL_LOCK_KEY,))
    with admin_connection(instance) as second:
        assert _pid(second) == pid
        assert second.execute("SHOW lock_timeout").fetchone()[0] == "0"
        assert second.execute("SHOW search_path").fetchone()[0] == pinned != "public"  # as pinned at login
        assert second.execute("SHOW idle_session_timeout").fetchone()[0] == "1min"
    held = admin_conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (pid,))
    assert held.fetchone()[0] == 0


def test_a_kept_session_the_server_ended_is_not_handed_out(configure, admin_conn):
    """Ended meanwhile (a restart, pg_terminate_backend, its idle limit): the next call gets a new one that works."""
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance):
        pass
    with admin_connection(instance) as conn:
        pid = _pid(conn)
    admin_conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    with admin_connection(instance) as conn:
        assert _pid(conn) != pid


def test_a_session_whose_call_failed_is_not_kept(configure):
    """Its state is whatever the failure left (a transaction open, a lock): closed, never handed to the next call."""
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance):
        pass
    with pytest.raises(psycopg.errors.UndefinedTable):
        with admin_connection(instance) as conn:
            pid = _pid(conn)
            conn.execute("SELECT * FROM devstack_no_such_table")
    with admin_connection(instance) as conn:
        assert _pid(conn) != pid


def test_a_host_that_names_no_address_is_a_config_fix_not_a_start(configure, owner):
    """A typo in the host (`127.0.0.l`) is not an engine that is down: starting it would not help."""
    provider = configure(Database())
    provider._instances["pg"] = provider._instances["pg"].model_copy(update={"host": "127.0.0.l"})
    with pytest.raises(EngineUnavailable, match=r"'127\.0\.0\.l' names no address: fix shared\.pg\.host in the stack config"):
        provider.create(props("postgres", "pg", "database", owner, owner))


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
