"""Redis end to end: the real CLI, a two-project workspace, a real Redis.

Each project declares a logical database (`redis_index`) and an ACL user; the
run goes through up, preview (no changes), a second up (nothing changes), a
refresh after an out-of-band ACL change, and removal of a declaration
(retained: the user, the index and the data stay).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
import redis
from pulumi import automation as auto

from providers.credentials import predictable_password
from providers.redis.client import ACL_OWNERS_KEY, ALLOCATIONS_KEY
from tests.e2e.conftest import changes, local_workspace, write_project
from tools.engines.ports import PORTS

REDIS = {"host": "127.0.0.1", "port": PORTS["redis"]}




def admin_client(admin, db: int = 0) -> redis.Redis:
    return redis.Redis(**REDIS, username=admin["redis"].user, password=admin["redis"].password, db=db, decode_responses=True)


@pytest.fixture
def projects(admin):
    """Two fresh project names; afterwards their users are deleted and their indexes emptied and freed."""
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names
    with admin_client(admin) as client:
        for name in names:
            text = client.hget(ALLOCATIONS_KEY, name)
            if text:
                with admin_client(admin, json.loads(text)["db"]) as other:
                    other.flushdb()
            client.hdel(ALLOCATIONS_KEY, name)
            client.hdel(ACL_OWNERS_KEY, name)
            if client.acl_getuser(name):
                client.acl_deluser(name)
        client.acl_save()  # so no test user lingers in the ACL file


def resources(generated: bool = False) -> list[dict]:
    user = {"uses": "cache", "kind": "acl_user"}
    return [{"uses": "cache", "kind": "redis_index"}, {**user, "credentials": "generated"} if generated else user]


def test_two_projects_up_preview_refresh_retain(project_dir, offline_env, pulumi_command, admin, projects):
    a, b = projects
    files = [write_project(project_dir, a, resources()), write_project(project_dir, b, resources(generated=True))]
    stack = auto.Stack.create("e2e", local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        "shared": {"cache": {"engine": "redis", "host": "127.0.0.1", "port": REDIS["port"],
                             "adminUser": admin["redis"].user, "adminSecret": "redisAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:redisAdmin", auto.ConfigValue(admin["redis"].password, secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 8}  # stack, workspace, 2 projects, 2 indexes, 2 users
    out = {name: up.outputs[name].value["resources"] for name in projects}
    index_a, index_b = out[a][f"cache/redis_index/{a}"], out[b][f"cache/redis_index/{b}"]
    user_a, user_b = out[a][f"cache/acl_user/{a}"], out[b][f"cache/acl_user/{b}"]
    assert index_a["db"] != index_b["db"] and (user_a["user"], user_a["keyPrefix"]) == (a, f"{a}:")
    # Passwords are stored encrypted: the state file holds ciphertext, never the value (a predictable one
    # is the project's name, known to all by design).
    backend = Path(offline_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    state_text = (backend / ".pulumi" / "stacks" / "devstack" / "e2e.json").read_text()
    assert user_a["password"] == a and user_b["password"] not in state_text
    users = [r for r in json.loads(state_text)["checkpoint"]["latest"]["resources"] if r["type"].endswith("redis:acl_user")]
    assert len(users) == 2 and all("ciphertext" in r["outputs"]["password"] for r in users)

    # Each project works in its own index with its own user and prefix ...
    client_a = redis.Redis(**REDIS, username=a, password=user_a["password"], db=index_a["db"])
    client_a.set(f"{a}:order", "1")
    client_b = redis.Redis(**REDIS, username=b, password=user_b["password"], db=index_b["db"])
    client_b.set(f"{b}:order", "2")
    # ... and cannot read, write or flush the other's keys, even after selecting its index.
    intruder = redis.Redis(**REDIS, username=a, password=user_a["password"], db=index_b["db"])
    for command in (["GET", f"{b}:order"], ["SET", f"{b}:order", "x"], ["FLUSHDB"], ["KEYS", "*"]):
        with pytest.raises(redis.exceptions.NoPermissionError):
            intruder.execute_command(*command)

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # A rotation (an integer in YAML, a float by the time Pulumi hands it to check) changes A's password in place.
    write_project(project_dir, a, [resources()[0], {**resources()[1], "params": {"rotation": 1}}])
    rotated = stack.up()
    assert changes(rotated) == {"update": 1}
    new_password = rotated.outputs[a].value["resources"][f"cache/acl_user/{a}"]["password"]
    assert new_password != user_a["password"]
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(**REDIS, username=a, password=user_a["password"]).ping()
    client_a = redis.Redis(**REDIS, username=a, password=new_password, db=index_a["db"])
    assert client_a.get(f"{a}:order") == b"1"
    # Predictable: anyone with the workspace derives it from the rotation as declared (1, not Pulumi's 1.0).
    assert new_password == predictable_password(a, 1) == f"{a}-1"

    # Pinning the index it holds changes it in place. Moving the retained index fails the preview, not the
    # up half-way: the replacement would meet the index it keeps. Nothing changes.
    rotated_user = {**resources()[1], "params": {"rotation": 1}}
    write_project(project_dir, a, [{**resources()[0], "params": {"index": index_a["db"]}}, rotated_user])
    assert changes(stack.up()) == {"update": 1}
    write_project(project_dir, a, [{**resources()[0], "params": {"index": index_b["db"]}}, rotated_user])
    with pytest.raises(auto.errors.CommandError, match=f"cannot change from {index_a['db']} while the redis_index is retained"):
        stack.preview()
    write_project(project_dir, a, [{**resources()[0], "params": {"index": index_a["db"]}}, rotated_user])
    assert changes(stack.preview()) == {}

    # Out-of-band change to A's ACL: refresh notices it, the next up repairs it.
    with admin_client(admin) as client:
        client.execute_command("ACL", "SETUSER", a, "+flushall")
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    with admin_client(admin) as client:
        assert "no permissions" in client.execute_command("ACL", "DRYRUN", a, "FLUSHALL")

    # Removing A's declarations retains its user, its index and its data.
    write_project(project_dir, a, [])
    assert changes(stack.up()) == {"delete": 2}
    assert client_a.get(f"{a}:order") == b"1"
    with admin_client(admin) as client:
        assert json.loads(client.hget(ALLOCATIONS_KEY, a))["db"] == index_a["db"]
    assert client_b.get(f"{b}:order") == b"2"
