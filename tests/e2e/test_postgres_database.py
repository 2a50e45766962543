"""The walking skeleton end to end: the real CLI, our language host, a real PostgreSQL.

A two-project workspace on a temporary file backend goes through up,
preview (no changes), a second up (nothing changes), refresh after an
out-of-band change, removal of a declaration (retained) and purge (dropped).
"""

from __future__ import annotations

import json
import secrets

import psycopg
import pytest
from psycopg import sql
from pulumi import automation as auto

from tests.e2e.conftest import changes, e2e_stack, explicit_name, local_workspace, stored_state, write_project
from tools.engines.ports import PORTS

PG_PORT = PORTS["postgres"]



def connect(user: str, password: str, dbname: str) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=PG_PORT, user=user, password=password, dbname=dbname, connect_timeout=5)


def pg_instance(admin, host: str = "127.0.0.1") -> dict:
    return {"engine": "postgres", "host": host, "port": PG_PORT, "adminUser": admin["postgres"].user,
            "adminSecret": "pgAdmin"}


def database_exists(admin, name: str) -> bool:
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None




@pytest.fixture
def projects(admin):
    """Two fresh project names; whatever the test leaves behind is dropped afterwards."""
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        conn.autocommit = True
        for name in names:
            base = name.replace("-", "_")
            for database in (base, f"{base}_aux"):
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(base)))
        # The explicitly named user of `explicit_name(<project>, "app")`: the role itself.
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"app_{suffix}")))


def test_two_projects_up_preview_refresh_retain_purge(project_dir, offline_env, pulumi_command, admin, projects):
    a, b = projects
    db_a, db_b = (n.replace("-", "_") for n in projects)
    files = [
        write_project(project_dir, a, [{"uses": "pg", "kind": "database"}]),
        write_project(project_dir, b, [{"uses": "pg", "kind": "database", "credentials": "generated"}]),
    ]
    ws = local_workspace(project_dir, offline_env, pulumi_command)
    stack = auto.Stack.create("e2e", ws)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        "shared": {"pg": {"engine": "postgres", "host": "127.0.0.1", "port": PG_PORT,
                          "adminUser": admin["postgres"].user, "adminSecret": "pgAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:pgAdmin", auto.ConfigValue(admin["postgres"].password, secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 6}  # stack, workspace, 2 projects, 2 databases
    out_a = up.outputs[a].value["resources"]["pg/database/" + a]
    out_b = up.outputs[b].value["resources"]["pg/database/" + b]
    # Passwords are stored encrypted: the state holds ciphertext, never the value (a predictable one is
    # the project's name, known to all by design: spec 27's postgres://<project>:<project>@host/<project>).
    state_text = stored_state(offline_env, "e2e")
    assert out_a["password"] == a and out_b["password"] not in state_text
    databases = [r for r in json.loads(state_text)["checkpoint"]["latest"]["resources"]
                 if r["type"].endswith("postgres:database")]
    assert len(databases) == 2 and all("ciphertext" in r["outputs"]["password"] for r in databases)
    assert (out_a["database"], out_a["user"]) == (db_a, db_a)

    # Each project connects to its own database with its own role ...
    with connect(out_a["user"], out_a["password"], db_a) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (1)")
        conn.commit()
    with psycopg.connect(out_b["dsn"], connect_timeout=5) as conn:  # the composed export works as is
        assert conn.execute("SELECT current_database()").fetchone() == (db_b,)
    # ... and never to the other's.
    for user, password, other in [(out_a["user"], out_a["password"], db_b), (out_b["user"], out_b["password"], db_a)]:
        with pytest.raises(psycopg.OperationalError, match="permission denied"):
            connect(user, password, other)

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out-of-band change: refresh notices it, the next up repairs it.
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        conn.autocommit = True
        conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 3").format(sql.Identifier(db_a)))
    refresh = stack.refresh()
    assert changes(refresh) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        assert conn.execute("SELECT datconnlimit FROM pg_database WHERE datname = %s", (db_a,)).fetchone() == (-1,)

    # Removing a declaration retains the database and its data.
    write_project(project_dir, a, [])
    assert changes(stack.up()) == {"delete": 1}
    assert database_exists(admin, db_a)
    with connect(out_a["user"], out_a["password"], db_a) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)

    # Purge asked for explicitly, then removal: the database is dropped.
    write_project(project_dir, b, [{"uses": "pg", "kind": "database", "credentials": "generated", "purge": True}])
    assert changes(stack.up()) == {"update": 1}
    write_project(project_dir, b, [])
    assert changes(stack.up()) == {"delete": 1}
    assert not database_exists(admin, db_b)
    assert database_exists(admin, db_a)


def test_invalid_workspace_stops_before_anything_registers(project_dir, offline_env, pulumi_command, admin, projects):
    """Two bad entries: both reported with file and line, and the up creates no resource."""
    a, _ = projects
    files = [write_project(project_dir, a, [{"uses": "pg", "kind": "database"},
                                            {"uses": "nowhere", "kind": "database", "name": "x"},
                                            {"uses": "pg", "kind": "table"}])]
    ws = local_workspace(project_dir, offline_env, pulumi_command)
    stack = auto.Stack.create("bad", ws)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "bad",
        "shared": {"pg": {"engine": "postgres", "port": PG_PORT, "adminUser": admin["postgres"].user,
                          "adminSecret": "pgAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:pgAdmin", auto.ConfigValue(admin["postgres"].password, secret=True))
    with pytest.raises(auto.errors.CommandError) as failed:
        stack.up()
    text = str(failed.value)
    written = (project_dir / files[0]).read_text().splitlines()
    uses_line = written.index("  uses: nowhere") + 1
    kind_line = written.index("- kind: table") + 1
    assert f"{files[0]}:{uses_line}: resources[1].uses: names no shared instance" in text
    assert f"{files[0]}:{kind_line}: resources[2].kind: 'table' is not a kind of engine postgres" in text
    state = json.loads(stored_state(offline_env, "bad"))["checkpoint"]["latest"]
    assert [r["type"] for r in state.get("resources", [])] in ([], ["pulumi:pulumi:Stack"])
    assert not database_exists(admin, a.replace("-", "_"))


def test_a_new_spelling_of_the_same_database_keeps_it(project_dir, offline_env, pulumi_command, admin, projects):
    """`name: e2e_a_x` for what `e2e-a-x` made: another declaration (Pulumi creates it, then deletes
    the old one) of the same database. With purge, the old one's delete must not drop what the
    new one adopted: the database, its table and the ledger all stay."""
    a, _ = projects
    db_a = a.replace("-", "_")

    def declare(**extra) -> str:
        return write_project(project_dir, a, [{"uses": "pg", "kind": "database", "purge": True, **extra}])

    stack = e2e_stack(project_dir, offline_env, pulumi_command, {"pg": pg_instance(admin)}, [declare()],
                      {"pgAdmin": admin["postgres"].password})
    out = stack.up().outputs[a].value["resources"][f"pg/database/{a}"]
    with connect(out["user"], out["password"], db_a) as conn:
        conn.execute("CREATE TABLE kept (id int)")

    declare(name=db_a)
    renamed = stack.up()
    assert changes(renamed) == {"create": 1, "delete": 1}
    new = renamed.outputs[a].value["resources"][f"pg/database/{db_a}"]
    assert new["database"] == db_a
    with connect(new["user"], new["password"], db_a) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    assert changes(stack.refresh()) == {}
    assert changes(stack.up()) == {}

    # The same server under another instance name, its host spelled another way: kept as well.
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e", "shared": {"pg": pg_instance(admin), "pg2": pg_instance(admin, "localhost")},
        "projects": [write_project(project_dir, a, [{"uses": "pg2", "kind": "database", "purge": True, "name": db_a}])],
    })))
    moved = stack.up()
    assert changes(moved) == {"create": 1, "delete": 1}
    now = moved.outputs[a].value["resources"][f"pg2/database/{db_a}"]  # a predictable password per instance name
    with connect(now["user"], now["password"], db_a) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    assert changes(stack.refresh()) == {}


