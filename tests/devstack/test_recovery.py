"""`devstack recover`: it breaks only a killed run's lock, never a running one's; what a killed run left
pending is named by the verbs that would otherwise act beside it, until recover resolves it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from devstack import recovery
from tests.devstack.conftest import Sandbox, make_env


def test_recover_refuses_while_the_run_holding_the_lock_is_still_running(tmp_path):
    """Recover breaks the lock and clears pending operations: run beside a live `pulumi up`, the up's
    later records were lost (resources made but no longer in the ledger, which gc would then prune)."""
    import json
    import socket
    import subprocess
    import sys

    from devstack import locks
    from devstack.errors import EngineError

    backend = tmp_path / "state"
    lock = backend / ".pulumi" / "locks" / "organization" / "devstack" / "local" / "held.json"
    lock.parent.mkdir(parents=True)
    attrs = backend / ".pulumi" / "stacks" / "devstack" / "local.json.attrs"
    attrs.parent.mkdir(parents=True)
    attrs.write_bytes(b"")  # what recover would repair: it must stay, as must the lock
    # A process whose command line names pulumi, as the lock's holder would.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "pulumi", "up"])
    command = Path(f"/proc/{holder.pid}/cmdline")
    for _ in range(100):  # Popen may return before the new program's command line shows in /proc
        if b"pulumi" in command.read_bytes():
            break
        time.sleep(0.05)
    try:
        held = {"pid": holder.pid, "username": "u", "hostname": socket.gethostname(), "timestamp": "now"}
        lock.write_text(json.dumps(held))
        with pytest.raises(EngineError, match=rf"still running on this machine \(pid {holder.pid}.*nothing was changed"):
            recovery.recover("local", backend.as_uri(), tmp_path)
        assert lock.exists() and attrs.exists()
    finally:
        holder.kill()
        holder.wait()
    # Killed, its lock is what recover is for: it goes past the check (to the repair).
    killed = locks.HeldLock.parse(str(lock), lock.read_bytes())
    assert (killed.running_here, killed.killed) == (False, True)


def test_recover_breaks_only_the_killed_runs_lock_not_one_taken_since(tmp_path, monkeypatch):
    """A run that takes the stack's lock after recover looked at the locks keeps it: `pulumi cancel` had
    removed it too, and then gc, rm and destroy --purge-data ran beside that run unrefused."""
    import json
    import socket

    from devstack.errors import EngineError

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    sandbox.open("local", create=True)
    backend = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    locks = backend / ".pulumi" / "locks" / "organization" / "devstack" / "local"
    locks.mkdir(parents=True, exist_ok=True)
    killed = {"pid": 2 ** 22 + 1, "username": "u", "hostname": socket.gethostname(), "timestamp": "then"}
    (locks / "killed.json").write_text(json.dumps(killed))
    started_since = locks / "started-since.json"
    opened = recovery.open_stack

    def a_run_takes_the_lock_meanwhile(*args, **kwargs):
        started_since.write_text(json.dumps({**killed, "pid": 1, "timestamp": "now"}))
        return opened(*args, **kwargs)

    monkeypatch.setattr(recovery, "open_stack", a_run_takes_the_lock_meanwhile)
    with pytest.raises(EngineError, match="locked"):  # its refresh meets the new run's lock
        recovery.recover("local", sandbox.env["PULUMI_BACKEND_URL"], tmp_path, env=sandbox.env)
    assert started_since.exists() and not (locks / "killed.json").exists()


def killed_mid_create(stack, work: Path, log: Path) -> list[str]:
    """`pulumi up` of `stack` with a checkpoint per step, kill -9'd while a create is under way and recorded
    as pending; what the state then holds pending. When the event log shows the first create begun, its
    provider is stopped (SIGSTOP), so that create stays under way until pulumi is killed; then the rest."""
    import os
    import signal
    import subprocess

    from bench.memory import descendants
    from devstack.locks import pending_operations
    from devstack.state import export_deployment
    from tests.faults.test_crash_points import provider_processes, tenant_steps
    from tests.waiting import eventually
    from tools.pulumi_env import BIN_DIR

    events = log.with_suffix(".events")
    env = {**os.environ, **stack.workspace.env_vars, "DEVSTACK_CHECKPOINTS": "every-step",
           "PULUMI_DEBUG_COMMANDS": "true"}  # `--event-log` is a debug command, as the automation API uses it
    env.pop("PULUMI_SKIP_CHECKPOINTS", None)
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN_DIR / "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive",
                                 "--stack", stack.name, "--event-log", str(events)], cwd=work, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    children: list[int] = []
    try:
        eventually(lambda: proc.poll() is not None or tenant_steps(events, frozenset({"create"})) >= 1, 120,
                   "the up to begin its first create", interval=0.01)
        for pid in provider_processes(descendants(proc.pid)):
            os.kill(pid, signal.SIGSTOP)
        pending = eventually(lambda: pending_operations(export_deployment(stack)), 60,
                             "the state to record a pending create")
    finally:
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    return pending


def test_a_run_killed_on_the_postgres_ledger_leaves_pending_creates_the_verbs_name(sandbox, tmp_path, admin,
                                                                                   local_shared):
    """A `pulumi up` killed mid-create (checkpoints per step) leaves its lock and the creates it had begun
    pending in the state: gc --prune, rm and destroy --purge-data refuse at once, naming those (a pending
    create may already be in its engine, outside the ledger: gc would take it for an orphan). Unlocked
    by hand, they still refuse on the pending operations; `devstack recover` resolves them, then they go."""
    from bench.sweep import sweep
    from devstack import removal, state
    from devstack.errors import EngineError
    from devstack.stack import run_cli
    from tests.devstack.conftest import token
    from tests.devstack.stacks import configure_stack, database_exists, write
    from tests.devstack.test_locks import postgres_ledger

    prefix = f"pk{token()}"
    a, b, c = (f"{prefix}-{p}" for p in "abc")
    yes = (lambda _: True)
    try:
        with postgres_ledger(admin) as (url, _connect):
            box = Sandbox(env={**sandbox.env, "PULUMI_BACKEND_URL": url}, work=sandbox.work)
            files = [write(box, p, [{"uses": "pg", "kind": "database", "purge": True}]) for p in (a, b, c)]
            stack = configure_stack(box, "team", local_shared, admin, files[:1])
            stack.up()
            configure_stack(box, "team", local_shared, admin, files)
            started = time.monotonic()
            pending = killed_mid_create(stack, sandbox.work, tmp_path / "killed.log")
            assert pending and set(pending) <= {f"creating postgres/pg/database/{p}@{p}" for p in (b, c)}, pending
            listed = ", ".join(pending)

            pruned = box.cli("resource", "gc", "--prune", "--yes", "-w", "team")
            assert pruned.returncode == 8, pruned.stderr
            assert "a killed run's lock" in pruned.stderr and f"operation(s) pending: {listed}" in pruned.stderr
            assert "`devstack recover -w team`" in pruned.stderr and "waiting for the lock" not in pruned.stderr
            with pytest.raises(EngineError, match=f"a killed run's lock; it left {len(pending)} operation"):
                removal.remove_resource(stack, a, kind="database", purge_data=True, confirm=yes)

            run_cli(stack, "cancel", "--yes")  # the lock alone goes: the pending operations stay
            with pytest.raises(EngineError, match=rf"{len(pending)} operation\(s\) a killed run left pending: "
                                                  rf"{re.escape(listed)}.*`devstack recover -w team`"):
                removal.destroy_stack(stack, purge_data=True, confirm=yes)
            assert database_exists(admin, a.replace("-", "_"))
            assert [str(t.ident) for t in state.tracked_resources(stack)] == [f"postgres/pg/database/{a}@{a}"]
            print(f"killed and refused in {time.monotonic() - started:.1f}s")

            recovered = recovery.recover("team", url, sandbox.work, env=sandbox.env)
            assert (recovered.error, recovered.pending_cleared) == (None, len(pending))
            done = removal.destroy_stack(stack, purge_data=True, confirm=yes)
            assert done.dropped == [f"postgres/pg/database/{a}@{a}"] and state.tracked_resources(stack) == []
            assert not database_exists(admin, a.replace("-", "_"))
    finally:
        sweep(prefix, {"pg": local_shared["pg"]}, admin)  # what the killed run made
