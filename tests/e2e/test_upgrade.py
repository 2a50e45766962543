"""Upgrading from the previous release end to end: what it made survives the new release's `up`.

The previous release (PREVIOUS, checked out as a git worktree and put first on
the program's and the provider's PYTHONPATH) brings up one project with
explicit names on every engine but NATS (`declarations` says why); its resources record no `naming` and carry
owner-prefixed engine names (bucket `<p>-files` for `files`). The same stack
then goes through the working tree's release: preview and up replace, rename
and drop nothing; a second preview and a refresh find nothing to do; every
engine name and password is the one the previous release made, and the
credentials still log in. A bucket declared afterwards takes the new rules
(`fresh<t>` is bucket `fresh<t>`); the destroy at the end drops everything
(all purge: true).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import redis
from botocore.exceptions import ClientError
from pulumi import automation as auto

from tests.e2e.conftest import changes, e2e_stack, local_workspace, write_project
from tests.e2e.test_kafka import topic_exists
from tests.e2e.test_localstack import aws
from tests.e2e.test_minio import s3_as
from tests.e2e.test_postgres_database import database_exists
from tests.kafka_clients import produce
from tools.engines.ports import PORTS
from tools.pulumi_env import ROOT

#: The last commit before resources recorded their naming: "the previous release".
PREVIOUS = "7ef178c"
PG, REDIS = ("127.0.0.1", PORTS["postgres"]), ("127.0.0.1", PORTS["redis"])
#: Steps that would drop, rename or replace what the previous release made.
DESTRUCTIVE = {"delete", "replace", "create-replacement", "delete-replaced", "discard", "read-replacement"}
#: The outputs that name an engine object or hold a credential: the previous release's must stay.
KEPT = ("bucket", "topic", "stream", "consumer", "user", "database", "queue", "queueUrl", "accessKey", "policy",
        "principal", "prefix", "keyPrefix", "subjects", "rule", "password", "secretKey")


def shared(admin) -> dict[str, dict]:
    def instance(engine: str, port: int, secret: str, user: str | None = None) -> dict:
        return {"engine": engine, "host": "127.0.0.1", "port": port, "adminUser": user or admin[engine].user,
                "adminSecret": secret}

    return {"pg": instance("postgres", PG[1], "pgAdmin"), "objects": instance("minio", PORTS["minio"], "minioAdmin"),
            "cache": instance("redis", REDIS[1], "redisAdmin"), "kafka": instance("kafka", PORTS["kafka"], "kafkaAdmin"),
            "events": instance("nats", PORTS["nats"], "natsAdmin"),
            "aws": instance("localstack", PORTS["localstack"], "awsAdmin")}


def secrets_of(admin) -> dict[str, str]:
    return {"pgAdmin": admin["postgres"].password, "minioAdmin": admin["minio"].password,
            "redisAdmin": admin["redis"].password, "kafkaAdmin": admin["kafka"].password,
            "natsAdmin": admin["nats"].password, "awsAdmin": admin["localstack"].password}


def declarations(p: str) -> list[dict]:
    """Explicit names on every engine but NATS, each purge: true so the final destroy leaves the engines clean.

    NATS is left out: the previous release logs in to nats with the shared account's user and password,
    which the engine in operator mode refuses, so it can make nothing there. A NATS upgrade goes through
    the engine's start instead (streams of the former shared account move into their owners' accounts),
    which tests/tools/engines/test_script.py's lifecycle tests cover."""
    entries = [
        {"uses": "pg", "kind": "database", "credentials": "generated"},
        {"uses": "pg", "kind": "user", "name": "reader", "credentials": "generated"},
        {"uses": "objects", "kind": "bucket", "name": f"{p}-uploads", "credentials": "generated"},
        {"uses": "objects", "kind": "lifecycle", "name": f"{p}-uploads", "params": {"expireDays": 7}},  # its bucket
        {"uses": "objects", "kind": "bucket", "name": "files"},
        {"uses": "objects", "kind": "access_key", "credentials": "generated"},
        {"uses": "kafka", "kind": "topic", "name": "orders", "params": {"partitions": 1}},
        {"uses": "kafka", "kind": "acl", "credentials": "generated"},
        {"uses": "cache", "kind": "acl_user", "name": "cache", "credentials": "generated"},
        {"uses": "aws", "kind": "queue", "name": "jobs"},
    ]
    return [{**entry, "purge": True} for entry in entries]


