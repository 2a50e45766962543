"""MinIO: project A's access key (AWS_* as `devstack env` gives them) against B's bucket, through boto3.

A's key's policy names A's buckets only (`<project>`, `<project>-*`), so
MinIO answers every request on B's bucket with AccessDenied. Bucket
management (delete, policy, versioning) is devstack's admin's alone: a
tenant's key is refused it on its own buckets too.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.isolation.conftest import Matrix, Op, Tenants, cases

ENGINE = "minio"
SEED = "seed.txt"


def s3(tenants: Tenants, project: str):
    """`project`'s service's S3 client, as its AWS_* variables give it."""
    env = tenants.env(project, ENGINE)
    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10))


def bucket(tenants: Tenants, project: str) -> str:
    return tenants.env(project, ENGINE)["S3_BUCKET"]


def denied(err: BaseException) -> str | None:
    """S3's AccessDenied; a HEAD request's answer has no body to name it, only the status 403."""
    code = err.response.get("Error", {}).get("Code") if isinstance(err, ClientError) else None
    return {"AccessDenied": "AccessDenied", "403": "403 (HEAD: AccessDenied without a body)"}.get(code)


@pytest.fixture(scope="module")
def seeded(tenants: Tenants) -> Tenants:
    """Each project's service puts `seed.txt` into its own bucket with its own key."""
    for project in (tenants.a, tenants.b):
        s3(tenants, project).put_object(Bucket=bucket(tenants, project), Key=SEED, Body=project.encode())
    return tenants


def as_a(act: Callable[..., object]):
    """`act(client, name)`: A's client on the target's bucket `name`; `act` may also take `owner`."""
    def run(tenants: Tenants, target: str) -> None:
        act(s3(tenants, tenants.a), bucket(tenants, target), owner=target)
    return run


def read(client, name: str, owner: str) -> None:
    assert client.get_object(Bucket=name, Key=SEED)["Body"].read() == owner.encode()


def listed(client, name: str, **_) -> None:
    assert SEED in [o["Key"] for o in client.list_objects_v2(Bucket=name).get("Contents", [])]


def put_then_delete(client, name: str, **_) -> None:
    client.put_object(Bucket=name, Key="scratch.txt", Body=b"x")
    client.delete_object(Bucket=name, Key="scratch.txt")


def public_policy(name: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ["*"]},
                       "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{name}/*"]}]})



OPS = [
    Op("read: GetObject", as_a(read)),
    Op("read: HeadObject", as_a(lambda c, name, **_: c.head_object(Bucket=name, Key=SEED))),
    Op("write: PutObject", as_a(lambda c, name, **_: c.put_object(Bucket=name, Key="w.txt", Body=b"x"))),
    Op("list: ListObjectsV2", as_a(listed)),
    Op("delete: DeleteObject", as_a(put_then_delete)),
    Op("delete: DeleteObject existing", as_a(lambda c, name, **_: c.delete_object(Bucket=name, Key=SEED)),
       own=False),
    Op("delete: DeleteBucket", as_a(lambda c, name, **_: c.delete_bucket(Bucket=name)), own=False),
    Op("administer: PutBucketPolicy", as_a(lambda c, name, **_: c.put_bucket_policy(
        Bucket=name, Policy=public_policy(name))), own=False),
    Op("administer: PutBucketVersioning", as_a(lambda c, name, **_: c.put_bucket_versioning(
        Bucket=name, VersioningConfiguration={"Status": "Suspended"})), own=False),
]


@pytest.mark.parametrize("op,target", cases(OPS))
def test_minio(seeded: Tenants, matrix: Matrix, op: Op, target: str) -> None:
    matrix.run(ENGINE, seeded, op, target, denied)
