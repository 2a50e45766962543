"""`kill -9` of `pulumi up` in the middle of a run, then the documented recovery, with a checkpoint after
every step (`DEVSTACK_CHECKPOINTS=every-step`; tests/faults/test_crash_points.py kills runs in the default
mode, which writes the state at the end of each run).

What pulumi v3.260.0 leaves behind on the file backend with per-step checkpoints: the stack's lock file
(the next command refuses to run: "the stack is currently locked ... `pulumi
cancel`"), pending operations for the creates that were in flight, the
dynamic-provider process, which waits forever for an engine that is gone,
and now and then an empty `<stack>.json.attrs` (the backend writes that
metadata file in place; every command then fails with "failed to load
checkpoint: EOF"). The recovery (docs/recovery.md, "Recovering from an interrupted
up"): `devstack recover` (remove empty metadata, `pulumi cancel`, `pulumi
refresh --clear-pending-creates --run-program`), then `pulumi up`. The last
step adopts whatever the killed run created but never recorded (create adopts
a resource that carries our marker for the same project), so nothing is
duplicated or lost.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pulumi import automation as auto

from bench.memory import descendants
from bench.sweep import sweep
from devstack import ledger
from devstack.errors import EngineError
from tests.faults.conftest import MIX, PER_PROJECT, changes, checkpoint, configure, every_engine, new_stack, tenants, write_project
from tests.waiting import eventually
from tools.pulumi_env import BIN_DIR

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(240)

PROJECTS = 4  # 24 tenant resources: enough for a run to be killed in its middle
#: Objects the sweep counts per resource: a database is also its role, an ACL user also its marker, a
#: MinIO bucket also its own key (user and policy).
OBJECTS = {"postgres": 2, "redis": 2, "minio": 3}


def progress(env: dict[str, str]) -> tuple[int, int]:
    """(tenants recorded, operations pending) in the checkpoint; (0, 0) while it is absent or being rewritten."""
    try:
        state = checkpoint(env, "faults")
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0, 0
    return len(tenants(state)), len(state.get("pending_operations") or [])


def kill_mid_run(work: Path, env: dict[str, str], log: Path, at_least: int, timeout: float = 120) -> None:
    """Start `pulumi up`; SIGKILL it once `at_least` tenants are recorded while creates are in flight;
    then end the plugins it left running."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN_DIR / "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive", "--stack", "faults"],
            cwd=work, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def killable() -> bool:
        recorded, pending = progress(env)
        return proc.poll() is not None or (recorded >= at_least and bool(pending))

    try:
        eventually(killable, timeout, f"`pulumi up` to record {at_least} tenants with creates in flight", interval=0.02)
    finally:  # killed either way: a run left going would hold the stack and the engines
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        recorded = progress(env)[0]
        time.sleep(1)  # in-flight provider calls finish on their own, as they would for a user
        for pid in children:  # the orphaned language host and provider: ours, ended by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert recorded < PROJECTS * PER_PROJECT, "the run finished before it could be killed"


