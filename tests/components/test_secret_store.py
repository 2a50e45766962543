"""`secretStore:` under Pulumi mocks: which entries a workspace gets, what services' env holds instead of the
values, and the validation of the block."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pulumi
import pytest
import yaml

from components.validation import WorkspaceInvalid, validate
from tests.components.test_expansion import RecordingMocks, expand

SHARED = {"pg": {"engine": "postgres", "port": 25432}, "aws": {"engine": "localstack", "port": 24566}}
PROJECT = {
    "resources": [
        {"uses": "pg", "kind": "database", "credentials": "generated"},
        {"uses": "pg", "kind": "user", "name": "reporting", "params": {"database": "shop"}},  # predictable
    ],
    "services": {"api": {"uses": ["pg"], "env": {
        "import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn", "PGPASSWORD": "password", "PGUSER": "user"}},
                   {"from": "pg/user/reporting", "vars": {"REPORTING_PASSWORD": "password"}}]}}},
}


def workspace(tmp_path: Path, store: dict | None, shared: dict = SHARED) -> dict:
    path = tmp_path / "shop" / "devstack.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "devstack/v1", "kind": "Project", "name": "shop", **PROJECT}))
    shared = {n: {**s, "host": "127.0.0.1", "adminUser": "admin", "adminSecret": f"{n}Admin"} for n, s in shared.items()}
    return {"name": "test", "shared": shared, "projects": ["shop/devstack.yaml"],
            **({"secretStore": store} if store else {})}


class Mocks(RecordingMocks):
    """test_expansion's mocks, an entry returning its inputs as its outputs."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if not args.typ.startswith("pulumi-python:dynamic/localstack:aws-"):
            return super().new_resource(args)
        self.inputs[args.name], self.types[args.name] = dict(args.inputs), args.typ
        return f"{args.name}-id", dict(args.inputs)


@pytest.fixture
def mocks():
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="devstack", stack="test", preview=False)
    return mocks


@pulumi.runtime.test
def test_generated_secrets_go_to_the_store_and_services_get_their_names(mocks, tmp_path):
    validated = validate(workspace(tmp_path, {"kind": "aws-sm", "instance": "workspace.shared.aws"}), tmp_path,
                         None, "stacks/Pulumi.test.yaml")
    ws, options, _ = expand(validated)
    entries = {name for name in options if name.endswith("@aws-sm")}
    # The generated database's secret attribute and the export built on it; nothing of the predictable user.
    assert entries == {"shop/pg/database/shop/password@aws-sm", "shop/pg/database/shop/dsn@aws-sm"}
    assert all(options[name].additional_secret_outputs == ["value"] for name in entries)
    prefix = "devstack/test/shop/pg/database/shop"

    def check(outputs):
        env, stored = outputs["services"]["api"]["env"], outputs["services"]["api"]["secretStore"]
        for name in entries:
            inputs = mocks.inputs[name]
            attribute = name.removesuffix("@aws-sm").rsplit("/", 1)[1]
            assert inputs["secretId"] == f"{prefix}/{attribute}"
            assert (inputs["store"], inputs["storeInstance"], inputs["owner"]) == ("aws-sm", "aws", "shop")
        # Registered as a Pulumi secret (the SDK's secret envelope): the state keeps it encrypted.
        value = mocks.inputs["shop/pg/database/shop/password@aws-sm"]["value"]
        assert value == {pulumi.runtime.rpc._special_sig_key: pulumi.runtime.rpc._special_secret_sig,
                         "value": "password-of-shop/pg/database/shop"}
        assert env["DATABASE_URL_SECRET_ID"] == f"{prefix}/dsn" and env["PGPASSWORD_SECRET_ID"] == f"{prefix}/password"
        assert "DATABASE_URL" not in env and "PGPASSWORD" not in env
        assert env["PGUSER"] == "user-of-shop/pg/database/shop"
        assert env["REPORTING_PASSWORD"] == "password-of-shop/pg/user/reporting"  # predictable: the value itself, not pushed
        assert stored == {"DATABASE_URL": {"kind": "aws-sm", "instance": "aws", "id": f"{prefix}/dsn"},
                          "PGPASSWORD": {"kind": "aws-sm", "instance": "aws", "id": f"{prefix}/password"}}

    return pulumi.Output.from_input(ws.outputs["shop"]).apply(check)


@pulumi.runtime.test
def test_without_a_store_nothing_is_pushed(mocks, tmp_path):
    _, options, _ = expand(validate(workspace(tmp_path, None), tmp_path, None, "stacks/Pulumi.test.yaml"))
    assert not [name for name in options if "@" in name]


@pytest.mark.parametrize("store, shared, field, message", [
    ({"kind": "aws-sm", "instance": "vault"}, SHARED, "secretStore.instance",
     "the workspace has no shared instance 'vault' (name one of aws)"),
    ({"kind": "aws-sm", "instance": "pg"}, SHARED, "secretStore.instance",
     "'pg' is a postgres instance; aws-sm is served by a localstack instance"),
    ({"kind": "aws-ssm", "instance": "aws", "prefix": "devstack/"}, SHARED, "secretStore.prefix",
     "aws-ssm refuses the name 'devstack/shop/pg/database/shop/password' (a leading '/'"),
    ({"kind": "vault", "instance": "aws"}, SHARED, "secretStore.kind", "must be 'aws-sm' or 'aws-ssm'"),
    ({"kind": "aws-sm"}, SHARED, "secretStore.instance", "is required"),
    ({"kind": "aws-sm", "instance": "pg"}, {"pg": SHARED["pg"]}, "secretStore.instance",
     "declare a localstack instance under shared and name it"),
], ids=["unknown-instance", "not-localstack", "ssm-prefix", "unknown-kind", "no-instance", "no-localstack"])
def test_a_bad_store_names_the_field_and_the_fix(tmp_path, store, shared, field, message):
    with pytest.raises(WorkspaceInvalid) as invalid:
        validate(workspace(tmp_path, store, shared), tmp_path, None, "stacks/Pulumi.test.yaml")
    [problem] = invalid.value.problems
    assert problem.file == "stacks/Pulumi.test.yaml" and problem.path.endswith(field), problem
    assert message in problem.message, problem


def test_a_variable_the_store_serves_must_not_clash_with_its_secret_id(tmp_path):
    raw = workspace(tmp_path, {"kind": "aws-sm", "instance": "aws"})
    text = (tmp_path / "shop" / "devstack.yaml").read_text()
    data = yaml.safe_load(text)
    data["services"]["api"]["env"]["DATABASE_URL_SECRET_ID"] = "mine"
    (tmp_path / "shop" / "devstack.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(WorkspaceInvalid) as invalid:
        validate(raw, tmp_path, None, "stacks/Pulumi.test.yaml")
    [problem] = invalid.value.problems
    assert problem.file == "shop/devstack.yaml" and problem.path.startswith("services.api.env.import[0]"), problem
    assert "DATABASE_URL comes from the workspace's secret store" in problem.message


def test_the_store_instance_needs_its_admin_secret(tmp_path):
    raw = workspace(tmp_path, {"kind": "aws-ssm", "instance": "aws"})
    with pytest.raises(WorkspaceInvalid, match=r"shared\.aws\.adminSecret: config key devstack:awsAdmin is not set"):
        validate(raw, tmp_path, None, "stacks/Pulumi.test.yaml", config_is_set=lambda key: key == "pgAdmin")
