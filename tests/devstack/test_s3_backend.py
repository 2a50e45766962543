"""The s3:// backend (a bucket of the local MinIO): the ledger's history object written by conditional
writes, and Pulumi's lock objects read, so verbs wait for a running holder and refuse a killed one."""

from __future__ import annotations

from datetime import datetime, timezone

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devstack import history, ledger, locks, removal, state
from devstack.errors import EngineError
from devstack.locks import LockWait
from tests.devstack.conftest import Sandbox, import_state, make_env, synthetic_resources, token
from tests.devstack.test_locks import held_up
from tests.waiting import eventually

MINIO_PORT = 29000


@contextmanager
def s3_backend(admin, prefix: str = "locks") -> Iterator[tuple[str, dict[str, str], object]]:
    """A new bucket of the local MinIO as an s3:// backend (under a path prefix, as teams share one bucket):
    its URL, the AWS variables pulumi and devstack read, and an S3 client; emptied and removed after."""
    import boto3
    from botocore.config import Config

    a = admin["minio"]
    bucket = f"{prefix}-{token()}".lower().replace("_", "-")
    aws = {"AWS_ACCESS_KEY_ID": a.user, "AWS_SECRET_ACCESS_KEY": a.password, "AWS_REGION": "us-east-1"}
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{MINIO_PORT}", aws_access_key_id=a.user,
                          aws_secret_access_key=a.password, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
    client.create_bucket(Bucket=bucket)
    try:
        yield (f"s3://{bucket}/team?endpoint=127.0.0.1:{MINIO_PORT}&disableSSL=true&s3ForcePathStyle=true"
               "&region=us-east-1"), aws, client
    finally:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])
        client.delete_bucket(Bucket=bucket)


@pytest.fixture(scope="module")
def s3(admin):
    with s3_backend(admin, "s3store") as made:
        yield made


def test_two_writers_at_once_both_land(s3):
    """Each read-modify-write waits for the other's lock object: no increment is lost."""
    url, aws, _client = s3
    stores = [history.S3Store(url, aws, "count") for _ in range(2)]
    barrier, failed = threading.Barrier(2), []

    def bump(store: history.S3Store) -> None:
        barrier.wait()
        try:
            for _ in range(5):
                with store.writing() as doc:
                    doc["seq"] += 1
        except Exception as err:  # reported below, not lost in the thread
            failed.append(err)

    threads = [threading.Thread(target=bump, args=(store,)) for store in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failed == [] and stores[0].load()["seq"] == 10


def test_a_dead_writers_lock_is_taken_over_and_a_late_write_is_refused(s3, monkeypatch):
    """A lock object past its lease is a dead writer's: taken over. A writer that held its lock past the
    lease while another wrote fails on the If-Match of its write, and the other's edit stays."""
    url, aws, client = s3
    store = history.S3Store(url, aws, "lease")
    bucket, key = store.bucket.bucket, store.key
    client.put_object(Bucket=bucket, Key=f"{key}.lock", Body=b"{}")
    monkeypatch.setattr(history, "S3_LOCK_LEASE", 0.0)
    with store.writing() as doc:
        doc["seq"] = 1
    assert store.load()["seq"] == 1
    with pytest.raises(EngineError, match="another writer changed it"):
        with store.writing() as doc:
            doc["seq"] = 2
            client.put_object(Bucket=bucket, Key=key, Body=json.dumps({**history.empty(), "seq": 7}).encode())
    assert store.load()["seq"] == 7
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix=f"{key}.lock")  # released either way


def test_a_running_up_on_the_s3_backend_is_waited_for_and_a_killed_runs_lock_refused(s3, tmp_path):
    """A real `pulumi up` holds the stack's lock object: destroy waits for it naming the holder and past
    --lock-wait refuses, nothing changed. A lock of a pid of this machine that runs no pulumi is refused at once."""
    url, aws, client = s3
    box = Sandbox(env={**make_env(tmp_path / "pulumi"), **aws}, work=tmp_path / "work")
    box.work.mkdir()
    stack = ledger.open_stack("held", url, box.work, env=box.env, create=True)
    import_state(stack, synthetic_resources("held", [
        {"engine": "postgres", "instance": "pg", "kind": "database", "name": "alpha", "owner": "alpha"}]))
    proc, flag = held_up(stack, box.work, tmp_path)
    try:
        held = eventually(lambda: locks.stack_locks(stack), 60, "the held run to take the stack's lock")
        assert [(lock.pid, lock.hostname, lock.running_here) for lock in held] == [(proc.pid, socket.gethostname(),
                                                                                    True)]
        assert re.fullmatch(r"team/\.pulumi/locks/organization/devstack/held/[\w-]+\.json", held[0].where)
        said: list[str] = []
        with pytest.raises(EngineError, match=f"stayed locked by pid {proc.pid} of .*nothing was changed"):
            removal.destroy_stack(stack, lock_wait=LockWait(1.0, said.append))
        assert said and said[0].startswith(f"waiting for the lock on stack 'held' held by pid {proc.pid} of ")
        assert len(state.tracked_resources(stack)) == 1
    finally:
        flag.unlink(missing_ok=True)
        proc.wait(timeout=60)
    assert locks.stack_locks(stack) == []

    gone = subprocess.Popen(["true"])  # a pid that has finished
    gone.wait()
    key = "team/.pulumi/locks/organization/devstack/held/dead.json"
    client.put_object(Bucket=url.split("/")[2], Key=key, Body=json.dumps({
        "pid": gone.pid, "username": "u", "hostname": socket.gethostname(),
        "timestamp": datetime.now(timezone.utc).isoformat()}))
    started = time.monotonic()
    with pytest.raises(EngineError, match=f"locked by pid {gone.pid} of this machine.*a killed run's lock"):
        removal.destroy_stack(stack, lock_wait=LockWait(600, lambda _: None))
    assert time.monotonic() - started < 30  # refused at once, not after the 600 s wait
    locks.release_lock(box.env | {"PULUMI_BACKEND_URL": url}, locks.stack_locks(stack)[0])
    assert locks.stack_locks(stack) == [] and len(state.tracked_resources(stack)) == 1
