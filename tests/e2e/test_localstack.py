"""LocalStack end to end: the real CLI, one project, moto in server mode as the AWS APIs.

The project declares one of each kind (bucket, standard and FIFO queue,
topic, stream, table); the run goes through up, preview (no changes), a
second up (nothing changes), a refresh after an out-of-band change, and
removal of declarations (retained: the queue keeps its messages, the table
its items). moto not running is a failure, never a skip.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request

import boto3
import pytest
from pulumi import automation as auto

from tests.e2e.conftest import changes, explicit_name, local_workspace, write_project
from tests.providers.s3.contract import admin_key
from tools.engines.ports import PORTS

HOST, PORT = "127.0.0.1", PORTS["localstack"]
ENDPOINT = f"http://{HOST}:{PORT}"




def aws(service: str):
    """A plain boto3 client as the engine's admin: moto enforces IAM and refuses any key it does not hold."""
    key, secret = admin_key()
    return boto3.client(service, endpoint_url=ENDPOINT, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret)


def explicit(project: str, name: str) -> str:
    """`explicit_name`, the '.fifo' a FIFO queue's name ends with kept last (`orders-<token>.fifo`)."""
    if name.endswith(".fifo"):
        return explicit_name(project, name.removesuffix(".fifo")) + ".fifo"
    return explicit_name(project, name)


def remove_everything_of(project: str) -> None:
    """Delete what the project's names and its explicit names (`explicit`) make, in every service (moto
    keeps state in memory)."""
    token = project.rsplit("-", 1)[1]

    def ours(name: str) -> bool:
        return name == project or name.startswith(project + "-") or name.removesuffix(".fifo").endswith(f"-{token}")

    s3 = aws("s3")
    for bucket in [b["Name"] for b in s3.list_buckets()["Buckets"] if ours(b["Name"])]:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                s3.delete_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
        s3.delete_bucket(Bucket=bucket)
    for url in aws("sqs").list_queues().get("QueueUrls", []):
        if ours(url.rsplit("/", 1)[1]):
            aws("sqs").delete_queue(QueueUrl=url)
    for topic in aws("sns").list_topics()["Topics"]:
        if ours(topic["TopicArn"].rsplit(":", 1)[1]):
            aws("sns").delete_topic(TopicArn=topic["TopicArn"])
    for stream in filter(ours, aws("kinesis").list_streams()["StreamNames"]):
        aws("kinesis").delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
    for table in filter(ours, aws("dynamodb").list_tables()["TableNames"]):
        aws("dynamodb").delete_table(TableName=table)


@pytest.fixture
def project():
    """A fresh project name; everything it left in moto is removed afterwards."""
    try:
        urllib.request.urlopen(f"{ENDPOINT}/", timeout=3)
    except urllib.error.HTTPError:
        pass  # it answered
    except OSError as err:
        pytest.fail(f"moto does not answer at {ENDPOINT} ({err}); start it with `python -m tools.engines start localstack`")
    name = f"e2e-{secrets.token_hex(3)}"
    yield name
    remove_everything_of(name)


def resources(p: str) -> list[dict]:
    """One of each kind: the bucket named after the project, the rest named explicitly."""
    return [
        {"uses": "aws", "kind": "bucket", "params": {"tags": {"team": "web"}}},
        {"uses": "aws", "kind": "queue", "name": explicit(p, "jobs"), "params": {"visibilityTimeout": 45}},
        {"uses": "aws", "kind": "queue", "name": explicit(p, "orders.fifo"), "params": {"fifo": True}},
        {"uses": "aws", "kind": "topic", "name": explicit(p, "events"), "params": {"displayName": "Events"}},
        {"uses": "aws", "kind": "stream", "name": explicit(p, "clicks"), "params": {"shardCount": 2}},
        {"uses": "aws", "kind": "table", "name": explicit(p, "sessions"),
         "params": {"hashKey": "id", "ttlAttribute": "expires"}},
    ]


def test_localstack_up_preview_refresh_retain(project_dir, offline_env, pulumi_command, project):
    p = project
    declared = resources(p)
    jobs, fifo, events, clicks, sessions = (r["name"] for r in declared[1:])
    stack = auto.Stack.create("e2e", local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        # moto enforces IAM: the providers sign with the admin key the engine was started with.
        "shared": {"aws": {"engine": "localstack", "host": HOST, "port": PORT,
                           "adminUser": admin_key()[0], "adminSecret": "awsAdmin"}},
        "projects": [write_project(project_dir, p, declared)],
    })))
    stack.set_config("devstack:awsAdmin", auto.ConfigValue(admin_key()[1], secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 9}  # stack, workspace, project, 6 resources
    out = up.outputs[p].value["resources"]
    assert out[f"aws/bucket/{p}"]["bucket"] == p
    # An explicit name is the name in the service, not prefixed with the project.
    queue_url = out[f"aws/queue/{jobs}"]["queueUrl"]
    assert queue_url.endswith(f"/{jobs}")
    assert out[f"aws/queue/{fifo}"]["queue"] == fifo
    assert out[f"aws/topic/{events}"]["topicArn"].endswith(f":{events}")
    assert out[f"aws/stream/{clicks}"]["streamArn"].endswith(f"stream/{clicks}")
    assert out[f"aws/table/{sessions}"]["tableArn"].endswith(f"table/{sessions}")

    # The resources work and carry the ownership marker.
    aws("sqs").send_message(QueueUrl=queue_url, MessageBody="kept")
    aws("dynamodb").put_item(TableName=sessions, Item={"id": {"S": "kept"}})
    assert aws("sqs").list_queue_tags(QueueUrl=queue_url)["Tags"]["devstack-owner"] == p
    assert aws("kinesis").describe_stream_summary(StreamName=clicks)["StreamDescriptionSummary"]["OpenShardCount"] == 2

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out of band, the queue's visibility timeout changes: refresh notices, the next up repairs it.
    aws("sqs").set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "5"})
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    attributes = aws("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "45"

    # Removing the queue and the table retains both, with their data.
    write_project(project_dir, p, [r for r in declared if r.get("name") not in (jobs, sessions)])
    assert changes(stack.up()) == {"delete": 2}
    kept = aws("sqs").get_queue_url(QueueName=jobs)["QueueUrl"]
    assert aws("sqs").get_queue_attributes(QueueUrl=kept, AttributeNames=["All"])["Attributes"]["ApproximateNumberOfMessages"] == "1"
    assert "Item" in aws("dynamodb").get_item(TableName=sessions, Key={"id": {"S": "kept"}})
