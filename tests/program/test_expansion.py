"""Component expansion under Pulumi mocks: names, types, parents, retain flags, inputs."""

from __future__ import annotations

import pulumi
import pytest

from components.models import ProjectFile, WorkspaceConfig


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources[args.name] = args
        return f"{args.name}-id", {**args.inputs, "password": "mock-secret"} if args.typ.startswith("pulumi-python") else args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


WORKSPACE = WorkspaceConfig.model_validate({
    "name": "test",
    "shared": {"pg": {"engine": "postgres", "port": 45432, "adminUser": "admin", "adminSecret": "pgAdmin"}},
    "projects": [],
})
SHOP = ProjectFile.model_validate({
    "apiVersion": "devstack/v1", "kind": "Project", "name": "shop",
    "resources": [
        {"uses": "pg", "kind": "database"},
        {"uses": "pg", "kind": "database", "name": "shop-archive", "purge": True, "params": {"connectionLimit": 4}},
    ],
})


@pytest.fixture
def mocks():
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="devstack", stack="test", preview=False)
    yield mocks


@pulumi.runtime.test
def test_project_expands_each_declaration(mocks):
    from components.project import Project

    project = Project(SHOP, WORKSPACE, stack="test")

    def check(_):
        names = set(mocks.resources)
        assert {"shop", "shop/pg/database/shop", "shop/pg/database/shop-archive"} <= names
        main = mocks.resources["shop/pg/database/shop"]
        assert main.typ == "pulumi-python:dynamic/postgres:database"
        assert main.inputs["owner"] == "shop" and main.inputs["instance"] == "pg"
        assert main.inputs["credentials"] == "predictable"
        archive = mocks.resources["shop/pg/database/shop-archive"]
        assert archive.inputs["params"] == {"connectionLimit": 4}
        assert archive.inputs["purge"] is True
        # Admin credentials never travel as resource inputs.
        assert not any("admin" in key.lower() for key in main.inputs)

    return pulumi.Output.all(*project.outputs["resources"]["pg/database/shop"].values()).apply(check)