def test_a_user_replaced_with_its_database_is_made_again(project_dir, offline_env, pulumi_command, admin, projects):
    """The user moves to a database that is replaced in the same up (both purge): Pulumi replaces the
    user for its database, on its own; delete first, or the old user's drop removes the login the
    new one had just adopted while the ledger keeps it."""
    a, _ = projects
    db_a, app = a.replace("-", "_"), explicit_name(a, "app")

    def declare(locale: str, database: str) -> str:
        return write_project(project_dir, a, [
            {"uses": "pg", "kind": "database", "purge": True},
            {"uses": "pg", "kind": "database", "name": f"{a}-aux", "purge": True, "params": {"locale": locale}},
            {"uses": "pg", "kind": "user", "name": app, "purge": True, "params": {"database": database}},
        ])

    stack = e2e_stack(project_dir, offline_env, pulumi_command, {"pg": pg_instance(admin)}, [declare("C.UTF-8", a)],
                      {"pgAdmin": admin["postgres"].password})
    stack.up()

    declare("C", f"{a}-aux")
    up = stack.up()
    assert changes(up) == {"replace": 2}
    user = up.outputs[a].value["resources"][f"pg/user/{app}"]
    with connect(user["user"], user["password"], f"{db_a}_aux") as conn:  # the name itself, sanitized
        assert conn.execute("SELECT current_user").fetchone() == (app.replace("-", "_"),)
    assert changes(stack.refresh()) == {}


def test_purge_turned_off_while_replacing_is_refused_and_the_data_stays(project_dir, offline_env, pulumi_command,
                                                                        admin, projects):
    a, _ = projects
    db_a = a.replace("-", "_")

    def declare(**database) -> str:
        return write_project(project_dir, a, [{"uses": "pg", "kind": "database", **database}])

    stack = e2e_stack(project_dir, offline_env, pulumi_command, {"pg": pg_instance(admin)}, [declare(purge=True)],
                      {"pgAdmin": admin["postgres"].password})
    out = stack.up().outputs[a].value["resources"][f"pg/database/{a}"]
    with connect(out["user"], out["password"], db_a) as conn:
        conn.execute("CREATE TABLE kept (id int)")

    declare(purge=False, params={"locale": "C"})
    with pytest.raises(auto.errors.CommandError, match="set purge: false alone and run `pulumi up` first") as refused:
        stack.preview()
    assert "Traceback" not in str(refused.value)
    with pytest.raises(auto.errors.CommandError, match="its data would be dropped"):
        stack.up()
    with connect(out["user"], out["password"], db_a) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)


def test_a_stack_without_any_config_names_the_missing_key(project_dir, offline_env, pulumi_command):
    """`pulumi stack init` then `pulumi preview`: the message names devstack:workspace, no traceback."""
    stack = auto.Stack.create("bare", local_workspace(project_dir, offline_env, pulumi_command))
    with pytest.raises(auto.errors.CommandError) as refused:
        stack.preview()
    assert "devstack:workspace" in str(refused.value)
    assert "AttributeError" not in str(refused.value) and "Traceback" not in str(refused.value)
