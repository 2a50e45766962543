"""Stale entries end to end: the real CLI, a real PostgreSQL and Redis.

A refresh that misses a resource keeps it in the ledger, stale, its last-seen time as it was; the
preview shows the `lifecycle` change; the next up makes it again (generated passwords anew, and they
work); a refresh that finds it back makes it active; an engine that cannot be reached marks nothing.
"""

from __future__ import annotations

import json
import re
import secrets
import socket

import psycopg
import pytest
import redis
from psycopg import sql
from pulumi import automation as auto

from providers.lifecycle import ACTIVE, FIRST_SEEN, LAST_SEEN, LIFECYCLE, STALE
from providers.redis.client import ACL_OWNERS_KEY
from tests.e2e.conftest import changes, e2e_stack, stored_state, write_project
from tests.faults.conftest import SECRET_SIG
from tests.e2e.test_postgres_database import connect, database_exists, pg_instance
from tools.engines.ports import PORTS

REDIS = {"host": "127.0.0.1", "port": PORTS["redis"]}
DECLARED = [{"uses": "pg", "kind": "database", "credentials": "generated"},
            {"uses": "cache", "kind": "acl_user", "credentials": "generated"}]


def redis_admin(admin) -> redis.Redis:
    return redis.Redis(**REDIS, username=admin["redis"].user, password=admin["redis"].password, decode_responses=True)


@pytest.fixture
def project(admin):
    """A fresh project name; its database, role and Redis user are dropped afterwards."""
    name = f"e2e-l-{secrets.token_hex(3)}"
    yield name
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        conn.autocommit = True
        base = name.replace("-", "_")
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(base)))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(base)))
    with redis_admin(admin) as client:
        client.hdel(ACL_OWNERS_KEY, name)
        if client.acl_getuser(name):
            client.acl_deluser(name)
        client.acl_save()


def entries(env: dict[str, str]) -> dict[str, dict]:
    """kind -> the tenant resource's state entry (id, inputs, outputs), as the file backend keeps it."""
    latest = json.loads(stored_state(env, "e2e"))["checkpoint"]["latest"]["resources"]
    return {r["type"].rsplit(":", 1)[-1]: r for r in latest if r["type"].startswith("pulumi-python:dynamic/")}


def plain(outputs: dict) -> dict:
    """Outputs but their secrets, which every write of the state encrypts anew."""
    return {key: value for key, value in outputs.items() if not (isinstance(value, dict) and SECRET_SIG in value)}


def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_dropped_resource_stays_stale_until_the_up_makes_it_again(project_dir, offline_env, pulumi_command, admin,
                                                                   project):
    database = project.replace("-", "_")
    shared = {"pg": pg_instance(admin), "cache": {"engine": "redis", **REDIS, "adminUser": admin["redis"].user,
                                                  "adminSecret": "redisAdmin"}}
    secrets_config = {"pgAdmin": admin["postgres"].password, "redisAdmin": admin["redis"].password}
    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared, [write_project(project_dir, project, DECLARED)],
                      secrets_config)
    up = stack.up()
    made = entries(offline_env)
    for entry in made.values():
        outputs = entry["outputs"]
        assert (outputs[LIFECYCLE], outputs[FIRST_SEEN]) == (ACTIVE, outputs[LAST_SEEN])
    password = up.outputs[project].value["resources"][f"pg/database/{project}"]["password"]
    assert changes(stack.preview()) == {}

    # A state written before the lifecycle outputs existed: no change to preview or up; a refresh sets them.
    exported = stack.export_stack()
    for resource in exported.deployment["resources"]:
        for key in (LIFECYCLE, FIRST_SEEN, LAST_SEEN):
            (resource.get("outputs") or {}).pop(key, None)
    stack.import_stack(exported)
    assert not any(LIFECYCLE in e["outputs"] for e in entries(offline_env).values())
    assert changes(stack.preview()) == {} and changes(stack.up()) == {}
    assert changes(stack.refresh()) == {}
    made = entries(offline_env)
    assert all(e["outputs"][LIFECYCLE] == ACTIVE and e["outputs"][LAST_SEEN] for e in made.values())

    # Dropped behind Pulumi's back: the refresh keeps both entries, stale, last seen when they were.
    with connect(admin["postgres"].user, admin["postgres"].password, "postgres") as conn:
        conn.autocommit = True
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
    with redis_admin(admin) as client:
        client.acl_deluser(project)
    refresh = stack.refresh()
    assert changes(refresh) == {"update": 2}
    assert "lifecycle" in refresh.stdout, refresh.stdout
    missed = entries(offline_env)
    for kind, entry in missed.items():
        assert entry["id"] == made[kind]["id"]
        assert entry["outputs"][LIFECYCLE] == STALE and entry["inputs"][LIFECYCLE] == STALE
        assert entry["outputs"][LAST_SEEN] == made[kind]["outputs"][LAST_SEEN]
    # A second refresh that misses them again changes nothing recorded.
    stack.refresh()
    assert {kind: plain(e["outputs"]) for kind, e in entries(offline_env).items()} == {
        kind: plain(e["outputs"]) for kind, e in missed.items()}

    # The preview says what the up will do, naming the lifecycle.
    preview = stack.preview(diff=True)
    assert changes(preview) == {"update": 2}
    assert re.search(rf'- {LIFECYCLE} *: "{STALE}"', preview.stdout), preview.stdout

    # The up makes both again: the generated passwords are new, and they work.
    remade = stack.up()
    assert changes(remade) == {"update": 2}
    outputs = remade.outputs[project].value["resources"]
    database_out, user_out = outputs[f"pg/database/{project}"], outputs[f"cache/acl_user/{project}"]
    assert database_out["password"] != password
    with psycopg.connect(database_out["dsn"], connect_timeout=5) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (database,)
    assert redis.Redis(**REDIS, username=project, password=user_out["password"]).ping()
    for kind, entry in entries(offline_env).items():
        assert entry["outputs"][LIFECYCLE] == ACTIVE and LIFECYCLE not in entry["inputs"]
        assert entry["outputs"][FIRST_SEEN] == made[kind]["outputs"][FIRST_SEEN]
        assert entry["outputs"][LAST_SEEN] >= made[kind]["outputs"][LAST_SEEN]
    assert changes(stack.preview()) == {}
    assert changes(stack.refresh()) == {}

    # An engine that cannot be reached fails the refresh and marks nothing stale.
    before = entries(offline_env)["database"]
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e", "shared": {**shared, "pg": {**shared["pg"], "port": dead_port()}},
        "projects": [f"{project}/devstack.yaml"]})))
    with pytest.raises(auto.errors.CommandError, match="cannot"):
        stack.refresh(run_program=True)
    after = entries(offline_env)["database"]
    assert (after["outputs"][LIFECYCLE], after["outputs"][LAST_SEEN]) == (ACTIVE, before["outputs"][LAST_SEEN])
    assert database_exists(admin, database)
