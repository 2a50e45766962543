"""What the postgres kinds share about roles, against the real local server: a login's drift, a role kept
inside its project, the release of a role another project granted something, a create cut short."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg import sql

from providers.errors import Conflict
from providers.postgres.database import Database, _database_exists
from providers.postgres.user import User
from tests.providers.conftest import props
from tests.providers.postgres.helpers import PG, as_tenant, connect, role_facts


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


@pytest.mark.parametrize("kind", ["database", "user"])
def test_a_connection_lost_mid_create_leaves_no_unmarked_role(kind, configure, cleanup, admin, owner, admin_conn,
                                                             local_workspace, monkeypatch):
    """The engine goes away between creating a role and marking it: EngineUnavailable (not a traceback),
    and no role without its marker, which every later up would refuse as foreign."""
    from providers.postgres import roles
    from providers.errors import EngineUnavailable
    from tests.conftest import configured
    from tests.faults.proxy import Proxy

    proxy = Proxy(PG["port"]).start()
    workspace = {**local_workspace, "shared": {**local_workspace["shared"]}}
    workspace["shared"]["pg"] = {**workspace["shared"]["pg"], "port": proxy.port}
    provider = configured({"database": Database, "user": User}[kind](), workspace,
                          {engine: credential.password for engine, credential in admin.items()})
    comment_role = roles.comment_role

    def cut_then_comment(conn, role, marker):
        proxy.stop()
        comment_role(conn, role, marker)

    monkeypatch.setattr(roles, "comment_role", cut_then_comment)
    name = owner if kind == "database" else "app"
    try:
        with pytest.raises(EngineUnavailable, match="it stopped answering in the middle of the call"):
            provider.create(provider.check({}, props("postgres", "pg", kind, name, owner)).inputs)
    finally:
        proxy.stop()
    roles = admin_conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (f"{owner}%",)).fetchall()
    assert roles == []