def test_kill_9_mid_up_then_recovery_converges(project_dir, offline_env, pulumi_command, admin, shared, prefix,
                                               tmp_path, validator):
    offline_env = {key: value for key, value in offline_env.items() if key != "PULUMI_SKIP_CHECKPOINTS"}
    projects = [f"{prefix}-{i}" for i in range(PROJECTS)]
    files = [write_project(project_dir, project, every_engine()) for project in projects]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, shared, admin)
    try:
        kill_mid_run(project_dir, offline_env, tmp_path / "killed-up.log", at_least=4)
        interrupted = checkpoint(offline_env, "faults")

        # The next command refuses: the killed run's lock is still there (its message names
        # `pulumi cancel`), or the kill cut the backend's metadata file short.
        with pytest.raises(auto.errors.CommandError, match="pulumi cancel|failed to load checkpoint: EOF"):
            stack.up()
        # The documented recovery (docs/recovery.md): devstack recover, then up.
        recovery = ledger.recover("faults", work_dir=project_dir, env=offline_env)
        assert recovery.pending_cleared == len(interrupted["pending_operations"])
        validator("recover.schema.json", recovery.as_json())
        assert not checkpoint(offline_env, "faults").get("pending_operations")
        stack.up()

        # The ledger matches the engines: every declaration recorded once, every engine object there once.
        state = checkpoint(offline_env, "faults")
        assert not state.get("pending_operations")
        assert len(tenants(state)) == PROJECTS * PER_PROJECT
        ids = [r["id"] for r in state["resources"] if r["type"].startswith("pulumi-python:dynamic")]
        assert len(set(ids)) == len(ids)
        expected = {engine: PROJECTS * OBJECTS.get(engine, 1) for engine, _kind in MIX.values()}
        assert sweep(prefix, shared, admin, dry_run=True) == expected
        assert changes(stack.up()) == {}
        # The kill did leave creates in flight: the recovery above had pending operations to clear.
        assert {op["type"] for op in interrupted["pending_operations"]} == {"creating"}
    finally:
        try:
            stack.cancel()  # only needed when the test failed before its own cancel
        except auto.errors.CommandError:
            pass
        stack.destroy()


def test_recover_repairs_metadata_a_kill_left_empty(project_dir, offline_env, pulumi_command, admin, shared, prefix,
                                                    validator):
    """The file backend writes `<stack>.json.attrs` in place: a kill can leave it empty, and then
    every command fails to load the checkpoint. Recovery removes it; the checkpoint is intact."""
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, [write_project(project_dir, f"{prefix}-t", every_engine())], shared, admin)
    try:
        stack.up()
        backend = Path(offline_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
        attrs = backend / ".pulumi" / "stacks" / "devstack" / "faults.json.attrs"
        attrs.write_bytes(b"")  # what the kill leaves
        with pytest.raises(auto.errors.CommandError, match="failed to load checkpoint: EOF"):
            stack.preview()
        # The devstack verbs name the file and the way out.
        with pytest.raises(EngineError, match=re.escape(f"left {attrs} empty: run `devstack recover -w faults`")):
            ledger.open_stack("faults", work_dir=project_dir, env=offline_env)

        recovery = ledger.recover("faults", work_dir=project_dir, env=offline_env)
        assert recovery.repaired == [str(attrs)] and recovery.pending_cleared == 0
        validator("recover.schema.json", recovery.as_json())
        assert changes(stack.preview()) == {}
        assert len(tenants(checkpoint(offline_env, "faults"))) == PER_PROJECT
    finally:
        stack.destroy()


def test_a_recover_whose_refresh_fails_says_what_it_did_and_converges_on_a_rerun(
        project_dir, offline_env, pulumi_command, admin, shared, prefix, validator):
    """Redis is down when the recovery refreshes: the error names it, the report carries the metadata
    already repaired (so `--json` still tells a script), and a rerun once it is back finishes the job."""
    from tools.engines.base import closed_port

    stack = new_stack(project_dir, offline_env, pulumi_command)
    files = [write_project(project_dir, f"{prefix}-r", every_engine())]
    configure(stack, files, shared, admin)
    try:
        stack.up()
        down = {**shared, "cache": {**shared["cache"], "port": closed_port()}}
        configure(stack, files, down, admin)
        backend = Path(offline_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
        attrs = backend / ".pulumi" / "stacks" / "devstack" / "faults.json.attrs"
        attrs.write_bytes(b"")
        with pytest.raises(EngineError) as stopped:
            ledger.recover("faults", work_dir=project_dir, env=offline_env)
        assert f"127.0.0.1:{down['cache']['port']}" in str(stopped.value)
        assert "run `devstack recover` again" in str(stopped.value)
        report = stopped.value.done.as_json()
        validator("recover.schema.json", report)
        assert report["repaired"] == [str(attrs)] and report["error"] == str(stopped.value)
        configure(stack, files, shared, admin)
        again = ledger.recover("faults", work_dir=project_dir, env=offline_env)
        assert again.repaired == [] and again.error is None
        assert changes(stack.preview()) == {}
    finally:
        configure(stack, files, shared, admin)
        stack.destroy()
