"""The program wires a LocalStack access_key: its `reach` lists every resource of the project on the instance
(`<kind>:<engine name>`), and a service importing it gets the AWS_* variables."""

from __future__ import annotations

from pathlib import Path

import pulumi
import yaml

from components.validation import validate
from tests.components.test_expansion import mocks  # noqa: F401 - the fixture
from tools.engines.ports import PORTS

PROJECT = {
    "services": {"worker": {"uses": ["aws"], "env": {"import": [
        {"from": "workspace.shared.aws/access_key", "vars": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                             "AWS_ENDPOINT_URL", "AWS_REGION"]}]}}},
    "resources": [
        {"uses": "aws", "kind": "bucket", "name": "media"},
        {"uses": "aws", "kind": "queue", "name": "jobs"},
        {"uses": "aws", "kind": "topic", "name": "done"},
        {"uses": "aws", "kind": "stream", "name": "clicks"},
        {"uses": "aws", "kind": "table", "name": "items", "params": {"hashKey": "id"}},
        {"uses": "aws", "kind": "access_key", "credentials": "generated"},
    ],
}


@pulumi.runtime.test
def test_access_key_reaches_the_projects_resources_and_exports_aws_variables(mocks, tmp_path: Path):
    from components.workspace import Workspace

    (tmp_path / "feeds").mkdir()
    (tmp_path / "feeds" / "devstack.yaml").write_text(
        yaml.safe_dump({"apiVersion": "devstack/v1", "kind": "Project", "name": "feeds", **PROJECT}))
    shared = {"aws": {"engine": "localstack", "host": "127.0.0.1", "port": PORTS["localstack"], "adminUser": "admin",
                      "adminSecret": "awsAdmin"}}
    validated = validate({"name": "test", "shared": shared, "projects": ["feeds/devstack.yaml"]}, tmp_path, None,
                         "stacks/Pulumi.test.yaml")
    workspace = Workspace(validated, "test")
    list(workspace.declare_projects())

    def check(_: object) -> None:
        key = mocks.inputs["feeds/aws/access_key/feeds"]
        assert sorted(key["reach"]) == sorted(
            f"{kind}:{attribute}-of-feeds/aws/{kind}/{name}" for kind, attribute, name in
            [("bucket", "bucket", "media"), ("queue", "queue", "jobs"), ("topic", "topic", "done"),
             ("stream", "stream", "clicks"), ("table", "table", "items")])

    def env_check(env: dict) -> None:
        assert set(env) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"}
        assert env["AWS_ACCESS_KEY_ID"] == "accessKey-of-feeds/aws/access_key/feeds"
        assert env["AWS_SECRET_ACCESS_KEY"] == "secretKey-of-feeds/aws/access_key/feeds"
        assert env["AWS_ENDPOINT_URL"] == "http://host-of-feeds/aws/access_key/feeds:1234"
        assert env["AWS_REGION"] == "region-of-feeds/aws/access_key/feeds"

    env = pulumi.Output.from_input(workspace.outputs["feeds"]["services"]["worker"]["env"])
    return env.apply(lambda value: (check(value), env_check(value)))
