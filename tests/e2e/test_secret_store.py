"""A workspace with `secretStore: aws-ssm`: the real CLI pushes a generated PostgreSQL credential to the
localstack instance, a service reads it there (boto3, with the identity of the project's access_key) and
logs in with it, `devstack env` resolves it from the store, an entry deleted out of band comes back, a
rotation updates it, and a destroy removes it."""

from __future__ import annotations

import json
import secrets

import boto3
import psycopg
import pytest
from psycopg import sql
from pulumi import automation as auto

from devstack.environment import service_env
from providers.localstack.policy import policy_reach
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


#: What the service imports from the project's access_key on the store's instance: its identity and endpoint.
KEY_VARS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"]


def read_as_a_service(env: dict[str, str], var: str) -> str:
    """What a service does with `<VAR>_SECRET_ID`: GetParameter, decrypted, with the AWS_* of its env."""
    ssm = boto3.client("ssm", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                       aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    return ssm.get_parameter(Name=env[f"{var}_SECRET_ID"], WithDecryption=True)["Parameter"]["Value"]


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
             "params": {"rotation": rotation}},
            {"uses": "aws", "kind": "access_key", "credentials": "generated", "purge": True}],
            {"app": {"uses": ["pg", "aws"], "env": {"import": [
                {"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}},
                {"from": "aws/access_key", "vars": KEY_VARS}]}}})

    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared(admin), [declare(0)],
                      {"pgAdmin": admin["postgres"].password, "awsAdmin": admin["localstack"].password})
    workspace = json.loads(stack.get_config("devstack:workspace").value)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {**workspace, "secretStore": {"kind": "aws-ssm", "instance": "aws"}})))
    entry = f"/devstack/e2e/{project}/pg/database/{project}/dsn"
    try:
        outputs = stack.up().outputs[project].value
        env, key = outputs["services"]["app"]["env"], outputs["resources"][f"aws/access_key/{project}"]
        document = aws("iam").get_user_policy(UserName=key["user"], PolicyName="devstack")["PolicyDocument"]
        assert policy_reach(document) == [f"store:aws-ssm:/devstack/e2e/{project}/"]
        # The key's own secret is served as a value: it is what the service reads the store with.
        assert set(env) == {"DATABASE_URL_SECRET_ID", *KEY_VARS} and env["DATABASE_URL_SECRET_ID"] == entry
        first = read_as_a_service(env, "DATABASE_URL")
        assert logs_in(first)
        found = service_env(stack, project, "app", show_secrets=True)
        assert found.env == {**env, "DATABASE_URL": first}
        assert sorted(found.secret_vars) == ["AWS_SECRET_ACCESS_KEY", "DATABASE_URL"]
        assert service_env(stack, project, "app").env["DATABASE_URL"] == "[secret]"

        aws("ssm").delete_parameter(Name=entry)  # behind Pulumi's back: the refresh sees it, the next up puts it back
        stack.refresh()
        stack.up()
        assert read_as_a_service(env, "DATABASE_URL") == first

        declare(1)  # a new rotation draws a new password: the entry follows
        stack.up()
        rotated = read_as_a_service(env, "DATABASE_URL")
        assert rotated != first and logs_in(rotated)
    finally:
        stack.destroy()
    assert gone(lambda: aws("ssm").get_parameter(Name=entry), "ParameterNotFound")