def kept(resources: dict[str, dict]) -> dict[str, dict]:
    """Per resource, the outputs naming its engine object or holding its credential."""
    return {key: {name: value for name, value in out.items() if name in KEPT and value is not None}
            for key, out in resources.items()}


class Steps:
    """The steps a preview or an up reports (`on_event`), as (op, urn)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            self.seen.append((str(getattr(meta.op, "value", meta.op)), meta.urn))

    def destructive(self) -> list[tuple[str, str]]:
        return [(op, urn) for op, urn in self.seen if op in DESTRUCTIVE]


def run(command, **kwargs):
    """`command` (preview, up) with its steps, asserting none of them would drop or replace anything."""
    steps = Steps()
    result = command(on_event=steps, on_output=print, **kwargs)
    assert steps.destructive() == [], steps.seen
    assert not set(changes(result)) & DESTRUCTIVE, changes(result)
    return result


def bucket_exists(admin, bucket: str) -> bool:
    try:
        s3_as(admin["minio"].user, admin["minio"].password).head_bucket(Bucket=bucket)
    except ClientError:
        return False
    return True


def role_exists(admin, role: str) -> bool:
    with psycopg.connect(host=PG[0], port=PG[1], user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres") as conn:
        return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def clean_up(work: Path, env: dict[str, str], old_env: dict[str, str], command: auto.PulumiCommand,
             made: auto.Deployment | None) -> None:
    """After a failure: destroy (everything is purge: true) what the stack holds, then, with the previous
    release, what it had made (a refresh may have dropped it from the state); either may find things gone."""
    for environ, deployment in ((env, None), (old_env, made)):
        try:
            stack = auto.Stack.select("e2e", local_workspace(work, environ, command))
            if deployment is not None:
                stack.import_stack(deployment)
            stack.destroy()
        except auto.errors.CommandError as err:
            print(f"clean-up destroy failed: {err}")


@pytest.fixture
def previous_release(tmp_path: Path):
    """The previous release's tree, as a detached git worktree; removed afterwards."""
    tree = tmp_path / "previous"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), PREVIOUS],
                   check=True, capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True,
                       capture_output=True)


