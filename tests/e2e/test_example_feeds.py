"""examples/feeds as a user runs it: its worker reaches NATS with its own project's user, and nothing else.

The example is brought up under a run-unique project name (its explicit
names too: they are engine identifiers shared by every project), on the
local engines, with the real CLI. The worker's environment comes from
`devstack env`, as a service would get it.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import nats
import nkeys
import pytest
import yaml
from nats.js.errors import NotFoundError
from pulumi import automation as auto

from providers.nats import auth as nats_auth
from providers.nats.session import run_private
from tests.devstack.conftest import Sandbox, make_env
from tools.pulumi_env import ROOT

pytestmark = pytest.mark.timeout(300)


def renamed(document: dict[str, Any], token: str) -> dict[str, Any]:
    """The example with its project and every explicit resource name given the run's token."""
    old, new = document["name"], f"{document['name']}-{token}"
    names = {decl["name"] for decl in document["resources"] if "name" in decl}

    def rename(value: str) -> str:
        return f"{value}-{token}" if value in names else new if value == old else value

    for decl in document["resources"]:
        if "name" in decl:
            decl["name"] = rename(decl["name"])
        for param in ("bucket", "stream"):
            if param in decl.get("params", {}):
                decl["params"][param] = rename(decl["params"][param])
    for service in document["services"].values():
        for item in service["env"]["import"]:
            instance, *rest = item["from"].split("/")
            item["from"] = "/".join([instance, *rest[:1], *(rename(n) for n in rest[1:])])
    return {**document, "name": new}


@pytest.fixture
def feeds(tmp_path: Path, admin) -> tuple[str, dict[str, str]]:
    token = secrets.token_hex(3)
    document = renamed(yaml.safe_load((ROOT / "examples" / "feeds" / "devstack.yaml").read_text()), token)
    box = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path / "work")
    (box.work / "feeds").mkdir(parents=True)
    (box.work / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    (box.work / "feeds" / "devstack.yaml").write_text(yaml.safe_dump(document))
    shared = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]["devstack:workspace"]["shared"]
    stack = box.open("feeds", create=True)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "feeds", "shared": shared, "projects": ["feeds/devstack.yaml"]})))
    for instance in shared.values():
        stack.set_config(f"devstack:{instance['adminSecret']}",
                         auto.ConfigValue(admin[instance["engine"]].password, secret=True))
    try:
        stack.up()
        yield document["name"], box.cli_json("env", document["name"], "worker", "-w", "feeds", "--show-secrets")["env"]
    finally:
        done = box.cli("workspace", "destroy", "--purge-data", "--yes", "-w", "feeds")
        assert done.returncode == 0, f"devstack workspace destroy --purge-data failed: {done.stderr}"


def test_the_worker_logs_in_to_nats_as_its_projects_user(feeds, admin) -> None:
    project, env = feeds
    # No admin credential of any engine reaches the service.
    assert not {credential.password for credential in admin.values()} & set(env.values())
    key = nkeys.from_seed(env["NATS_USER_SEED"].encode())
    claims = nats_auth.decode(env["NATS_USER_JWT"])
    operator = nats_auth.Operator.from_secret(admin["nats"].password)
    assert claims["iss"] == nats_auth.public(operator.account_key(project)), "signed by the project's own account"
    assert claims["sub"] == nats_auth.public(key)

    async def work() -> tuple[str, int, list[str]]:
        nc = await nats.connect(env["NATS_URL"], user_jwt_cb=lambda: env["NATS_USER_JWT"].encode(),
                                signature_cb=nats_auth.signer(key), allow_reconnect=False, connect_timeout=5)
        try:
            js = nc.jetstream(timeout=5)
            ack = await js.publish(f"{project}.hello", b"x")
            # The project's durable consumer, declared in the example, hands it over.
            sub = await js.pull_subscribe_bind(durable=f"indexer-{project.rsplit('-', 1)[1]}", stream=ack.stream)
            fetched = [m.subject for m in await sub.fetch(1, timeout=5)]
            # The local workspace's own `feeds` stream, if any, is in another account: not here.
            with pytest.raises(NotFoundError):
                await js.stream_info("feeds")
            return ack.stream, ack.seq, fetched
        finally:
            await nc.close()

    stream, seq, fetched = run_private(work())
    assert (stream, seq, fetched) == (project, 1, [f"{project}.hello"])
