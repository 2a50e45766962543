"""The local MinIO engine: start/stop/status, root credential, and bucket-limited access.

Runs the real MinIO server (built by tools/minio/build.sh; the engine builds
it on first start) on its loopback port. When the project's engines are
already running (scripts/test starts them before pytest), that server is
tested with its root credential from the stack config and left running;
otherwise a scratch server is started in a temporary engines dir with fixed
test credentials and stopped afterwards. Buckets, users, policies and access
keys made here carry a per-run suffix and are removed again.
"""
from __future__ import annotations

import io
import os
import uuid
from types import SimpleNamespace

import pytest

from minio import Minio  # noqa: E402
from minio.credentials import StaticProvider  # noqa: E402
from minio.error import S3Error  # noqa: E402
from minio.minioadmin import MinioAdmin  # noqa: E402

from tests.providers.conftest import engine_under_test
from tools.engines import base, minio as minio_engine  # noqa: E402
from tools.engines.ports import PORTS

# These start and stop engines of their own on the real ports: scripts/test runs
# them (`-m lifecycle`) before it starts the shared engines for everything else.
pytestmark = pytest.mark.lifecycle

STARTED_HERE = {"engine": False}
RUN = uuid.uuid4().hex[:8]
# the fixture replaces this with the stack config's root credential when it reuses a running server
ROOT = SimpleNamespace(user="devstack-root", password="minio-test-root-password")
BUCKET_A = f"proj-a-{RUN}"
BUCKET_B = f"proj-b-{RUN}"
ADDRESS = f"127.0.0.1:{PORTS['minio']}"


@pytest.fixture(scope="module")
def engine(request, tmp_path_factory):
    """The server under test; ROOT becomes its root credential (see module docstring)."""
    yield from engine_under_test(request, tmp_path_factory, minio_engine.ENGINE, ROOT, STARTED_HERE)


def s3(user, password):
    return Minio(ADDRESS, access_key=user, secret_key=password, secure=False, region="us-east-1")


def bucket_policy(bucket_prefix):
    resources = [f"arn:aws:s3:::{bucket_prefix}*", f"arn:aws:s3:::{bucket_prefix}*/*"]
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": resources}]}


@pytest.fixture(scope="module")
def tenants(engine):
    """Buckets of two projects; project A gets a user and an access key limited to its buckets."""
    root = s3(ROOT.user, ROOT.password)
    for bucket in (BUCKET_A, BUCKET_B):
        root.make_bucket(bucket)
    root.put_object(BUCKET_B, "secret.txt", io.BytesIO(b"b-only"), 6)
    admin = MinioAdmin(endpoint=ADDRESS, credentials=StaticProvider(ROOT.user, ROOT.password), secure=False)
    policy_name = f"proj-a-{RUN}"
    admin.policy_add(policy_name, policy=bucket_policy(f"proj-a-{RUN}"))
    user = SimpleNamespace(user=f"proj-a-user-{RUN}", password="proj-a-user-password")
    admin.user_add(user.user, user.password)
    admin.attach_policy([policy_name], user=user.user)
    key = SimpleNamespace(user=f"pakey{RUN}", password="proj-a-access-key-secret")
    admin.add_service_account(access_key=key.user, secret_key=key.password,
                              policy=bucket_policy(f"proj-a-{RUN}"))
    yield SimpleNamespace(user=user, key=key)
    admin.delete_service_account(key.user)
    admin.user_remove(user.user)
    admin.policy_remove(policy_name)
    for bucket in (BUCKET_A, BUCKET_B):
        for obj in list(root.list_objects(bucket, recursive=True)):
            root.remove_object(bucket, obj.object_name)
        root.remove_bucket(bucket)


def test_start_is_idempotent_and_status_healthy(engine):
    pid = engine.running_pid()
    assert pid is not None
    again = engine.start(ROOT)
    assert "already running" in again and str(pid) in again
    status = engine.status()
    assert status.running and status.healthy and status.pid == pid and status.address == ADDRESS
    assert base.http_status(f"http://{ADDRESS}/minio/health/live") == 200


def test_root_secret_only_in_environment(engine):
    pid = engine.running_pid()
    assert ROOT.password not in base.process_cmdline(pid)
    environ = open(f"/proc/{pid}/environ", "rb").read().decode()
    assert f"MINIO_ROOT_PASSWORD={ROOT.password}" in environ
    for path in engine.dir.iterdir():
        if path.is_file():
            assert ROOT.password not in path.read_text(errors="replace"), path


def test_root_credential_required(engine):
    assert s3(ROOT.user, ROOT.password).list_buckets() is not None
    with pytest.raises(S3Error):
        s3(ROOT.user, "wrong-password-123").list_buckets()
    wrong = SimpleNamespace(user=ROOT.user, password="wrong-password-123")
    with pytest.raises(base.EngineError) as info:
        engine.ensure_credential(wrong)
    message = str(info.value)
    assert "minio" in message and ADDRESS in message and str(engine.log_file) in message


@pytest.mark.parametrize("who", ["user", "key"])
def test_bucket_limited_credential_cannot_reach_other_bucket(tenants, who):
    cred = getattr(tenants, who)
    client = s3(cred.user, cred.password)
    client.put_object(BUCKET_A, f"{who}.txt", io.BytesIO(b"mine"), 4)
    assert f"{who}.txt" in [o.object_name for o in client.list_objects(BUCKET_A)]
    with pytest.raises(S3Error) as info:
        list(client.list_objects(BUCKET_B))
    assert info.value.code == "AccessDenied"
    with pytest.raises(S3Error) as info:
        client.get_object(BUCKET_B, "secret.txt")
    assert info.value.code == "AccessDenied"
    with pytest.raises(S3Error) as info:
        client.put_object(BUCKET_B, "intrusion.txt", io.BytesIO(b"x"), 1)
    assert info.value.code == "AccessDenied"
    assert BUCKET_B not in [b.name for b in client.list_buckets()]


def test_stop_ends_exactly_our_process(engine, tenants):
    if not STARTED_HERE["engine"]:
        pytest.skip("not run: the engine under test is the project's running one, which a test must "
                    "not stop; this runs when no engine is up (a scratch engine is then started)")
    pid = engine.running_pid()
    real = engine.pid_file.read_text()
    engine.pid_file.write_text(f"{os.getpid()} {base.process_start_time(os.getpid())}\n")
    assert engine.running_pid() is None  # a live pid that is not our server is never ours
    engine.pid_file.write_text(real)
    assert f"stopped (pid {pid})" in engine.stop()
    assert base.process_start_time(pid) is None
    assert engine.status().running is False
    # data and IAM survive a restart
    engine.start(ROOT)
    client = s3(tenants.user.user, tenants.user.password)
    assert "user.txt" in [o.object_name for o in client.list_objects(BUCKET_A)]
    with pytest.raises(S3Error):
        list(client.list_objects(BUCKET_B))
