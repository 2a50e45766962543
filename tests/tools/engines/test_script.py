"""The engines script (`python -m tools.engines`) against the real servers.

Runs in a scratch engines dir (DEVSTACK_ENGINES_DIR under .devstack/), so a
developer's engine data is never touched. The ports are the real ones, so
while the developer's engines run (e.g. for the provider tests) these tests
are reported as skipped, with the busy ports named, instead of starting,
restarting or stopping someone else's servers.

Admin credentials are fixed test values passed to `main(credentials=...)`
through stdin of a starter process (tools.engines.credentials is the stack
config's business, not this test's).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import nats
import psycopg
import pytest
import redis

from providers.identity import Identity
from providers.lifecycle import is_stale
from providers.nats.account import Account
from providers.nats.claims import AccountSpec
from providers.nats.session import admin_credential
from providers.nats.stream import Stream
from providers.redis.acl_user import AclUser
from tests.conftest import configured
from tests.engines_cli import engines_cli
from tests.providers.conftest import props
from tests.waiting import eventually
from tools.engines.ports import NATS_MONITOR_PORT, PORTS as ENGINE_PORTS

# These start and stop engines of their own on the real ports: scripts/test runs
# them (`-m lifecycle`) before it starts the shared engines for everything else.
pytestmark = pytest.mark.lifecycle

REPO = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
PORTS = {engine: ENGINE_PORTS[engine] for engine in ("postgres", "redis", "localstack", "nats")}
ENGINES = list(PORTS)  # registry order
CREDS = {
    "postgres": ("devstack_admin", "pg-test-Pa55-word"),
    "redis": ("devstack_admin", "redis-test-Pa55-word"),
    "nats": ("devstack_admin", "nats-test-Pa55-word"),
    "localstack": ("test-access-key", "test-secret-key-Pa55"),
}
# Must not reach any server's environment (base.base_environment is all they get).
CANARY = ("DEVSTACK_TEST_CANARY", "canary-" + uuid.uuid4().hex)



# --- helpers ----------------------------------------------------------------

def run_cli(engines_dir: Path, *args: str, creds: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m tools.engines ARGS` on the scratch engines dir; `start` takes `creds` (default CREDS)."""
    return engines_cli({"DEVSTACK_ENGINES_DIR": str(engines_dir), CANARY[0]: CANARY[1]}, *args,
                       creds=creds or CREDS, timeout=240)


def run_probe(engines_dir: Path, code: str) -> subprocess.CompletedProcess:
    """Run Python `code` in a fresh interpreter against the scratch engines dir."""
    env = {**os.environ, "DEVSTACK_ENGINES_DIR": str(engines_dir)}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)


