"""A workspace whose instances are reached over TLS, end to end: the real CLI's `up`, then each service
variable used as a service would, verifying the servers with the CA the workspace names."""

from __future__ import annotations

import json
import secrets

import ssl

import boto3
import nats
import psycopg
import redis
from botocore.config import Config
from confluent_kafka import Producer
from nats.aio.client import RawCredentials
from pulumi import automation as auto

from providers.nats.session import run_private
from tests.e2e import conftest as e2e
from tests.e2e.conftest import changes, offline_env, project_dir, pulumi_command, write_project
from tests.providers.tls.conftest import CA, moved_to_tls

__all__ = ["offline_env", "project_dir", "pulumi_command"]  # fixtures, used by name
INSTANCES = ("pg", "cache", "objects", "aws", "kafka", "events")


def test_a_tls_workspace_up_hands_services_verified_tls(project_dir, offline_env, pulumi_command, admin,
                                                        local_workspace, tls_engines):
    shared = {name: moved_to_tls(local_workspace["shared"][name]) for name in INSTANCES}
    for entry in shared.values():
        tls_engines.start(entry["engine"])
    project = f"tls-{secrets.token_hex(3)}"
    imports = [{"from": f"{uses}/{kind}", "vars": variables} for uses, kind, variables in (
        ("pg", "database", ["DATABASE_URL"]), ("cache", "acl_user", ["REDIS_URL"]),
        ("objects", "bucket", ["AWS_ENDPOINT_URL_S3", "S3_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]),
        ("aws", "queue", ["AWS_ENDPOINT_URL", "SQS_QUEUE_URL"]), ("kafka", "topic", ["KAFKA_TOPIC"]),
        ("kafka", "acl", ["KAFKA_BOOTSTRAP_SERVERS", "KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM",
                          "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SSL_CA_LOCATION"]),
        ("events", "user", {"NATS_URL": "url", "NATS_CREDS": "creds", "NATS_CA": "caFile"}))]
    resources = [{"uses": uses, "kind": kind, "purge": True} for uses, kind in (
        ("pg", "database"), ("cache", "acl_user"), ("objects", "bucket"), ("aws", "queue"), ("kafka", "topic"),
        ("kafka", "acl"), ("events", "stream"), ("events", "user"))]
    services = {"api": {"env": {"import": imports, "AWS_CA_BUNDLE": "${ref:workspace.shared.aws.caFile}"}}}
    files = [write_project(project_dir, project, resources, services)]
    stack = auto.Stack.create("e2e", e2e.local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": "e2e", "shared": shared,
                                                                         "projects": files})))
    for entry in shared.values():
        stack.set_config(f"devstack:{entry['adminSecret']}",
                         auto.ConfigValue(admin[entry["engine"]].password, secret=True))
    try:
        up = stack.up()
        assert changes(up)["create"] >= 6
        env = up.outputs[project].value["services"]["api"]["env"]
        assert env["AWS_CA_BUNDLE"] == str(CA)
        assert "sslmode=verify-full" in env["DATABASE_URL"] and env["REDIS_URL"].startswith("rediss://")
        assert env["AWS_ENDPOINT_URL"].startswith("https://") and env["AWS_ENDPOINT_URL_S3"].startswith("https://")
        with psycopg.connect(env["DATABASE_URL"], connect_timeout=5) as conn:
            assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
        with redis.Redis.from_url(env["REDIS_URL"], socket_timeout=5) as client:
            assert client.ping()
        s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"], verify=env["AWS_CA_BUNDLE"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                          region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
        s3.put_object(Bucket=env["S3_BUCKET"], Key="k", Body=b"v")
        assert s3.get_object(Bucket=env["S3_BUCKET"], Key="k")["Body"].read() == b"v"
        sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"], verify=env["AWS_CA_BUNDLE"],
                           aws_access_key_id=admin["localstack"].user, region_name="us-east-1",
                           aws_secret_access_key=admin["localstack"].password)
        assert sqs.get_queue_attributes(QueueUrl=env["SQS_QUEUE_URL"], AttributeNames=["QueueArn"])["Attributes"]
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL" and env["NATS_URL"].startswith("tls://")
        assert delivered_to_kafka(env) and published_to_nats(env, project)
        assert changes(stack.preview()) == {}
    finally:
        stack.destroy()


def delivered_to_kafka(env: dict[str, str]) -> bool:
    """One message produced with the exported settings, acknowledged by the broker."""
    producer = Producer({"bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"],
                         "security.protocol": env["KAFKA_SECURITY_PROTOCOL"],
                         "sasl.mechanisms": env["KAFKA_SASL_MECHANISM"], "sasl.username": env["KAFKA_SASL_USERNAME"],
                         "sasl.password": env["KAFKA_SASL_PASSWORD"], "ssl.ca.location": env["KAFKA_SSL_CA_LOCATION"],
                         "message.timeout.ms": 15000})
    reports = []
    producer.produce(env["KAFKA_TOPIC"], b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(20)
    return reports == [None]


def published_to_nats(env: dict[str, str], project: str) -> bool:
    """One message published with the exported settings into the project's stream, acknowledged by it."""
    async def publish() -> bool:
        nc = await nats.connect(env["NATS_URL"], user_credentials=RawCredentials(env["NATS_CREDS"]),
                                tls=ssl.create_default_context(cafile=env["NATS_CA"]), allow_reconnect=False,
                                connect_timeout=5)
        try:
            ack = await nc.jetstream().publish(f"{project}.orders", b"v", timeout=5)
            return ack.stream == project
        finally:
            await nc.close()

    return run_private(publish())
