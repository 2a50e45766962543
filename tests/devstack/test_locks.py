"""Another run's lock on the stack: a verb waits for it a bounded time, saying whose, refuses a
killed run's at once, and two verbs on one workspace take turns."""

from __future__ import annotations

import getpass
import json
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg import sql

from tests.devstack.conftest import (
    PG_PORT,
    STACK,
    Sandbox,
    fresh_name,
    import_state,
    make_env,
    synthetic_resources,
    token,
)
from tests.devstack.stacks import configure_stack, database_exists, json_value, write
from tests.waiting import eventually


def test_workspace_destroy_of_one_project_waits_for_the_lock_then_takes_that_project_out(tmp_path):
    """`workspace destroy --project alpha` un-tracks alpha's resources only (the stack and beta's stay).
    Another run's lock: it waits, naming the holder, and past --lock-wait fails with nothing changed."""
    from devstack import state

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("one", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": o, "owner": o}
            for o in ("alpha", "beta")]
    import_state(stack, synthetic_resources("one", rows))
    lock = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks" / "organization" \
        / "devstack" / "one" / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)  # the backend keeps the directory between runs
    lock.write_text(json.dumps({"pid": 4242, "username": "u", "hostname": "h", "timestamp": "2026-11-30T10:00:00Z"}))
    held = sandbox.cli("workspace", "destroy", "--project", "alpha", "--lock-wait", "1", "-w", "one")
    assert held.returncode == 8, held.stderr
    assert "waiting for the lock on stack 'one' held by pid 4242 of u@h" in held.stderr
    assert "stayed locked by pid 4242 of u@h" in held.stderr
    assert len(state.tracked_resources(stack)) == 2
    lock.unlink()
    done = sandbox.cli_json("workspace", "destroy", "--project", "alpha", "-w", "one")
    assert (done["project"], done["untracked"]) == ("alpha", ["postgres/pg/database/alpha@alpha"])
    assert [str(t.ident) for t in state.tracked_resources(stack)] == ["postgres/pg/database/beta@beta"]


def test_a_killed_runs_lock_is_named_at_once_not_waited_for(tmp_path):
    """A lock of this machine whose pid runs no pulumi (the run was killed) never goes away by itself:
    the verb says so at once and points at `devstack recover`, where it would have waited in vain."""
    import socket
    import subprocess

    from devstack import state

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("dead", create=True)
    import_state(stack, synthetic_resources("dead", [
        {"engine": "postgres", "instance": "pg", "kind": "database", "name": "alpha", "owner": "alpha"}]))
    gone = subprocess.Popen(["true"])  # a pid that has finished
    gone.wait()
    lock = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks" / "organization" \
        / "devstack" / "dead" / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": gone.pid, "username": "u", "hostname": socket.gethostname(),
                                "timestamp": "2026-11-30T10:00:00Z"}))
    done = sandbox.cli("workspace", "destroy", "--project", "alpha", "--lock-wait", "600", "-w", "dead")
    assert done.returncode == 8, done.stderr
    assert f"locked by pid {gone.pid} of this machine" in done.stderr and "which no longer runs" in done.stderr
    assert "`devstack recover -w dead`" in done.stderr and "waiting for the lock" not in done.stderr
    assert len(state.tracked_resources(stack)) == 1


def held_lock(tmp_path: Path) -> Path:
    """A Pulumi lock file on the scratch stack, as a run on another machine leaves it while it runs."""
    lock = tmp_path / "state" / ".pulumi" / "locks" / "organization" / "devstack" / STACK / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text('{"pid": 4242, "username": "u", "hostname": "h", "timestamp": "2026-11-30T10:00:00Z"}')
    return lock


def test_a_lock_held_past_the_wait_is_named_and_the_file_is_kept(scratch, tmp_path):
    """The verb waits for the lock, saying whose; when --lock-wait passes it fails naming it, file as it was."""
    held_lock(tmp_path)
    original = scratch.file.read_bytes()
    code, _, err = scratch.verb("db", "create", fresh_name(), "--lock-wait", "1")
    assert code == 8, err
    assert "waiting for the lock on stack 'imperative' held by pid 4242 of u@h, since 2026-11-30T10:00:00Z" in err
    assert "stayed locked by pid 4242 of u@h" in err and "pulumi preview" not in err, err
    assert scratch.file.read_bytes() == original


