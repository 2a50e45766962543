"""The same ledger commands on Pulumi's `postgres://` backend (a shared team ledger).

pulumi v3.260.0 ships the backend (pkg/backend/diy/postgres, table
`pulumi_state`). A dedicated database on the local PostgreSQL, made with the
admin credential and dropped afterwards, holds the state.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pulumi import automation as auto

from devstack import ledger
from providers.identity import Identity
from tests.devstack.conftest import (
    PG_PORT,
    Sandbox,
    import_state,
    synthetic_resources,
    token,
)


@contextmanager
def postgres_backend(admin, prefix: str = "ledger"):
    """A `postgres://` backend in a new database of the local PostgreSQL: (url, connect, database); dropped after."""
    a = admin["postgres"]
    database = f"{prefix}_{token()}"

    def connect(dbname: str) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=PG_PORT, user=a.user, password=a.password, dbname=dbname,
                               autocommit=True, connect_timeout=5)

    with connect("postgres") as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        yield f"postgres://{a.user}:{a.password}@127.0.0.1:{PG_PORT}/{database}?sslmode=disable", connect, database
    finally:
        with connect("postgres") as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


@pytest.fixture
def backend_url(admin):
    with postgres_backend(admin) as made:
        yield made


def test_list_show_on_the_postgres_backend(sandbox: Sandbox, backend_url):
    url, connect, database = backend_url
    stack = ledger.open_stack("team", url, sandbox.work, env=sandbox.env, create=True)
    rows = [{"engine": "redis", "instance": "cache", "kind": "acl_user", "name": f"u{i:03d}", "owner": f"t{i % 4}",
             "secrets": {"password": f"secret-value-{i}"}} for i in range(120)]
    import_state(stack, synthetic_resources("team", rows))
    with connect(database) as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM pulumi_state").fetchall()]
        stored = conn.execute("SELECT data::text FROM pulumi_state WHERE key LIKE %s", ("%stacks/devstack/team.json",)).fetchone()
    assert any(key.endswith(".pulumi/stacks/devstack/team.json") for key in keys)
    assert "secret-value-" not in stored[0]  # secrets are encrypted in the shared ledger too

    page = ledger.list_resources(stack, project="t1", limit=10)
    assert page.total == 30 and len(page.items) == 10 and page.next_cursor
    assert ledger.list_resources(stack, project="t1", limit=10, cursor=page.next_cursor).items[0].name == "u041"
    assert ledger.show_resource(stack, "u007", show_secrets=True).attributes["password"] == "secret-value-7"

    # The console script finds the backend in PULUMI_BACKEND_URL, as after `pulumi login postgres://...`.
    shared = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": url}, work=sandbox.work)
    listed = shared.cli_json("resource", "list", "-w", "team", "--engine", "redis", "--limit", "200")
    assert listed["total"] == 120 and listed["items"][0]["attributes"]["password"] == "[secret]"
    # The file backend of the same sandbox has no such stack: the ledger really is the database.
    assert sandbox.cli("resource", "list", "-w", "team").returncode == 3
    # The CLI records the backend URL of each stack it selects (under PULUMI_HOME): without the password.
    password = url.split(":")[2].split("@")[0]
    home = Path(sandbox.env["PULUMI_HOME"])
    assert [f for f in home.rglob("*") if f.is_file() and password.encode() in f.read_bytes()] == []
    assert list((home / "workspaces").glob("*.json"))  # there is such a record


def test_a_backend_password_in_the_query_string_is_not_printed(sandbox: Sandbox, backend_url, admin):
    url, _connect, database = backend_url
    a = admin["postgres"]
    as_query = f"postgres://127.0.0.1:{PG_PORT}/{database}?sslmode=disable&user={a.user}&password={a.password}"
    for backend in (as_query, url):
        shared = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": backend}, work=sandbox.work)
        missing = shared.cli("resource", "list", "-w", "nosuch")
        assert missing.returncode == 3 and "has no such stack" in missing.stderr
        assert a.password not in missing.stderr + missing.stdout and "the backend postgres://" in missing.stderr


def test_up_rm_destroy_on_the_postgres_backend(sandbox: Sandbox, backend_url, admin, local_shared):
    url, _, _ = backend_url
    owner = f"pb-{token()}"
    path = sandbox.work / owner / "devstack.yaml"
    path.parent.mkdir()
    path.write_text(f"apiVersion: devstack/v1\nkind: Project\nname: {owner}\n"
                    "resources:\n  - {uses: cache, kind: acl_user}\n  - {uses: cache, kind: redis_index}\n")
    stack = ledger.open_stack("team", url, sandbox.work, env=sandbox.env, create=True)
    cache = local_shared["cache"]
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "team", "shared": {"cache": cache}, "projects": [f"{owner}/devstack.yaml"]})))
    stack.set_config(f"devstack:{cache['adminSecret']}", auto.ConfigValue(admin["redis"].password, secret=True))
    try:
        stack.up()
        shared = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": url}, work=sandbox.work)
        assert shared.cli_json("resource", "list", "-w", "team")["total"] == 2
        removed = shared.cli_json("resource", "rm", owner, "--kind", "redis_index", "-w", "team")
        assert removed["untracked"] and not removed["data_dropped"]
        done = shared.cli_json("destroy", "--purge-data", "--yes", "-w", "team")
        assert done["dropped"] == [f"redis/cache/acl_user/{owner}@{owner}"]
        assert ledger.list_resources(stack).total == 0
    finally:
        # The retained index (and anything a failure left) goes; the whole check never leaks.
        for kind in ("redis_index", "acl_user"):
            try:
                ledger.drop_data(ledger.stack_config(stack), Identity("redis", "cache", kind, owner, owner), {})
            except Exception:
                pass
