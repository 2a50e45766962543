"""`devstack resource create --credentials generated` on a workspace with a secret store: the targeted update
of a project's first resource makes its entries too."""

from __future__ import annotations

import json

from pulumi import automation as auto

from tests.devstack.conftest import shared_config
from tests.providers.s3.contract import aws


def test_a_created_generated_resource_gets_its_entries(scratch):
    prefix = f"devstack/{scratch.project}/"
    scratch.stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "imp", "shared": shared_config(scratch.admin), "projects": [f"{scratch.project}/devstack.yaml"],
        "secretStore": {"kind": "aws-sm", "instance": "aws", "prefix": prefix}})))
    code, out, err = scratch.verb("resource", "create", "postgres", "database", "--credentials", "generated")
    assert code == 0, err
    listed = aws("secretsmanager").list_secrets(Filters=[{"Key": "name", "Values": [prefix]}])["SecretList"]
    key = f"{prefix}{scratch.project}/pg/database/{scratch.project}"
    assert sorted(entry["Name"] for entry in listed) == [f"{key}/dsn", f"{key}/password"]
