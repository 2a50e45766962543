"""The postgres `user` kind against the real local server."""

from __future__ import annotations


import psycopg
import pytest
from psycopg import sql

from providers.errors import Conflict, InvalidSpec
from providers.lifecycle import is_stale, without_clocks
from providers.postgres.user import User
from tests.providers.conftest import props
from tests.providers.postgres.helpers import check_failures, connect, role_facts


def test_user_joins_project_role_and_reaches_the_project_database(user, database, owner, admin_conn):
    db = database.create(props("postgres", "pg", "database", owner, owner)).outs
    inputs = user.check({}, props("postgres", "pg", "user", "app", owner)).inputs
    first = user.create(inputs)
    assert first.outs["user"] == f"{owner}_app" and first.outs["database"] == owner
    second = user.create(inputs)  # adoption: same predictable password, no change
    assert without_clocks(second.outs) == without_clocks(first.outs)
    facts = role_facts(admin_conn, f"{owner}_app")
    assert facts["login"] is True and facts["member_of"] == [owner]
    assert facts["marker"]["kind"] == "user" and facts["marker"]["owner"] == owner
    with connect(db) as conn:  # the schema, made with the database's own credentials
        conn.execute("CREATE TABLE events (id int)")
    with connect(first.outs) as conn:  # CONNECT and table privileges through membership of the owner role
        conn.execute("INSERT INTO events VALUES (1)")
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1,)


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
    assert is_stale(user.read("id", outs).outs)


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


def test_a_predictable_user_logs_in_with_the_project_name(user, database, owner):
    database.create(props("postgres", "pg", "database", owner, owner))
    outs = user.create(user.check({}, props("postgres", "pg", "user", "app", owner)).inputs).outs
    assert (outs["user"], outs["password"]) == (f"{owner}_app", owner)
    with connect(outs) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (f"{owner}_app",)


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
