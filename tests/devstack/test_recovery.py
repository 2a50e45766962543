"""`devstack recover`: it breaks only a killed run's lock, never a running one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.devstack.conftest import Sandbox, make_env


def test_recover_refuses_while_the_run_holding_the_lock_is_still_running(tmp_path):
    """Recover breaks the lock and clears pending operations: run beside a live `pulumi up`, the up's
    later records were lost (resources made but no longer in the ledger, which gc would then prune)."""
    import json
    import socket
    import subprocess
    import sys
    import time

    from devstack import locks, recovery
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
    assert locks.running_holder(lock) is None


def test_recover_breaks_only_the_killed_runs_lock_not_one_taken_since(tmp_path, monkeypatch):
    """A run that takes the stack's lock after recover looked at the locks keeps it: `pulumi cancel` had
    removed it too, and then gc, rm and destroy --purge-data ran beside that run unrefused."""
    import json
    import socket

    from devstack import recovery
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
