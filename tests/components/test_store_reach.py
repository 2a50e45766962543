"""The access_key on the secret store's instance under Pulumi mocks: its `reach` adds the project's own store
entries, its own secret stays out of the store (a service reads the store with it), and a key elsewhere or
in a workspace without a store gets the `reach` it always had."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
import yaml

from components.validation import validate
from tests.components.test_expansion import expand
from tests.components.test_secret_store import mocks  # noqa: F401 - the fixture

SHARED = {"pg": {"engine": "postgres", "port": 25432}, "aws": {"engine": "localstack", "port": 24566},
          "aws2": {"engine": "localstack", "port": 24567}}
KEY_VARS = {"AWS_ACCESS_KEY_ID": "accessKey", "AWS_SECRET_ACCESS_KEY": "secretKey"}


def validated(tmp_path: Path, store: dict | None, key_on: str = "aws"):
    project = {"apiVersion": "devstack/v1", "kind": "Project", "name": "shop", "resources": [
        {"uses": "pg", "kind": "database", "credentials": "generated"},
        {"uses": "aws", "kind": "queue", "name": "jobs"},
        {"uses": key_on, "kind": "access_key", "credentials": "generated"}],
        "services": {"api": {"uses": ["pg", key_on], "env": {"import": [
            {"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}},
            {"from": f"{key_on}/access_key", "vars": KEY_VARS}]}}}}
    path = tmp_path / "shop" / "devstack.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(project))
    shared = {n: {**s, "host": "127.0.0.1", "adminUser": "admin", "adminSecret": f"{n}Admin"} for n, s in SHARED.items()}
    raw = {"name": "test", "shared": shared, "projects": ["shop/devstack.yaml"], **({"secretStore": store} if store else {})}
    return validate(raw, tmp_path, None, "stacks/Pulumi.test.yaml")


@pytest.mark.parametrize("store, entry", [
    ({"kind": "aws-sm", "instance": "aws"}, "store:aws-sm:devstack/test/shop/"),
    ({"kind": "aws-ssm", "instance": "workspace.shared.aws", "prefix": "/team/"}, "store:aws-ssm:/team/shop/"),
], ids=["aws-sm", "aws-ssm-prefix"])
@pulumi.runtime.test
def test_the_key_on_the_store_instance_reads_the_projects_entries_and_is_served_itself(mocks, tmp_path, store, entry):
    workspace, options, _ = expand(validated(tmp_path, store))
    key = "shop/aws/access_key/shop"
    # The database's entries only: the key's own secret is what a service reads them with.
    assert {name for name in options if "@" in name} == {f"shop/pg/database/shop/{a}@{store['kind']}"
                                                         for a in ("password", "dsn")}

    def check(outputs):
        assert sorted(mocks.inputs[key]["reach"]) == ["queue:queue-of-shop/aws/queue/jobs", entry]
        env = outputs["services"]["api"]["env"]
        assert set(env) == {"DATABASE_URL_SECRET_ID", *KEY_VARS}
        assert env["AWS_SECRET_ACCESS_KEY"] == f"secretKey-of-{key}"
        assert set(outputs["services"]["api"]["secretStore"]) == {"DATABASE_URL"}

    return pulumi.Output.from_input(workspace.outputs["shop"]).apply(check)


@pytest.mark.parametrize("store, key_on", [
    (None, "aws"),
    ({"kind": "aws-sm", "instance": "aws2"}, "aws"),
], ids=["no-store", "store-elsewhere"])
@pulumi.runtime.test
def test_a_key_that_serves_no_store_reaches_what_it_always_did(mocks, tmp_path, store, key_on):
    workspace, options, _ = expand(validated(tmp_path, store, key_on))
    # A store elsewhere takes the key's secret like any generated one.
    pushed = {name.split("@")[0] for name in options if "@" in name}
    assert ("shop/aws/access_key/shop/secretKey" in pushed) == (store is not None)

    def check(outputs):
        assert mocks.inputs["shop/aws/access_key/shop"]["reach"] == ["queue:queue-of-shop/aws/queue/jobs"]

    return pulumi.Output.from_input(workspace.outputs["shop"]).apply(check)
