"""MinIO over TLS: each kind's lifecycle against the TLS MinIO, the exported https endpoint verified with
the CA, and the failures a wrong CA or serverName give (named, never a hang)."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from components import templates
from providers.errors import EngineUnavailable, Unsupported
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.minio.access_key import AccessKey
from providers.minio.bucket import MinioBucket
from providers.minio.client import admin_client
from providers.minio.lifecycle import MinioLifecycle
from tests.providers.conftest import props
from tests.providers.tls.conftest import CA


def inputs(provider, kind: str, name: str, owner: str, params: dict | None = None, **policy) -> dict:
    result = provider.check({}, props("minio", "objects", kind, name, owner, params, purge=True, **policy))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def endpoint(provider, kind: str, outs: dict) -> str:
    """The `endpoint` export as a service gets it: the instance's TLS values and the provider's outputs."""
    export = templates.engine_template("minio").kinds[kind].exports["endpoint"]
    return export.render({**provider._instances["objects"].template_values(), **outs})


def s3_as(url: str, key: str, secret: str, verify) -> object:
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=3)
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=config, verify=verify)


def denied(call) -> bool:
    try:
        call()
    except ClientError as err:
        return err.response["Error"]["Code"] in ("AccessDenied", "InvalidAccessKeyId")
    return False


def test_every_kind_lifecycle_over_tls_and_the_exported_endpoint_verifies_the_server(over_tls, owner):
    bucket, rule, key = (over_tls(cls(), "objects") for cls in (MinioBucket, MinioLifecycle, AccessKey))
    other = f"{owner}b"
    made: list[tuple[object, dict]] = []
    try:
        data = bucket.create(inputs(bucket, "bucket", "data", owner))
        made.append((bucket, data.outs))
        theirs = bucket.create(inputs(bucket, "bucket", "data", other))
        made.append((bucket, theirs.outs))
        url = endpoint(bucket, "bucket", data.outs)
        assert url.startswith("https://127.0.0.1:")
        # The bucket's own key, through the export, verifying the server with the CA: its bucket only.
        mine = s3_as(url, data.outs["accessKey"], data.outs["secretKey"], str(CA))
        mine.put_object(Bucket=data.outs["bucket"], Key="k", Body=b"v")
        assert mine.get_object(Bucket=data.outs["bucket"], Key="k")["Body"].read() == b"v"
        assert denied(lambda: mine.list_objects_v2(Bucket=theirs.outs["bucket"]))
        # update: versioning on, seen by read
        updated = bucket.update(data.id, data.outs, inputs(bucket, "bucket", "data", owner, {"versioning": True}))
        assert bucket.read(data.id, updated.outs).outs["params"]["versioning"] is True

        expiry = rule.create(inputs(rule, "lifecycle", "expire", owner, {"bucket": "data", "expireDays": 7}))
        made.insert(0, (rule, expiry.outs))
        changed = rule.update(expiry.id, expiry.outs, inputs(rule, "lifecycle", "expire", owner,
                                                             {"bucket": "data", "expireDays": 3}))
        assert rule.read(expiry.id, changed.outs).outs["params"]["expire_days"] == 3

        access = key.create(inputs(key, "access_key", owner, owner))
        made.insert(0, (key, access.outs))
        assert endpoint(key, "access_key", access.outs) == url
        as_key = s3_as(url, access.outs["accessKey"], access.outs["secretKey"], str(CA))
        assert [b["Name"] for b in as_key.list_buckets()["Buckets"]] == [data.outs["bucket"]]
        assert denied(lambda: as_key.get_object(Bucket=theirs.outs["bucket"], Key="k"))
        read = key.read(access.id, access.outs).outs
        assert not is_stale(read) and read["accessKey"] == access.outs["accessKey"]
    finally:
        for provider, outs in made:
            provider.delete("id", outs)
    assert is_stale(bucket.read("id", data.outs).outs)
    assert is_stale(key.read("id", access.outs).outs)


def test_a_wrong_ca_fails_naming_the_instance_and_address(over_tls, owner, stranger_ca):
    bucket = over_tls(MinioBucket(), "objects", caFile=str(stranger_ca))
    address = bucket._instances["objects"].address
    began = time.monotonic()
    with pytest.raises(EngineUnavailable) as failed:
        bucket.create(inputs(bucket, "bucket", "data", owner))
    assert f"minio instance 'objects' at {address}" in str(failed.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(failed.value) and "tls in the stack config" in str(failed.value)
    key = over_tls(AccessKey(), "objects", caFile=str(stranger_ca))
    with pytest.raises(EngineUnavailable, match="tls in the stack config") as refused:  # the admin API's verdict
        key.create(inputs(key, "access_key", owner, owner))
    assert f"minio instance 'objects' at {address}" in str(refused.value)
    assert time.monotonic() - began < 15


def test_a_server_name_the_aws_sdk_cannot_check_is_refused(over_tls, owner):
    bucket = over_tls(MinioBucket(), "objects", serverName="localhost")
    with pytest.raises(Unsupported, match="tls.serverName 'localhost' differs from the host") as refused:
        bucket.create(inputs(bucket, "bucket", "data", owner))
    assert f"minio instance 'objects' at {bucket._instances['objects'].address}" in str(refused.value)


def test_verify_false_connects_without_the_ca(over_tls, owner):
    bucket = over_tls(MinioBucket(), "objects", verify=False)
    made = bucket.create(inputs(bucket, "bucket", "data", owner))
    try:
        assert not is_stale(bucket.read(made.id, made.outs).outs)
        assert json.loads(admin_client(bucket._instances["objects"]).info())["servers"]
    finally:
        bucket.delete(made.id, made.outs)


def test_plaintext_exports_are_unchanged_and_tls_ones_say_https(tmp_path):
    (tmp_path / "ca.pem").write_text("a CA\n")
    entry = {"name": "objects", "engine": "minio", "host": "127.0.0.1", "port": 29000, "adminUser": "a",
             "adminSecret": "s"}
    plain = SharedInstance.model_validate(entry)
    secure = SharedInstance.model_validate({**entry, "tls": {"caFile": str(tmp_path / "ca.pem")}})
    outs = {"host": "127.0.0.1", "port": 29000.0, "bucket": "b"}
    for kind in ("bucket", "access_key"):
        export = templates.engine_template("minio").kinds[kind].exports["endpoint"]
        assert export.render({**plain.template_values(), **outs}) == "http://127.0.0.1:29000"
        assert export.render({**secure.template_values(), **outs}) == "https://127.0.0.1:29000"
    assert templates.instance_attributes("minio", plain) == {
        "host": "127.0.0.1", "port": "29000", "endpoint": "http://127.0.0.1:29000", "caFile": ""}
    assert templates.instance_attributes("minio", secure)["caFile"] == str(tmp_path / "ca.pem")
