"""The postgres `role` kind against the real local server."""

from __future__ import annotations

import json

import pytest
from psycopg import sql

from providers.errors import Conflict, InvalidSpec
from providers.identity import PREFIXED
from providers.lifecycle import is_stale, without_clocks
from providers.postgres.role import Role
from tests.providers.conftest import props
from tests.providers.postgres.helpers import check_failures, connect, role_facts


def test_role_create_adopt_update_and_replace(role, owner, admin_conn):
    inputs = role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs
    first = role.create(inputs)
    assert first.id == f"postgres/pg/role/readers@{owner}"
    assert first.outs["role"] == f"{owner}_readers"
    facts = role_facts(admin_conn, f"{owner}_readers")
    assert facts["login"] is False and facts["inherit"] is True
    assert facts["marker"] == {"managed-by": "devstack", "owner": owner, "stack": "test", "kind": "role"}
    second = role.create(inputs)  # run twice: adopted, nothing changes
    assert without_clocks(second.outs) == without_clocks(first.outs)
    assert role_facts(admin_conn, f"{owner}_readers") == facts

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
    assert is_stale(role.read("id", outs).outs)  # another project's now: stale in this ledger
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        role.update("id", outs, inputs)
    admin_conn.execute(sql.SQL("DROP ROLE {}").format(name))
    assert is_stale(role.read("id", outs).outs)


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
