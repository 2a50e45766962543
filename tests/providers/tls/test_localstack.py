"""LocalStack (moto here) over TLS: each kind's lifecycle against the TLS engine, an access key's isolation
through the exported https endpoint verified with the CA, and what a wrong CA or serverName give."""

from __future__ import annotations

import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from components import templates
from providers.description import REACH
from providers.errors import EngineUnavailable, Unsupported
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.localstack.access_key import AccessKey
from providers.localstack.bucket import LocalstackBucket
from providers.localstack.probe import probe
from providers.localstack.queue import Queue
from providers.localstack.stream import Stream
from providers.localstack.table import Table
from providers.localstack.topic import Topic
from tests.providers.conftest import props
from tests.providers.tls.conftest import CA

HASH_KEY = {"hashKey": {"name": "id", "type": "S"}}


def inputs(provider, name: str, owner: str, params: dict | None = None, **policy) -> dict:
    result = provider.check({}, props("localstack", "aws", provider.kind, name, owner, params, purge=True, **policy))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def endpoint(provider, outs: dict) -> str:
    """The `endpoint` export as a service gets it: the instance's TLS values and the provider's outputs."""
    export = templates.engine_template("localstack").kinds[provider.kind].exports["endpoint"]
    return export.render({**provider._instances["aws"].template_values(), **outs})


def client(service: str, url: str, key: str, secret: str):
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=3)
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=config, verify=str(CA))


@pytest.mark.parametrize("cls, params, update, updated", [
    pytest.param(LocalstackBucket, {}, {"versioning": True}, {"versioning": True}, id="bucket"),
    pytest.param(Queue, {}, {"visibilityTimeout": 60}, {"visibility_timeout": 60}, id="queue"),
    pytest.param(Topic, {}, {"displayName": "Orders"}, {"display_name": "Orders"}, id="topic"),
    pytest.param(Stream, {}, {"retentionHours": 48}, {"retention_hours": 48}, id="stream"),
    pytest.param(Table, HASH_KEY, {**HASH_KEY, "ttlAttribute": "expires"}, {"ttl_attribute": "expires"}, id="table"),
])
def test_each_kind_is_created_read_updated_and_deleted_over_tls(over_tls, owner, cls, params, update, updated):
    provider = over_tls(cls(), "aws")
    made = provider.create(inputs(provider, "data", owner, params))
    try:
        assert endpoint(provider, made.outs).startswith("https://127.0.0.1:")
        changed = provider.update(made.id, made.outs, inputs(provider, "data", owner, update))
        read = provider.read(made.id, changed.outs).outs
        assert not is_stale(read) and {k: read["params"][k] for k in updated} == updated
    finally:
        provider.delete(made.id, made.outs)
    assert is_stale(provider.read(made.id, made.outs).outs)


def test_an_access_key_reaches_its_project_only_through_the_exported_https_endpoint(over_tls, owner):
    queue, bucket, key = (over_tls(cls(), "aws") for cls in (Queue, LocalstackBucket, AccessKey))
    other = f"{owner}b"
    made = []
    for provider, project in ((queue, owner), (bucket, owner), (queue, other), (bucket, other)):
        made.append((provider, provider.create(inputs(provider, "data", project)).outs))
    (_, my_queue), (_, my_bucket), (_, their_queue), (_, their_bucket) = made
    assert my_queue["queueUrl"].startswith("https://")  # the URL services get names the TLS endpoint
    access = key.create({**inputs(key, "key", owner, credentials="generated"),
                         REACH: [f"queue:{my_queue['queue']}", f"bucket:{my_bucket['bucket']}"]}).outs
    made.insert(0, (key, access))
    try:
        url = endpoint(key, access)
        sqs = client("sqs", url, access["accessKey"], access["secretKey"])
        sqs.send_message(QueueUrl=my_queue["queueUrl"], MessageBody="mine")
        with pytest.raises(ClientError, match="AccessDenied"):
            sqs.send_message(QueueUrl=their_queue["queueUrl"], MessageBody="planted")
        s3 = client("s3", url, access["accessKey"], access["secretKey"])
        s3.put_object(Bucket=my_bucket["bucket"], Key="k", Body=b"v")
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.put_object(Bucket=their_bucket["bucket"], Key="k", Body=b"planted")
    finally:
        for provider, outs in made:
            provider.delete("id", outs)
    assert is_stale(key.read("id", access).outs)


def test_a_wrong_ca_fails_naming_the_instance_and_address(over_tls, owner, stranger_ca):
    provider = over_tls(Queue(), "aws", caFile=str(stranger_ca))
    began = time.monotonic()
    with pytest.raises(EngineUnavailable) as failed:
        provider.create(inputs(provider, "data", owner))
    assert f"localstack instance 'aws' at {provider._instances['aws'].address}" in str(failed.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(failed.value) and "tls in the stack config" in str(failed.value)
    assert time.monotonic() - began < 15


def test_a_server_name_the_aws_sdk_cannot_check_is_refused(over_tls, owner):
    provider = over_tls(Topic(), "aws", serverName="localhost")
    with pytest.raises(Unsupported, match="tls.serverName 'localhost' differs from the host") as refused:
        provider.create(inputs(provider, "data", owner))
    assert f"localstack instance 'aws' at {provider._instances['aws'].address}" in str(refused.value)


def test_verify_false_connects_without_the_ca_and_the_probe_speaks_tls(over_tls, owner):
    provider = over_tls(Queue(), "aws", verify=False)
    made = provider.create(inputs(provider, "data", owner))
    try:
        assert not is_stale(provider.read(made.id, made.outs).outs)
    finally:
        provider.delete(made.id, made.outs)
    verified = over_tls(Queue(), "aws")._instances["aws"]
    assert probe(verified).version.startswith("moto")  # doctor's calls beside the AWS APIs verify too


def test_plaintext_exports_are_unchanged_and_tls_ones_say_https(tmp_path):
    (tmp_path / "ca.pem").write_text("a CA\n")
    entry = {"name": "aws", "engine": "localstack", "host": "127.0.0.1", "port": 24566, "adminUser": "a",
             "adminSecret": "s"}
    plain = SharedInstance.model_validate(entry)
    secure = SharedInstance.model_validate({**entry, "tls": {"caFile": str(tmp_path / "ca.pem")}})
    outs = {"host": "127.0.0.1", "port": 24566.0, "bucket": "b"}
    for kind, template in templates.engine_template("localstack").kinds.items():
        export = template.exports["endpoint"]
        assert export.render({**plain.template_values(), **outs}) == "http://127.0.0.1:24566", kind
        assert export.render({**secure.template_values(), **outs}) == "https://127.0.0.1:24566", kind
    assert templates.instance_attributes("localstack", plain) == {
        "host": "127.0.0.1", "port": "24566", "endpoint": "http://127.0.0.1:24566", "caFile": ""}
    assert templates.instance_attributes("localstack", secure)["caFile"] == str(tmp_path / "ca.pem")
