"""Spec 27's own devstack.yaml (examples/acme, verbatim) through the real CLI on the local engines.

The workspace names its instances as the spec does (`postgres`, `minio`). The
run checks the spec's acceptance: database `acme` reachable with the
predictable DSN `postgres://acme:acme@host:port/acme`; the bucket with a
7-day expiry; the bucket's generated key reaching that bucket and no other;
the service's PGPASSWORD delivered by `devstack env` and `devstack exec`;
a second up changing nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import psycopg
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin
from psycopg import sql

from tests.e2e.conftest import changes, e2e_stack
from tools.engines.ports import PORTS
from tools.pulumi_env import ROOT

PG = ("127.0.0.1", PORTS["postgres"])
MINIO = ("127.0.0.1", PORTS["minio"])
DEVSTACK = Path(sys.executable).parent / "devstack"
#: The spec's project name: fixed, so the fixture clears what an earlier, killed run may have left.
PROJECT = "acme"


def s3_as(key: str, secret: str):
    return boto3.client("s3", endpoint_url=f"http://{MINIO[0]}:{MINIO[1]}", region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def _clear(admin) -> None:
    """Drop everything of project `acme` on the two engines (nothing else uses that name in the tests)."""
    with psycopg.connect(host=PG[0], port=PG[1], user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(PROJECT)))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(PROJECT)))
    s3 = s3_as(admin["minio"].user, admin["minio"].password)
    mine = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith(PROJECT + "-")]
    for bucket in mine:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for version in page.get("Versions", []) + page.get("DeleteMarkers", []):
                s3.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
        s3.delete_bucket(Bucket=bucket)
    api = MinioAdmin(endpoint=f"{MINIO[0]}:{MINIO[1]}", secure=False,
                     credentials=StaticProvider(admin["minio"].user, admin["minio"].password))
    users = json.loads(api.user_list() or "{}")
    policies = json.loads(api.policy_list() or "{}")
    for user in [u for u in users if u.startswith(PROJECT + "-")]:
        _ignore_missing(lambda: api.user_remove(user))
    for policy in [p for p in policies if p.startswith(f"devstack-{PROJECT}-")]:
        _ignore_missing(lambda: api.policy_remove(policy))


def _ignore_missing(call) -> None:
    try:
        call()
    except MinioAdminException:
        pass


@pytest.fixture
def acme(admin):
    _clear(admin)
    yield
    _clear(admin)


def devstack(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The `devstack` command as a user runs it, on the test's backend."""
    environ = {**os.environ, **env}
    environ.pop("PULUMI_CONFIG_PASSPHRASE", None)  # read from the passphrase file, as the verbs do
    return subprocess.run([str(DEVSTACK), *args, "--work-dir", str(work)], env=environ, cwd=work,
                          capture_output=True, text=True, timeout=300)


def test_the_specs_example_goes_up_as_the_spec_says(project_dir, offline_env, pulumi_command, admin, acme):
    (project_dir / "acme").mkdir()
    shutil.copy(ROOT / "examples" / "acme" / "devstack.yaml", project_dir / "acme" / "devstack.yaml")
    shared = {
        "postgres": {"engine": "postgres", "host": PG[0], "port": PG[1], "adminUser": admin["postgres"].user,
                     "adminSecret": "postgresAdmin"},
        "minio": {"engine": "minio", "host": MINIO[0], "port": MINIO[1], "adminUser": admin["minio"].user,
                  "adminSecret": "minioAdmin"},
    }
    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared, ["acme/devstack.yaml"],
                      {"postgresAdmin": admin["postgres"].password, "minioAdmin": admin["minio"].password})
    stack.up(on_output=lambda _: None)

    # The spec's documented DSN: password = project name.
    with psycopg.connect(f"postgres://acme:acme@{PG[0]}:{PG[1]}/acme") as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("acme", "acme")

    resources = stack.outputs()["acme"].value["resources"]
    uploads = resources["minio/bucket/acme-uploads"]
    bucket = uploads["bucket"]
    assert bucket == "acme-uploads"  # an explicit name carrying the project's prefix is not prefixed again
    rule = resources["minio/lifecycle/acme-uploads"]
    assert rule["bucket"] == bucket  # the lifecycle without params.bucket is on the bucket its name names
    admin_s3 = s3_as(admin["minio"].user, admin["minio"].password)
    (expiry,) = admin_s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert expiry["Expiration"]["Days"] == 7 and expiry["Status"] == "Enabled"

    # The bucket's generated key reaches that bucket and no other.
    key = s3_as(uploads["accessKey"], uploads["secretKey"])
    key.put_object(Bucket=bucket, Key="hello.txt", Body=b"hi")
    assert key.get_object(Bucket=bucket, Key="hello.txt")["Body"].read() == b"hi"
    other = f"{PROJECT}-elsewhere"
    admin_s3.create_bucket(Bucket=other)
    with pytest.raises(ClientError) as refused:
        key.put_object(Bucket=other, Key="x", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"

    # The service's PGPASSWORD arrives through `devstack env` and `devstack exec`, never a file.
    shown = devstack(project_dir, offline_env, "env", PROJECT, "api", "-w", "e2e", "--show-secrets", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["env"] == {"PGPASSWORD": "acme"}
    code = f"import os, psycopg; print(psycopg.connect(host='127.0.0.1', port={PG[1]}, user='acme', dbname='acme').info.dbname)"
    ran = devstack(project_dir, offline_env, "exec", PROJECT, "api", "-w", "e2e", "--", sys.executable, "-c", code)
    assert (ran.returncode, ran.stdout.strip()) == (0, "acme"), ran.stderr

    assert changes(stack.up(on_output=lambda _: None)) == {}  # idempotent: nothing new on a second up
