"""The admin sessions against the real local server: errors named with their fix, sessions kept and reset,
the settings every admin session pins, and the DDL lock."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql

from providers.errors import Conflict, EngineUnavailable
from providers.postgres import client
from providers.postgres.client import DDL_LOCK_KEY, admin_connection
from providers.postgres.database import Database, _database_exists
from providers.postgres.role import Role
from providers.postgres.user import User
from tests.providers.conftest import props, stopped_answering
from tests.providers.postgres.helpers import PG, connect, role_facts


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
    monkeypatch.setattr(client, "ANSWER_LIMIT", 1.0)  # 60 s in earnest
    instance, proxy = through_proxy(Database(), "pg")
    with pytest.raises(EngineUnavailable, match=stopped_answering("postgres", "pg", proxy.port)) as stalled:
        with admin_connection(instance) as conn:
            proxy.stall()
            conn.execute("SELECT 1")
    assert stalled.value.cause.endswith("(no answer within 1s)")


def test_the_first_admin_session_of_a_process_has_the_idle_limit_too(configure, monkeypatch):
    """The server's version is learnt from the first session, which went out without the limit it needs."""
    monkeypatch.setattr(client, "_majors", {})
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance) as first, admin_connection(instance) as second:
        limits = [conn.execute("SHOW idle_session_timeout").fetchone()[0] for conn in (first, second)]
    assert limits == ["1min", "1min"]


def test_an_admin_session_left_idle_holding_the_ddl_lock_is_ended_by_the_server(configure, monkeypatch):
    """A provider whose client died without closing its socket (a machine gone) leaves its session idle on
    the server; holding the DDL lock, it stalled every stack's PostgreSQL change until TCP noticed: hours."""
    monkeypatch.setattr(client, "ADMIN_IDLE_LIMIT", "1s", raising=False)  # 60s in earnest
    instance = configure(Database())._instances["pg"]
    with admin_connection(instance):
        pass  # learns the server's version, as any earlier call would have
    changed = threading.Event()

    def change() -> None:
        with admin_connection(instance) as conn, client.ddl_lock(conn):
            changed.set()

    # Had it been devstack's own session, left idle by a slow step elsewhere, its next statement says so.
    with pytest.raises(EngineUnavailable, match=r"it ended this admin session after it sat idle for 1s .*run it again"):
        with admin_connection(instance) as silent:
            silent.execute("SELECT pg_advisory_lock(%s)", (client.DDL_LOCK_KEY,))  # then says nothing more
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
        first.execute("SELECT pg_advisory_lock(%s)", (client.DDL_LOCK_KEY,))
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
