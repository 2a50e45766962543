"""MinIO end to end: the real CLI, a two-project workspace, the real MinIO server.

Project A declares a bucket, a second (versioned) bucket named explicitly
(so outside A's `<project>-*` buckets) with its own generated key and two
lifecycle rules on it (one naming it, one named like it), and an access key;
project B a bucket and an access key. The run goes through up, A's key
confined to A's buckets (the explicitly named one listed in its policy by
name), preview (no changes), a second up (nothing changes), a refresh after
an out-of-band change to A's user, and removal of declarations (retained:
the bucket, its objects and the rule stay). MinIO not running is a failure, never a skip.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin
from pulumi import automation as auto

from providers.minio.keys import BUCKET_KEY_SUFFIX
from tests.e2e.conftest import changes, explicit_name, local_workspace, stored_state, write_project
from tools.engines.ports import PORTS

HOST, PORT = "127.0.0.1", PORTS["minio"]
ENDPOINT = f"http://{HOST}:{PORT}"





def s3_as(key: str, secret: str):
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def admin_api(admin) -> MinioAdmin:
    return MinioAdmin(endpoint=f"{HOST}:{PORT}", credentials=StaticProvider(admin["minio"].user, admin["minio"].password), secure=False)


@pytest.fixture
def projects(admin):
    """Two fresh project names; afterwards their buckets (all versions, the explicitly named ones of
    `explicit_name` included), users (bucket keys included) and policies are removed."""
    try:
        urllib.request.urlopen(f"{ENDPOINT}/minio/health/live", timeout=3)
    except (urllib.error.URLError, OSError) as err:
        pytest.fail(f"MinIO does not answer at {ENDPOINT} ({err}); start it with `python -m tools.engines start minio`")
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names

    def ours(name: str) -> bool:
        bucket = name.removesuffix(BUCKET_KEY_SUFFIX)
        return any(bucket == n or bucket.startswith(n + "-") for n in names) or bucket.endswith(f"-{suffix}")

    s3 = s3_as(admin["minio"].user, admin["minio"].password)
    for bucket in (b["Name"] for b in s3.list_buckets()["Buckets"]):
        if ours(bucket):
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                    s3.delete_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
            s3.delete_bucket(Bucket=bucket)
    api = admin_api(admin)
    users = [user for user in json.loads(api.user_list() or "{}") if ours(user)]
    for user in set(names) | set(users):
        for call in (lambda: api.user_remove(user), lambda: api.policy_remove(f"devstack-{user}")):
            try:
                call()
            except MinioAdminException:
                pass


def denied(call) -> bool:
    try:
        call()
    except ClientError as err:
        return err.response["Error"]["Code"] == "AccessDenied"
    return False


def test_minio_two_projects_up_preview_refresh_retain(project_dir, offline_env, pulumi_command, admin, projects):
    a, b = projects
    name = explicit_name(a, "uploads")  # the bucket itself: outside `<project>-*`, A's key lists it by name
    key = {"uses": "objects", "kind": "access_key", "credentials": "generated"}
    resources_a = [
        {"uses": "objects", "kind": "bucket"},
        {"uses": "objects", "kind": "bucket", "name": name, "params": {"versioning": True, "tags": {"team": "web"}},
         "credentials": "generated"},
        {"uses": "objects", "kind": "lifecycle", "name": "expire-tmp", "params": {"bucket": name, "expireDays": 7, "prefix": "tmp/"}},
        {"uses": "objects", "kind": "lifecycle", "name": name, "params": {"expireDays": 30}},  # spec 27's form
        key,
    ]
    files = [write_project(project_dir, a, resources_a),
             write_project(project_dir, b, [{"uses": "objects", "kind": "bucket"}, key])]
    stack = auto.Stack.create("e2e", local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        "shared": {"objects": {"engine": "minio", "host": HOST, "port": PORT,
                               "adminUser": admin["minio"].user, "adminSecret": "minioAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:minioAdmin", auto.ConfigValue(admin["minio"].password, secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 11}  # stack, workspace, 2 projects, A: 5 resources, B: 2
    out = {project: up.outputs[project].value["resources"] for project in projects}
    uploads, rule = out[a][f"objects/bucket/{name}"], out[a]["objects/lifecycle/expire-tmp"]
    key_a, key_b = out[a][f"objects/access_key/{a}"], out[b][f"objects/access_key/{b}"]
    assert (uploads["bucket"], uploads["s3Url"], rule["bucket"]) == (name, f"s3://{name}", name)  # not prefixed
    assert key_a["accessKey"] == a and key_a["policy"] == f"devstack-{a}"
    assert key_a["secretKey"] not in stored_state(offline_env, "e2e")  # secret outputs are stored encrypted
    assert uploads["secretKey"] not in stored_state(offline_env, "e2e")
    assert out[a][f"objects/lifecycle/{name}"]["bucket"] == name

    # A's key works on A's buckets, the one named after A and the one its policy lists by name, and
    # nowhere else; B's key not on A's explicitly named bucket.
    client_a = s3_as(key_a["accessKey"], key_a["secretKey"])
    client_a.put_object(Bucket=name, Key="tmp/report.csv", Body=b"1,2,3")
    client_a.put_object(Bucket=a, Key="own.txt", Body=b"A")
    client_b = s3_as(key_b["accessKey"], key_b["secretKey"])
    client_b.put_object(Bucket=b, Key="mine.txt", Body=b"B")
    assert denied(lambda: client_a.list_objects_v2(Bucket=b))
    assert denied(lambda: client_a.get_object(Bucket=b, Key="mine.txt"))
    assert denied(lambda: client_a.put_object(Bucket=b, Key="planted.txt", Body=b"x"))
    assert denied(lambda: client_b.list_objects_v2(Bucket=name))
    assert denied(lambda: client_b.get_object(Bucket=name, Key="tmp/report.csv"))
    assert denied(lambda: client_b.put_object(Bucket=name, Key="planted.txt", Body=b"x"))
    # The uploads bucket's own key: that bucket, not A's other one.
    bucket_key = s3_as(uploads["accessKey"], uploads["secretKey"])
    assert bucket_key.get_object(Bucket=name, Key="tmp/report.csv")["Body"].read() == b"1,2,3"
    assert denied(lambda: bucket_key.list_objects_v2(Bucket=a))
    rules = s3_as(admin["minio"].user, admin["minio"].password).get_bucket_lifecycle_configuration(Bucket=name)
    assert sorted(r["ID"] for r in rules["Rules"]) == [f"devstack:{a}:expire-tmp", f"devstack:{a}:{name}"]

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out of band, A's user is disabled: refresh notices, the next up re-enables it.
    admin_api(admin).user_disable(a)
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    assert client_a.get_object(Bucket=name, Key="tmp/report.csv")["Body"].read() == b"1,2,3"

    # Removing the uploads bucket and its rule retains both, objects included. A's key reaches the
    # project's declared buckets by name: no longer declared, the retained bucket leaves its policy (the
    # update); the bucket's own key still reaches it.
    write_project(project_dir, a, [resources_a[0], key])
    assert changes(stack.up()) == {"delete": 3, "update": 1}
    admin_s3 = s3_as(admin["minio"].user, admin["minio"].password)
    assert admin_s3.get_object(Bucket=name, Key="tmp/report.csv")["Body"].read() == b"1,2,3"
    rules = admin_s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
    assert sorted(r["ID"] for r in rules) == [f"devstack:{a}:expire-tmp", f"devstack:{a}:{name}"]
    assert bucket_key.get_object(Bucket=name, Key="tmp/report.csv")["Body"].read() == b"1,2,3"
    assert denied(lambda: client_a.get_object(Bucket=name, Key="tmp/report.csv"))
    assert client_a.get_object(Bucket=a, Key="own.txt")["Body"].read() == b"A"
    assert changes(stack.preview()) == {}

    # The composed export, last so the lifecycle above is shown even while it fails: numbers come
    # back from the provider protocol as floats, and the template must not render the port with a '.0'.
    assert (key_a["endpoint"], uploads["endpoint"]) == (ENDPOINT, ENDPOINT)
