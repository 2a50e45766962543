"""A workspace with `secretStore: aws-ssm`: the real CLI pushes a generated PostgreSQL credential to the
localstack instance, a service reads it there (boto3) and logs in with it, `devstack env` resolves it from
the store, an entry deleted out of band comes back, a rotation updates it, and a destroy removes it."""

from __future__ import annotations

import json
import secrets

import psycopg
import pytest
from psycopg import sql
from pulumi import automation as auto

from devstack.environment import service_env
from tests.e2e.conftest import e2e_stack, write_project
from tests.providers.s3.contract import aws, gone
from tools.engines.ports import PORTS

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(240)


def shared(admin) -> dict:
    return {"pg": {"engine": "postgres", "host": "127.0.0.1", "port": PORTS["postgres"],
                   "adminUser": admin["postgres"].user, "adminSecret": "pgAdmin"},
            "aws": {"engine": "localstack", "host": "127.0.0.1", "port": PORTS["localstack"],
                    "adminUser": admin["localstack"].user, "adminSecret": "awsAdmin"}}


def read_as_a_service(name: str) -> str:
    """What a service does with `<VAR>_SECRET_ID`: GetParameter, decrypted."""
    return aws("ssm").get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]


def logs_in(dsn: str) -> bool:
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        return conn.execute("SELECT current_user").fetchone() is not None


@pytest.fixture
def project(admin):
    name = f"e2e-ss-{secrets.token_hex(3)}"
    yield name
    with psycopg.connect(host="127.0.0.1", port=PORTS["postgres"], user=admin["postgres"].user,
                         password=admin["postgres"].password, dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name.replace("-", "_"))))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name.replace("-", "_"))))


def test_generated_credential_is_served_by_the_store(project_dir, offline_env, pulumi_command, admin, project):
    def declare(rotation: int) -> str:
        return write_project(project_dir, project, [
            {"uses": "pg", "kind": "database", "credentials": "generated", "purge": True,
             "params": {"rotation": rotation}}],
            {"app": {"uses": ["pg"], "env": {"import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}}]}}})

    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared(admin), [declare(0)],
                      {"pgAdmin": admin["postgres"].password, "awsAdmin": admin["localstack"].password})
    workspace = json.loads(stack.get_config("devstack:workspace").value)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {**workspace, "secretStore": {"kind": "aws-ssm", "instance": "aws"}})))
    entry = f"/devstack/e2e/{project}/pg/database/{project}/dsn"
    try:
        env = stack.up().outputs[project].value["services"]["app"]["env"]
        assert env == {"DATABASE_URL_SECRET_ID": entry}
        first = read_as_a_service(entry)
        assert logs_in(first)
        found = service_env(stack, project, "app", show_secrets=True)
        assert found.env == {"DATABASE_URL": first, "DATABASE_URL_SECRET_ID": entry}
        assert found.secret_vars == ["DATABASE_URL"]
        assert service_env(stack, project, "app").env["DATABASE_URL"] == "[secret]"

        aws("ssm").delete_parameter(Name=entry)  # behind Pulumi's back: the refresh sees it, the next up puts it back
        stack.refresh()
        stack.up()
        assert read_as_a_service(entry) == first

        declare(1)  # a new rotation draws a new password: the entry follows
        stack.up()
        rotated = read_as_a_service(entry)
        assert rotated != first and logs_in(rotated)
    finally:
        stack.destroy()
    assert gone(lambda: aws("ssm").get_parameter(Name=entry), "ParameterNotFound")