def _line_with(stream, text: str, timeout: float) -> str:
    """The first line of `stream` holding `text`, read within `timeout` seconds; fails naming what it waited for."""
    import queue
    import threading

    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(stream.readline, "")], daemon=True).start()

    def next_line_with_text() -> str | None:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            return None
        return line if text in line else None

    return eventually(next_line_with_text, timeout, f"a line with {text!r} on the stream")


def _devstack(scratch, *argv: str) -> subprocess.Popen:
    """`devstack ARGV` on the scratch workspace, as a second terminal runs it."""
    from tests.devstack.conftest import DEVSTACK

    return subprocess.Popen([str(DEVSTACK), *argv, "--workspace", STACK, "--work-dir", str(scratch.work)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_verb_waits_for_the_stacks_lock_and_goes_on_once_released(scratch, tmp_path):
    """The real pulumi CLI meets the lock ("the stack is currently locked"): the verb says whose lock it
    waits on, and once it is released creates the resource."""
    lock = held_lock(tmp_path)
    name = fresh_name()
    verb = _devstack(scratch, "stream", "add", name)
    try:
        _line_with(verb.stderr, "waiting for the lock on stack 'imperative' held by pid 4242 of u@h", 120)
        released = time.monotonic()
        lock.unlink()
        out, err = verb.communicate(timeout=120)
    finally:
        verb.kill()
    assert verb.returncode == 0, err
    print(f"created {time.monotonic() - released:.1f}s after the lock was released")
    assert f"events/stream/{name}" in scratch.state_keys()
    assert scratch.observe("nats", "stream", name) is not None


def test_two_creates_at_once_on_one_workspace_both_succeed(scratch):
    """Two terminals: both verbs edit one devstack.yaml and update one stack. The second waits for the
    first (saying so), then both entries are in the file, both resources in the ledger and the engines."""
    queue_name, stream_name = fresh_name(), fresh_name()
    started = time.monotonic()
    verbs = [_devstack(scratch, "queue", "add", queue_name), _devstack(scratch, "stream", "add", stream_name)]
    try:
        done = [verb.communicate(timeout=300) for verb in verbs]
    finally:
        for verb in verbs:
            verb.kill()
    took = time.monotonic() - started
    assert [verb.returncode for verb in verbs] == [0, 0], [err for _, err in done]
    waited = [err for _, err in done if "waiting for the lock on stack 'imperative' held by devstack pid" in err]
    assert len(waited) == 1, [err for _, err in done]  # one went first; the other waited for it, told whose
    print(f"both created in {took:.1f}s; the second waited: {waited[0].splitlines()[0]}")
    declared = {(entry["kind"], entry.get("name")) for entry in yaml.safe_load(scratch.file.read_text())["resources"]}
    assert {("queue", queue_name), ("stream", stream_name)} <= declared
    assert scratch.state_keys() == {f"aws/queue/{queue_name}", f"events/stream/{stream_name}",
                                    f"events/account/{scratch.project}"}
    assert scratch.observe("nats", "stream", stream_name) is not None
    assert scratch.observe("localstack", "queue", queue_name) is not None


# --- the postgres:// ledger: a teammate's run is seen too ----------------------------------------


@contextmanager
def postgres_ledger(admin) -> Iterator[tuple[str, Callable[[], psycopg.Connection]]]:
    """A fresh database of the local PostgreSQL as a postgres:// backend: its URL and a connection to it;
    dropped afterwards."""
    a = admin["postgres"]
    database = f"locks_{token()}"

    def connect(dbname: str = database) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=PG_PORT, user=a.user, password=a.password, dbname=dbname,
                               autocommit=True, connect_timeout=5)

    with connect("postgres") as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        yield f"postgres://{a.user}:{a.password}@127.0.0.1:{PG_PORT}/{database}?sslmode=disable", connect
    finally:
        with connect("postgres") as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


#: A program that holds its `pulumi up`, and so the stack's lock, while the file it names exists (90 s at
#: most), then fails: a failed program deletes nothing, so the stack keeps what it tracks.
HOLDING_PROGRAM = """import os, time
deadline = time.monotonic() + 90
while os.path.exists({flag!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
raise RuntimeError("released")
"""


def held_up(stack, work: Path, base: Path) -> tuple[subprocess.Popen, Path]:
    """A real `pulumi up` of `stack` (its Pulumi.yaml and config, a program that waits) kept running; the
    flag file that holds it."""
    import os
    import shutil

    from tools.pulumi_env import BIN_DIR

    held = base / "held"
    held.mkdir()
    for settings in work.glob("Pulumi*.yaml"):
        shutil.copy(settings, held)
    flag = held / "holding"
    flag.touch()
    (held / "__main__.py").write_text(HOLDING_PROGRAM.format(flag=str(flag)))
    log = (base / "held.log").open("w")
    proc = subprocess.Popen([str(BIN_DIR / "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive",
                             "--stack", stack.name], cwd=held, env={**os.environ, **stack.workspace.env_vars},
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, flag


def test_a_running_up_on_the_postgres_ledger_holds_off_rm_destroy_gc_and_purges(sandbox, tmp_path, admin,
                                                                                local_shared, names):
    """A teammate's `pulumi up` holds the shared ledger's lock (a row of its state table): rm, destroy,
    gc --prune and the purges wait for it, say whose it is (pid, user@host, since when), and past
    --lock-wait refuse with nothing dropped; once it ends they go through."""
    from devstack import gc, locks, removal, state
    from devstack.errors import EngineError
    from devstack.locks import LockWait

    a, b = names
    with postgres_ledger(admin) as (url, _connect):
        shared = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": url}, work=sandbox.work)
        files = [write(shared, p, [{"uses": "pg", "kind": "database", "purge": True}]) for p in (a, b)]
        stack = configure_stack(shared, "team", local_shared, admin, files)
        stack.up()
        databases = [p.replace("-", "_") for p in (a, b)]
        started = time.monotonic()
        proc, flag = held_up(stack, sandbox.work, tmp_path)
        try:
            held = eventually(lambda: locks.stack_locks(stack), 60, "the held run to take the stack's lock")
            assert [(lock.pid, lock.hostname, lock.running_here) for lock in held] == [
                (proc.pid, socket.gethostname(), True)]
            assert re.fullmatch(r"locks_\w+/\.pulumi/locks/organization/devstack/team/[\w-]+\.json", held[0].where)
            holder = f"pid {proc.pid} of {getpass.getuser()}@{socket.gethostname()}, since {held[0].timestamp}"
            said: list[str] = []
            wait, yes = LockWait(1.0, said.append), (lambda _: True)
            refusals = {
                "rm": lambda: removal.remove_resource(stack, a, kind="database", lock_wait=wait),
                "rm --purge-data": lambda: removal.remove_resource(stack, a, kind="database", purge_data=True,
                                                                   confirm=yes, lock_wait=wait),
                "destroy --purge-data": lambda: removal.destroy_stack(stack, purge_data=True, confirm=yes,
                                                                      lock_wait=wait),
            }
            for verb, call in refusals.items():
                with pytest.raises(EngineError, match=f"stayed locked by {re.escape(holder)}") as refused:
                    call()
                assert "nothing was changed" in str(refused.value), verb
            assert said == [f"waiting for the lock on stack 'team' held by {holder} (at most 1s more)"] * 3
            pruned = shared.cli("resource", "gc", "--prune", "--yes", "-w", "team", "--lock-wait", "1")
            assert pruned.returncode == 8, pruned.stderr
            assert f"waiting for the lock on stack 'team' held by {holder}" in pruned.stderr
            assert f"stayed locked by {holder}" in pruned.stderr and admin["postgres"].password not in pruned.stderr
            assert len(state.tracked_resources(stack)) == 2 and all(database_exists(admin, d) for d in databases)
            print(f"held and refused in {time.monotonic() - started:.1f}s")
        finally:
            flag.unlink(missing_ok=True)
            proc.wait(timeout=60)
        assert proc.returncode != 0  # the holding program fails as written: nothing of the stack's deleted
        assert locks.stack_locks(stack) == [] and len(state.tracked_resources(stack)) == 2

        released = time.monotonic()
        assert removal.remove_resource(stack, a, kind="database", purge_data=True, confirm=yes,
                                       lock_wait=wait).data_dropped
        assert not database_exists(admin, databases[0])
        stack.set_config("devstack:workspace", json_value({"name": "team", "shared": {
            k: v for k, v in local_shared.items() if k in ("pg", "cache", "events")}, "projects": files[:1]}))
        # b is no longer listed, and out of the ledger with its data kept: an orphan gc --prune drops.
        removed = removal.remove_resource(stack, b, kind="database", lock_wait=wait)
        assert removed.resource.id == f"postgres/pg/database/{b}@{b}" and not removed.data_dropped
        report = gc.collect_garbage(stack, prune=True, confirm=yes, lock_wait=wait)
        assert report.pruned == [f"postgres/pg/database/{b}@{b}"] and not database_exists(admin, databases[1])
        assert removal.destroy_stack(stack, lock_wait=wait).untracked == []
        assert state.tracked_resources(stack) == []
        print(f"released: rm --purge-data, gc --prune and destroy in {time.monotonic() - released:.1f}s")


def lock_row(connect: Callable[[], psycopg.Connection], url: str, stack: str, pid: int, hostname: str) -> str:
    """A lock row as the postgres:// backend writes it (the JSON a lock file holds, base64 in `data`); its key."""
    import base64

    database = url.split("?")[0].rsplit("/", 1)[1]
    key = f"{database}/.pulumi/locks/organization/devstack/{stack}/{token()}.json"
    content = json.dumps({"pid": pid, "username": "ann", "hostname": hostname, "timestamp": "2026-11-30T10:00:00Z"})
    with connect() as conn:
        conn.execute("INSERT INTO pulumi_state (key, data) VALUES (%s, %s)",
                     (key, json.dumps({"data": base64.b64encode(content.encode()).decode()})))
    return key


def test_another_machines_lock_on_the_postgres_ledger_is_held_and_a_killed_runs_is_recovered(sandbox, admin,
                                                                                            local_shared):
    """Whether a run on another machine still runs cannot be seen: its lock is waited for, then refused
    naming it, and recover leaves it (`pulumi cancel` is for when it is known dead). A run killed on this
    machine is refused at once, and recover removes its row alone."""
    from devstack import locks, recovery, removal
    from devstack.errors import EngineError
    from devstack.locks import LockWait

    with postgres_ledger(admin) as (url, connect):
        box = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": url}, work=sandbox.work)
        stack = configure_stack(box, "team", local_shared, admin, [])  # recover's refresh runs the program
        key = lock_row(connect, url, "team", 4242, "elsewhere")
        with pytest.raises(Exception, match=r"(?s)currently locked by 1 lock.*ann@elsewhere \(pid 4242\)"):
            stack.refresh()  # the row is a lock to pulumi itself
        assert [lock.holder for lock in locks.stack_locks(stack)] == [
            "pid 4242 of ann@elsewhere, since 2026-11-30T10:00:00Z"]
        with pytest.raises(EngineError, match=r"stayed locked by pid 4242 of ann@elsewhere.*`pulumi cancel --stack "
                                              r"team`"):
            removal.destroy_stack(stack, lock_wait=LockWait(0.5, lambda _: None))
        with pytest.raises(EngineError, match=r"held by pid 4242 of ann@elsewhere, since .*, on another machine.*"
                                              r"nothing was changed"):
            recovery.recover("team", url, sandbox.work, env=sandbox.env)
        assert [lock.where for lock in locks.stack_locks(stack)] == [key]

        gone = subprocess.Popen(["true"])  # a pid that has finished
        gone.wait()
        with connect() as conn:
            conn.execute("DELETE FROM pulumi_state WHERE key = %s", (key,))
        lock_row(connect, url, "team", gone.pid, socket.gethostname())
        started = time.monotonic()
        with pytest.raises(EngineError, match=f"locked by pid {gone.pid} of this machine.*a killed run's lock"):
            removal.destroy_stack(stack, lock_wait=LockWait(600, lambda _: None))
        assert time.monotonic() - started < 30  # refused at once, not after the 600 s wait
        assert recovery.recover("team", url, sandbox.work, env=sandbox.env).error is None
        assert locks.stack_locks(stack) == []