def test_an_up_after_upgrading_keeps_what_the_previous_release_made(project_dir, offline_env, pulumi_command,
                                                                    admin, previous_release):
    started = time.monotonic()
    token = secrets.token_hex(3)
    p, fresh = f"up{token}", f"fresh{token}"
    old_env = {**offline_env, "PYTHONPATH": str(previous_release)}
    # The previous release's modules are what the program and the provider import: PYTHONPATH comes
    # before the editable install's finder (appended to sys.meta_path), the program's directory holds none.
    where = subprocess.run([sys.executable, "-c", "import providers; print(providers.__file__)"], cwd=project_dir,
                           env={**os.environ, **old_env}, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(previous_release), where.stdout
    shutil.copy(previous_release / "__main__.py", project_dir / "__main__.py")  # the program is the release's too
    files = [write_project(project_dir, p, declarations(p))]
    old = e2e_stack(project_dir, old_env, pulumi_command, shared(admin), files, secrets_of(admin))
    destroyed, made = False, None
    try:
        up = old.up(on_output=print)
        made = old.export_stack()  # for the clean-up, should the new release lose track of something
        before = kept(up.outputs[p].value["resources"])
        # Owner-prefixed names: the previous release made these, not the working tree's code.
        assert before[f"objects/bucket/{p}-uploads"]["bucket"] == f"{p}-{p}-uploads"
        assert before["objects/bucket/files"]["bucket"] == f"{p}-files"
        assert before["kafka/topic/orders"]["topic"] == f"{p}.orders"
        assert before["pg/user/reader"]["user"] == f"{p}_reader"
        print(f"previous release up: {time.monotonic() - started:.1f}s")

        # The working tree's release on the same stack and backend.
        shutil.copy(ROOT / "__main__.py", project_dir / "__main__.py")
        stack = auto.Stack.select("e2e", local_workspace(project_dir, offline_env, pulumi_command))
        run(stack.preview)
        upgraded = run(stack.up)
        print("upgrade up:", changes(upgraded))
        assert changes(stack.preview(on_output=print)) == {}
        # Naming is no identity field, so a resource that lost its naming shows in no diff: the
        # refresh (reading the engine where the new code looks) and the names below catch it.
        assert changes(stack.refresh(on_output=print)) == {}

        after = kept(stack.outputs()[p].value["resources"])
        assert after == before
        # The credentials the previous release generated still log in.
        for login in (after["pg/user/reader"], after[f"pg/database/{p}"]):
            with psycopg.connect(host=PG[0], port=PG[1], user=login["user"], password=login["password"],
                                 dbname=p, connect_timeout=5) as conn:
                assert conn.execute("SELECT current_user").fetchone() == (login["user"],)
        uploads = after[f"objects/bucket/{p}-uploads"]
        own_key = s3_as(uploads["accessKey"], uploads["secretKey"])
        own_key.put_object(Bucket=uploads["bucket"], Key="kept.txt", Body=b"kept")
        assert own_key.get_object(Bucket=uploads["bucket"], Key="kept.txt")["Body"].read() == b"kept"
        cache = after["cache/acl_user/cache"]
        with redis.Redis(host=REDIS[0], port=REDIS[1], username=cache["user"], password=cache["password"]) as client:
            assert client.ping()
        principal = after[f"kafka/acl/{p}"]
        assert produce(principal["user"], principal["password"], after["kafka/topic/orders"]["topic"]) is None

        # A resource declared now takes the new rules: its explicit name is the bucket's.
        write_project(project_dir, p, [*declarations(p),
                                       {"uses": "objects", "kind": "bucket", "name": fresh, "purge": True}])
        grown = run(stack.up)
        print("new bucket up:", changes(grown))
        now = kept(grown.outputs[p].value["resources"])
        assert now.pop(f"objects/bucket/{fresh}")["bucket"] == fresh
        assert now == before
        assert bucket_exists(admin, fresh) and not bucket_exists(admin, f"{p}-{fresh}")
        # The project's key (previous naming: a `<p>-*` policy) reaches the bucket no prefix covers.
        key = now[f"objects/access_key/{p}"]
        s3_as(key["accessKey"], key["secretKey"]).put_object(Bucket=fresh, Key="new.txt", Body=b"new")

        stack.destroy(on_output=print)
        destroyed = True
        for bucket in (f"{p}-{p}-uploads", f"{p}-files", fresh):
            assert not bucket_exists(admin, bucket), bucket
        assert not database_exists(admin, p) and not role_exists(admin, f"{p}_reader")
        assert not topic_exists(admin, f"{p}.orders")
        assert not aws("sqs").list_queues(QueueNamePrefix=f"{p}-").get("QueueUrls")
        with redis.Redis(host=REDIS[0], port=REDIS[1], username=admin["redis"].user,
                         password=admin["redis"].password) as client:
            assert not client.acl_getuser(f"{p}-cache")
        print(f"upgrade test: {time.monotonic() - started:.1f}s")
    finally:
        if not destroyed:
            clean_up(project_dir, offline_env, old_env, pulumi_command, made)
