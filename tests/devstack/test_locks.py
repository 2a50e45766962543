"""Another run's lock on the stack: a verb waits for it a bounded time, saying whose, refuses a
killed run's at once, and two verbs on one workspace take turns."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import yaml

from tests.devstack.conftest import STACK, Sandbox, fresh_name, import_state, make_env, synthetic_resources
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
