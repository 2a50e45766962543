"""Small real stacks for the ledger commands: a project's devstack.yaml, a stack configured with
the local engines, and the engines checked directly."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import nats
import psycopg
import redis as redis_py

from providers.nats.session import admin_credential
from tools.engines.ports import PORTS

if TYPE_CHECKING:
    from tests.devstack.conftest import Sandbox


ENGINES = ("pg", "cache", "events")


def configure_stack(box: Sandbox, name: str, shared: dict, admin, projects: list[str]):
    stack = box.open(name, create=True)
    chosen = {k: v for k, v in shared.items() if k in ENGINES}
    stack.set_config("devstack:workspace", json_value({"name": name, "shared": chosen, "projects": projects}))
    for instance in chosen.values():
        stack.set_config(f"devstack:{instance['adminSecret']}", secret_value(admin[instance["engine"]].password))
    return stack


def json_value(value):
    from pulumi import automation as auto

    return auto.ConfigValue(json.dumps(value))


def secret_value(value: str):
    from pulumi import automation as auto

    return auto.ConfigValue(value, secret=True)


def write(box: Sandbox, name: str, resources: list[dict], services: dict | None = None) -> str:
    import yaml

    path = box.work / name / "devstack.yaml"
    path.parent.mkdir(exist_ok=True)
    document = {"apiVersion": "devstack/v1", "kind": "Project", "name": name, "resources": resources}
    if services:
        document["services"] = services
    path.write_text(yaml.safe_dump(document))
    return f"{name}/devstack.yaml"


def pg(admin) -> psycopg.Connection:
    a = admin["postgres"]
    return psycopg.connect(host="127.0.0.1", port=PORTS["postgres"], user=a.user, password=a.password, dbname="postgres",
                           autocommit=True, connect_timeout=5)


def database_exists(admin, name: str) -> bool:
    with pg(admin) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def redis_client(admin, shared) -> redis_py.Redis:
    a = admin["redis"]
    return redis_py.Redis(host="127.0.0.1", port=shared["cache"]["port"], username=a.user, password=a.password,
                          decode_responses=True, socket_timeout=5)


def acl_user_exists(admin, shared, name: str) -> bool:
    with redis_client(admin, shared) as client:
        return client.execute_command("ACL", "GETUSER", name) is not None


def nats_call(admin, shared, owner: str, work):
    """Run `work` with devstack's admin JetStream context in project `owner`'s account."""
    async def main():
        nc = await nats.connect(f"nats://127.0.0.1:{shared['events']['port']}",
                                **admin_credential(admin["nats"].password, owner), allow_reconnect=False,
                                max_reconnect_attempts=0, connect_timeout=5)
        try:
            return await work(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(main())


def stream_exists(admin, shared, name: str) -> bool:
    """Whether project `name`'s default stream exists: in its account, when the server still has that."""
    async def work(js):
        try:
            await js.stream_info(name)
            return True
        except nats.js.errors.NotFoundError:
            return False

    try:
        return nats_call(admin, shared, name, work)
    except nats.errors.Error as err:
        if "authorization violation" not in str(err).lower():
            raise
        return False  # the project's account is gone, and all in it


def project_a(box: Sandbox, a: str) -> str:
    return write(box, a, [
        {"uses": "pg", "kind": "database"},
        {"uses": "cache", "kind": "acl_user", "credentials": "generated"},
        {"uses": "events", "kind": "stream"},
        {"uses": "events", "kind": "consumer", "name": "worker", "params": {"stream": a}},
    ], services={"api": {"uses": ["pg"], "env": {
        "import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn", "PGUSER": "user"}}],
        "PGHOST": "${ref:workspace.shared.pg.host}",
    }}})