def start_time(pid: int) -> int | None:
    """Start time of a live, non-zombie process, else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def pid_file(engines_dir: Path, engine: str) -> tuple[int, int]:
    pid, started = (engines_dir / engine / f"{engine}.pid").read_text().split()
    return int(pid), int(started)


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, start time) of every live process in session `sid`: a server and its workers."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid and (started := start_time(int(entry.name))):
                    members.append((int(entry.name), started))
            except OSError:
                pass
    return members


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def run_nats(coro_fn):
    return asyncio.run(coro_fn())


# --- fixtures ---------------------------------------------------------------

@pytest.fixture(scope="module")
def engines_dir():
    """A scratch engines dir with all four engines started once; stopped and removed at the end."""
    busy = [port for port in [*PORTS.values(), NATS_MONITOR_PORT] if _port_open(port)]
    if busy:
        pytest.fail(f"ports {busy} on {HOST} are in use (engines already running?); these tests start "
                    "and stop their own: run `python -m tools.engines stop` first")
    path = REPO / ".devstack" / "test-engines" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    first = run_cli(path, "start", *ENGINES)
    path.joinpath("first-start.out").write_text(first.stdout + first.stderr)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        yield path
    finally:
        stopped = run_cli(path, "stop", *ENGINES)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        shutil.rmtree(path)


# --- start / status ---------------------------------------------------------

def test_first_start_started_every_engine_healthy(engines_dir):
    output = (engines_dir / "first-start.out").read_text()
    for engine, port in PORTS.items():
        pid, _ = pid_file(engines_dir, engine)
        assert f"{engine}: started on {HOST}:{port} (pid {pid})" in output


def test_second_start_is_a_noop(engines_dir):
    before = {engine: pid_file(engines_dir, engine) for engine in ENGINES}
    again = run_cli(engines_dir, "start", *ENGINES)
    assert again.returncode == 0, again.stderr
    for engine, port in PORTS.items():
        pid, _ = before[engine]
        assert f"{engine}: already running on {HOST}:{port} (pid {pid})" in again.stdout, again.stderr
        assert pid_file(engines_dir, engine) == before[engine]


def test_status_reports_running_with_address_pid_and_data_dir(engines_dir):
    status = run_cli(engines_dir, "status", *ENGINES)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ENGINES
    for line, (engine, port) in zip(lines, PORTS.items(), strict=True):
        pid, _ = pid_file(engines_dir, engine)
        name, state, address, _, shown_pid, data_dir = line.split()
        assert (state, address, int(shown_pid)) == ("running", f"{HOST}:{port}", pid)
        assert Path(data_dir).is_relative_to(engines_dir / engine)


# --- admin credentials work, nothing else does ------------------------------

def test_postgres_admin_logs_in_over_tcp_with_password(engines_dir):
    user, password = CREDS["postgres"]
    with psycopg.connect(host=HOST, port=PORTS["postgres"], user=user, password=password, dbname="postgres") as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,)
    for who, secret in [(user, "wrong"), ("postgres", "")]:
        with pytest.raises(psycopg.OperationalError, match="password authentication failed|no password"):
            psycopg.connect(host=HOST, port=PORTS["postgres"], user=who, password=secret, dbname="postgres")


def test_redis_admin_auths_and_default_user_is_refused(engines_dir):
    user, password = CREDS["redis"]
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        assert admin.acl_whoami() == user
        assert admin.set("engines-test", "1")
    for kwargs in [{}, {"username": "default", "password": "anything"}, {"username": user, "password": "wrong"}]:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=HOST, port=PORTS["redis"], retry=None, **kwargs).ping()


def test_nats_admin_connects_and_has_jetstream(engines_dir):
    """Operator mode: devstack's admin (keys from the admin secret) manages accounts from the system account
    and has JetStream in a project's account; no credential, a password or another secret's keys are refused."""
    _, password = CREDS["nats"]
    url = f"nats://{HOST}:{PORTS['nats']}"
    account = _nats_provider(Account())
    account.create(props("nats", "events", "account", "lifecycle", "lifecycle"))

    async def admin():
        system = await nats.connect(url, **admin_credential(password), allow_reconnect=False)
        project = await nats.connect(url, **admin_credential(password, "lifecycle"), allow_reconnect=False)
        try:
            listed = json.loads((await system.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=5)).data)["data"]
            return listed, await project.jetstream().account_info()
        finally:
            await system.close()
            await project.close()

    async def stranger(**auth):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3, **auth)

    listed, info = run_nats(admin)
    assert account.read("id", props("nats", "events", "account", "lifecycle", "lifecycle")).outs["account"] in listed
    assert info.limits.max_streams == AccountSpec().max_streams
    for auth in [{}, {"user": CREDS["nats"][0], "password": password}, admin_credential("another-secret"),
                 admin_credential("another-secret", "lifecycle")]:
        with pytest.raises(Exception, match="Authorization Violation"):
            run_nats(lambda auth=auth: stranger(**auth))


def test_nats_streams_of_the_former_shared_account_move_into_their_owners_accounts(engines_dir, tmp_path):
    """An engines dir a release before operator mode left: its config had one account, DEVSTACK (password
    login), and its streams lived there. The start moves each stream with a devstack marker into its owner's
    account, with its messages, says so, and leaves a stream without a marker where it was, saying where."""
    from tools.engines.base import closed_port
    from tools.engines.nats import _binary

    legacy = tmp_path / "engines"
    data, config, port = legacy / "nats" / "data", legacy / "nats" / "nats.json", closed_port()
    data.mkdir(parents=True)
    user, password = CREDS["nats"]
    config.write_text(json.dumps({"listen": f"{HOST}:{port}", "accounts": {"DEVSTACK": {
        "jetstream": "enabled", "users": [{"user": user, "password": password}]}}}))
    old = subprocess.Popen([_binary(), "-c", str(config), "-js", "-sd", str(data)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    marker = {"devstack.managed-by": "devstack", "devstack.owner": "legacy", "devstack.stack": "local"}

    async def fill():
        client = await nats.connect(f"nats://{HOST}:{port}", user=user, password=password, allow_reconnect=False,
                                    max_reconnect_attempts=0, connect_timeout=2)
        try:
            js = client.jetstream()
            await js.add_stream(name="legacy", subjects=["legacy.>"], metadata=marker)
            await js.add_stream(name="stray", subjects=["stray.>"])
            await js.publish("legacy.orders", b"order-1", stream="legacy")
        finally:
            await client.close()

    try:
        eventually(lambda: _port_open(port), 10, f"the nats-server at {HOST}:{port} to take connections")
        run_nats(fill)
    finally:
        old.terminate()
        old.wait(timeout=20)
    assert (data / "jetstream" / "DEVSTACK" / "streams" / "legacy").is_dir()

    stopped = run_cli(engines_dir, "stop", "nats")  # the port is the real one: one nats at a time
    assert stopped.returncode == 0, stopped.stderr
    try:
        started = run_cli(legacy, "start", "nats")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "nats: moved stream 'legacy' into the account of project 'legacy'" in started.stdout
        assert re.search(r"stream 'stray' of the former shared account carries no devstack marker: left in \S+"
                         r"/jetstream/DEVSTACK/streams/stray", started.stdout), started.stdout

        async def moved():
            client = await nats.connect(f"nats://{HOST}:{PORTS['nats']}", **admin_credential(password, "legacy"),
                                        allow_reconnect=False)
            try:
                return await client.jetstream().stream_info("legacy")
            finally:
                await client.close()

        info = run_nats(moved)
        assert (info.state.messages, info.config.metadata["devstack.owner"]) == (1, "legacy")
        stream = props("nats", "events", "stream", "legacy", "legacy")
        assert not is_stale(_nats_provider(Stream()).read("id", stream).outs)
        assert (data / "jetstream" / "DEVSTACK" / "streams" / "stray").is_dir()
        assert not (data / "jetstream" / "DEVSTACK" / "streams" / "legacy").exists()
    finally:
        assert run_cli(legacy, "stop", "nats").returncode == 0
        restarted = run_cli(engines_dir, "start", "nats")
        assert restarted.returncode == 0, restarted.stderr


def test_localstack_serves_s3_to_boto3(engines_dir):
    key, secret = CREDS["localstack"]
    s3 = boto3.client("s3", endpoint_url=f"http://{HOST}:{PORTS['localstack']}", region_name="us-east-1",
                      aws_access_key_id=key, aws_secret_access_key=secret)
    s3.create_bucket(Bucket="engines-test-bucket")
    assert "engines-test-bucket" in [bucket["Name"] for bucket in s3.list_buckets()["Buckets"]]


def test_no_plaintext_password_in_files_argv_or_environment(engines_dir):
    secrets = [password.encode() for engine, (_, password) in CREDS.items() if engine != "localstack"]
    for path in engines_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            content = path.read_bytes()
            assert not [s for s in secrets if s in content], f"plaintext password in {path}"
    for engine in ENGINES:
        for pid, _ in session_members(pid_file(engines_dir, engine)[0]):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            assert not [s for s in secrets if s in cmdline or s in environ], f"password in {engine} pid {pid}"
            assert CANARY[1].encode() not in environ, f"{engine} pid {pid} inherited the caller's environment"


def test_secret_bearing_files_are_private(engines_dir):
    for path in [engines_dir / "redis" / "users.acl", engines_dir / "nats" / "nats.json",
                 engines_dir / "postgres" / "data" / "pg_hba.conf"]:
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"


# --- a changed credential is re-applied (or refused with instructions) ------

def test_changed_password_is_reapplied_to_running_postgres_and_nats(engines_dir):
    new = {**CREDS, "postgres": (CREDS["postgres"][0], "pg-new-Pa55"), "nats": (CREDS["nats"][0], "nats-new-Pa55")}
    nats_pid = pid_file(engines_dir, "nats")[0]
    try:
        changed = run_cli(engines_dir, "start", "postgres", "nats", creds=new)
        assert changed.returncode == 0, changed.stderr
        assert changed.stdout.count("admin credential re-applied") == 2
        user, password = new["postgres"]
        psycopg.connect(host=HOST, port=PORTS["postgres"], user=user, password=password, dbname="postgres").close()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(host=HOST, port=PORTS["postgres"], user=user, password=CREDS["postgres"][1],
                            dbname="postgres")
        # A new secret is a new operator, which nats-server cannot reload: the start restarted it.
        assert pid_file(engines_dir, "nats")[0] != nats_pid
        run_nats(lambda: _nats_connect(new["nats"][1]))
        with pytest.raises(Exception, match="Authorization Violation"):
            run_nats(lambda: _nats_connect(CREDS["nats"][1]))
    finally:
        restored = run_cli(engines_dir, "start", "postgres", "nats")
        assert restored.returncode == 0, restored.stderr


def test_changed_password_on_running_redis_fails_with_restart_hint(engines_dir):
    new = {**CREDS, "redis": (CREDS["redis"][0], "redis-new-Pa55")}
    refused = run_cli(engines_dir, "start", "redis", creds=new)
    assert refused.returncode == 1
    assert f"redis on 127.0.0.1:{PORTS['redis']}" in refused.stderr and "stop redis" in refused.stderr
    assert str(engines_dir / "redis" / "redis.log") in refused.stderr


def test_changed_password_is_applied_to_existing_redis_data_on_restart(engines_dir):
    user, old = CREDS["redis"]
    new = {**CREDS, "redis": (user, "redis-new-Pa55")}
    try:
        assert run_cli(engines_dir, "stop", "redis").returncode == 0
        assert run_cli(engines_dir, "start", "redis", creds=new).returncode == 0
        with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password="redis-new-Pa55") as admin:
            assert admin.get("engines-test") == b"1"  # written before the restart: data survived
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=old, retry=None).ping()
    finally:
        run_cli(engines_dir, "stop", "redis")
        assert run_cli(engines_dir, "start", "redis").returncode == 0


def test_a_tenant_acl_user_reads_in_sync_after_restarts(engines_dir):
    # Redis rebuilds each user's per-command rules from the ACL file when it starts, in an
    # order of its own: a restart is no out-of-band change and must not read as drift.
    user, password = CREDS["redis"]
    shared = {"cache": {"engine": "redis", "port": PORTS["redis"], "adminUser": user, "adminSecret": "redisAdmin"}}
    provider = configured(AclUser(), {"shared": shared}, {"redis": password})
    inputs = provider.check({}, props("redis", "cache", "acl_user", "restarts", "restarts", purge=True)).inputs
    created = provider.create(inputs)
    try:
        for _ in range(2):  # the order is a new one after each restart
            assert run_cli(engines_dir, "stop", "redis").returncode == 0
            assert run_cli(engines_dir, "start", "redis").returncode == 0
            live = provider.read(created.id, created.outs).outs
            assert live["aclInSync"] is True
            assert provider.diff(created.id, live, inputs).changes is False
    finally:
        provider.delete(created.id, created.outs)


def _acl_user_provider(name: str):
    user, password = CREDS["redis"]
    shared = {"cache": {"engine": "redis", "port": PORTS["redis"], "adminUser": user, "adminSecret": "redisAdmin"}}
    provider = configured(AclUser(), {"shared": shared}, {"redis": password})
    return provider, provider.check({}, props("redis", "cache", "acl_user", name, name, purge=True)).inputs


def _kill_and_wait(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    eventually(lambda: start_time(pid) is None, 5, f"pid {pid} to end after SIGKILL")


def test_a_tenant_acl_user_stays_the_projects_after_redis_is_killed(engines_dir):
    """The user reaches the ACL file at once (ACL SAVE); its ownership marker, a key, must be as durable.
    With snapshots alone a kill kept the user and lost the marker, and every later create of it was a
    Conflict with "something devstack does not manage"."""
    provider, inputs = _acl_user_provider("killed")
    created = provider.create(inputs)
    try:
        _kill_and_wait(pid_file(engines_dir, "redis")[0])
        assert run_cli(engines_dir, "start", "redis").returncode == 0
        assert provider.read(created.id, created.outs).outs["aclInSync"] is True
        assert provider.create(inputs).outs["user"] == created.outs["user"]  # adopted, as before the kill
    finally:
        provider.delete(created.id, created.outs)


def test_a_purged_redis_index_stays_purged_after_redis_is_killed(engines_dir):
    """Redis 7.0 replays a transaction of the append-only file (a script's several writes) as `default`:
    with `user default off` and no permissions it dropped each one (NOPERM in its log) at every start,
    so a purge's FLUSHDB and freed index came back, and so did a tenant's own MULTI/EXEC undone."""
    from providers.redis.redis_index import RedisIndex

    user, password = CREDS["redis"]
    shared = {"cache": {"engine": "redis", "port": PORTS["redis"], "adminUser": user, "adminSecret": "redisAdmin"}}
    index = configured(RedisIndex(), {"shared": shared}, {"redis": password})
    inputs = index.check({}, props("redis", "cache", "redis_index", "purged", "purged", purge=True)).inputs
    made = index.create(inputs)
    db = made.outs["db"]
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password, db=db) as admin:
        admin.set("purged:data", "1")
        with admin.pipeline(transaction=True) as both:  # a tenant's transaction: two writes, one MULTI/EXEC
            both.set("purged:one", "1").set("purged:two", "2").execute()
    index.delete(made.id, made.outs)  # the purge: FLUSHDB and the index freed, in one script
    _kill_and_wait(pid_file(engines_dir, "redis")[0])
    assert run_cli(engines_dir, "start", "redis").returncode == 0
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password, db=db) as admin:
        assert admin.dbsize() == 0  # still purged
    assert index.observe(index._instances["cache"], Identity.from_props(inputs)) is None  # still free
    assert "NOPERM" not in (engines_dir / "redis" / "redis.log").read_text()


def test_redis_data_from_snapshots_alone_is_kept_when_the_append_only_file_is_turned_on(engines_dir):
    """An engine dir from an earlier release holds a snapshot and no append-only file, or one whose switch
    to it was cut short (its directory without a manifest): started with appendonly on, Redis would come
    up empty and save that over the snapshot. It starts from the snapshot and writes the file itself."""
    user, password = CREDS["redis"]
    data = engines_dir / "redis" / "data"
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        admin.set("from-a-snapshot", "1")
        admin.save()
    assert run_cli(engines_dir, "stop", "redis").returncode == 0
    shutil.rmtree(data / "appendonlydir")
    (data / "appendonlydir").mkdir()  # a switch killed before its manifest was written
    (data / "appendonlydir" / "temp-appendonly.aof.incr").write_bytes(b"")
    assert (data / "dump.rdb").exists()
    assert run_cli(engines_dir, "start", "redis").returncode == 0
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        assert admin.get("from-a-snapshot") == b"1" and admin.config_get("appendonly")["appendonly"] == "yes"
        admin.set("after-the-switch", "1")
    assert (data / "appendonlydir").is_dir()
    _kill_and_wait(pid_file(engines_dir, "redis")[0])
    assert run_cli(engines_dir, "start", "redis").returncode == 0
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        assert admin.mget("from-a-snapshot", "after-the-switch") == [b"1", b"1"]
        admin.delete("from-a-snapshot", "after-the-switch")


def test_reset_redis_forgets_tenant_users_with_their_markers(engines_dir):
    """`reset` deletes the data, the markers with it: the tenant users they made the projects' go too,
    so the next up makes them again instead of finding names no project owns."""
    user, password = CREDS["redis"]
    provider, inputs = _acl_user_provider("reset")
    username = provider.create(inputs).outs["user"]
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        admin.set("engines-test", "1")  # data the reset must take (set again below for any later test)
    assert run_cli(engines_dir, "stop", "redis").returncode == 0
    assert run_cli(engines_dir, "reset", "redis").returncode == 0
    assert run_cli(engines_dir, "start", "redis").returncode == 0
    with redis.Redis(host=HOST, port=PORTS["redis"], username=user, password=password) as admin:
        assert username not in admin.acl_users() and admin.get("engines-test") is None
        assert user in admin.acl_users()  # the admin is written anew from the credential
        admin.set("engines-test", "1")
    created = provider.create(inputs)
    provider.delete(created.id, created.outs)


async def _nats_connect(secret: str) -> None:
    """Log in as devstack's admin of the system account, with the keys the admin secret `secret` gives."""
    client = await nats.connect(f"nats://{HOST}:{PORTS['nats']}", **admin_credential(secret),
                                allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3)
    await client.close()


def _nats_provider(kind):
    """A nats provider configured with the scratch engines' nats as its instance `events`."""
    shared = {"events": {"engine": "nats", "host": HOST, "port": PORTS["nats"], "adminUser": CREDS["nats"][0],
                         "adminSecret": "natsAdmin"}}
    return configured(kind, {"shared": shared}, {"nats": CREDS["nats"][1]})


# --- registry, errors -------------------------------------------------------

def test_a_broken_engine_module_only_affects_that_engine(engines_dir):
    probe = (
        "import sys, tools.engines as e\n"
        "e.ENGINES['broken'] = 'no_such_module'\n"
        "from tools.engines.__main__ import main\n"
        "rc = main(['status'])\n"
        "code = main(['status', 'postgres'])\n"
        "print('rc', rc, code)\n"
    )
    out = run_probe(engines_dir, probe).stdout
    assert re.search(r"^broken\s+unavailable: cannot load tools.engines.no_such_module", out, re.M)
    for engine in ENGINES:
        assert re.search(rf"^{engine}\s+running\s", out, re.M), out
    assert "rc 1 0" in out


def test_only_the_named_engines_modules_are_imported(engines_dir):
    probe = ("import sys\nfrom tools.engines.__main__ import main\nmain(['status', 'redis'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('tools.engines.')))\n")
    out = run_probe(engines_dir, probe).stdout
    assert "'tools.engines.redis'" in out and "'tools.engines.postgres'" not in out, out


def test_start_timeout_names_engine_address_and_log_and_leaves_nothing(engines_dir):
    probe = (
        "from tools.engines.credentials import AdminCredential\n"
        "from tools.engines.localstack import LocalStack\n"
        "class Never(LocalStack):\n"
        "    name, port, start_timeout = 'never-healthy', 24599, 2\n"
        "    def healthy(self): return False\n"
        "engine = Never()\n"
        "try:\n"
        "    engine.start(AdminCredential('devstack-admin', 'never-used-secret'))\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
        "print('running', engine.running_pid(), 'pid-file', engine.pid_file.exists())\n"
    )
    out = run_probe(engines_dir, probe).stdout
    log = engines_dir / "never-healthy" / "never-healthy.log"
    assert f"cannot start never-healthy on {HOST}:24599: not healthy after 2s (log: {log})" in out, out
    assert "running None pid-file False" in out
    assert not [line for line in Path("/proc").glob("*/cmdline") if b"-p 24599" in _read(line)]


def test_start_refuses_when_a_connection_holds_an_extra_port(engines_dir):
    """An outgoing connection bound to a port the server needs (the ephemeral range can hand
    one out) is caught before launch; nothing listens there, so only a bind probe sees it."""
    with socket.socket() as listener, socket.socket() as client:
        listener.bind((HOST, 0))
        listener.listen()
        client.bind((HOST, 0))
        client.connect(listener.getsockname())
        held = client.getsockname()[1]
        probe = (
            "import sys\n"
            "from tools.engines.base import Engine\n"
            "class Console(Engine):\n"
            f"    name, port, extra_ports = 'console', 24597, ({held},)\n"
            "    def command(self): return [sys.executable, '-c', 'import time; time.sleep(60)', 'console-server']\n"
            "    def signature(self): return ['console-server']\n"
            "engine = Console()\n"
            "try:\n"
            "    engine.start(None)\n"
            "except Exception as exc:\n"
            "    print(exc)\n"
            "print('running', engine.running_pid())\n"
        )
        out = run_probe(engines_dir, probe).stdout
    assert f"cannot start console on {HOST}:24597: port {held} is in use by a process we did not start" in out, out
    assert "running None" in out


def test_a_server_that_exits_at_start_is_reported_with_its_log(engines_dir):
    probe = (
        "import sys\n"
        "from tools.engines.base import Engine\n"
        "QUIT = 'print(\"FATAL cannot open the data dir\", flush=True); raise SystemExit(3)'\n"
        "class Quits(Engine):\n"
        "    name, port = 'quits', 24596\n"
        "    def command(self): return [sys.executable, '-c', QUIT, 'quits-server']\n"
        "    def signature(self): return ['quits-server']\n"
        "try:\n"
        "    Quits().start(None)\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
    )
    out = run_probe(engines_dir, probe).stdout
    assert "cannot start quits on" in out and "exited (code 3)" in out, out
    assert "its log ends: FATAL cannot open the data dir" in out, out


def test_stop_kills_the_session_of_a_server_that_ignores_its_stop_signal(engines_dir):
    probe = (
        "import sys, time\n"
        "from tools.engines.base import Engine\n"
        "SERVER = ('import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '\n"
        "          'os.fork(); time.sleep(300)')\n"  # a worker in the same session, also deaf to SIGTERM
        "class Deaf(Engine):\n"
        "    name, port, stop_timeout = 'deaf', 24598, 1\n"
        "    def command(self): return [sys.executable, '-c', SERVER, 'deaf-server']\n"
        "    def signature(self): return ['deaf-server']\n"
        "    def healthy(self): return True\n"
        "engine = Deaf()\n"
        "print(engine.start(None))\n"
        "time.sleep(0.5)\n"
        "print(engine.stop())\n"
    )
    done = run_probe(engines_dir, probe)
    assert re.search(r"deaf: stopped \(pid \d+\)", done.stdout), done.stdout + done.stderr
    assert not [path for path in Path("/proc").glob("*/cmdline")
                if b"deaf-server" in _read(path) and start_time(int(path.parent.name))]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# --- stop (last: these end the module's engines) ----------------------------

def test_stop_ends_every_process_of_ours_and_only_those(engines_dir):
    ours = {engine: session_members(pid_file(engines_dir, engine)[0]) for engine in ENGINES}
    assert all(ours.values()), ours
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        stopped = run_cli(engines_dir, "stop", *ENGINES)
        assert stopped.returncode == 0, stopped.stderr
        for engine, members in ours.items():
            assert f"{engine}: stopped (pid {pid_of(members)})" in stopped.stdout
            survivors = [pid for pid, started in members if start_time(pid) == started]
            assert not survivors, f"{engine} left {survivors} running"
            assert not (engines_dir / engine / f"{engine}.pid").exists()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def pid_of(members: list[tuple[int, int]]) -> int:
    """The session leader (the server we launched) among a session's members."""
    return next(pid for pid, _ in members if os.getsid(pid) == pid)


@pytest.mark.parametrize("impostor", ["other-command-same-start-time", "our-command-other-start-time"])
def test_stop_spares_a_process_that_reuses_a_stale_pid_file(engines_dir, impostor):
    redis_conf = engines_dir / "redis" / "redis.conf"
    if impostor == "other-command-same-start-time":
        argv = ["sleep", "300"]
    else:  # a command line that matches our signature; only the start time gives it away
        argv = [sys.executable, "-c", "import time; time.sleep(300)", "redis-server", str(redis_conf)]
    process = subprocess.Popen(argv, start_new_session=True)
    try:
        started = start_time(process.pid)
        recorded = started if impostor == "other-command-same-start-time" else started - 1
        (engines_dir / "redis" / "redis.pid").write_text(f"{process.pid} {recorded}\n")
        status = run_cli(engines_dir, "status", "redis")
        assert status.stdout.split()[1] == "stopped"
        stopped = run_cli(engines_dir, "stop", "redis")
        assert stopped.returncode == 0, stopped.stderr
        assert "redis: not running (removed stale pid file)" in stopped.stdout
        assert process.poll() is None and start_time(process.pid) == started
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
