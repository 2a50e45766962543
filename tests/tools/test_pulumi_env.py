"""The signal disposition pulumi's plugins inherit from whatever runs pulumi, and Ctrl-C during a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.pulumi_env import ROOT

# Starts with SIGINT ignored, as a background job of a shell without job control does,
# then reports whether a child it starts (as pulumi starts its plugins) still ignores SIGINT.
CHILD_IGNORES_SIGINT = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
if sys.argv[1] == "fix":
    from tools.pulumi_env import let_plugins_see_sigint
    let_plugins_see_sigint()
probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
print(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip())
"""


def child_ignores_sigint(mode: str) -> str:
    return subprocess.run([sys.executable, "-c", CHILD_IGNORES_SIGINT, mode], cwd=ROOT, capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()


def test_an_inherited_ignored_sigint_is_not_passed_on_to_plugins():
    assert child_ignores_sigint("as-is") == "True"  # what a background job hands down without the fix
    assert child_ignores_sigint("fix") == "False"


def test_the_clis_verbose_log_lands_in_a_directory_only_its_owner_reads(tmp_path):
    """`pulumi -v=9` writes every secret it handles, admin passwords included, into a log file in the
    temporary directory: in this environment that is a private directory, not the shared /tmp."""
    from tools.pulumi_env import BIN_DIR, scratch_env

    env = scratch_env(tmp_path)
    subprocess.run([str(BIN_DIR / "pulumi"), "version", "-v=9"], env=env, capture_output=True, check=True, timeout=60)
    temp = Path(env["TMPDIR"])
    assert temp.is_relative_to(tmp_path) and temp.stat().st_mode & 0o777 == 0o700
    assert [log.name for log in temp.iterdir() if log.name.startswith("pulumi.")]


def _interrupt_soon() -> None:
    """SIGINT to this process alone, a moment from now (as `kill -INT <pid>` would send it)."""
    import os
    import signal
    import threading

    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()


def test_an_interrupt_while_pulumi_runs_waits_for_it_and_a_finished_run_goes_on(capsys):
    """pulumi never got the signal and finished: raising would leave its work half-recorded (`rm`
    un-tracked the resource but never took its entry out of devstack.yaml)."""
    import signal

    from tools.pulumi_env import cancelled_gracefully_on_interrupt

    _interrupt_soon()
    with cancelled_gracefully_on_interrupt():
        done = subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5); print('finished')"],
                              capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "finished"  # waited for, not cut short
    assert "waiting for pulumi to end" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupted_run_that_fails_is_a_keyboard_interrupt_from_its_error():
    from tools.pulumi_env import cancelled_gracefully_on_interrupt

    _interrupt_soon()
    with pytest.raises(KeyboardInterrupt) as raised:
        with cancelled_gracefully_on_interrupt():
            subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], timeout=30)
            raise RuntimeError("update canceled")  # as pulumi's CommandError after its cancel
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_the_state_is_written_at_the_end_of_each_run_unless_every_step_is_asked_for(monkeypatch, tmp_path):
    from tools.pulumi_env import scratch_env

    monkeypatch.delenv("DEVSTACK_CHECKPOINTS", raising=False)
    assert scratch_env(tmp_path)["PULUMI_SKIP_CHECKPOINTS"] == "true"
    monkeypatch.setenv("DEVSTACK_CHECKPOINTS", "every-step")
    assert "PULUMI_SKIP_CHECKPOINTS" not in scratch_env(tmp_path)
    monkeypatch.setenv("DEVSTACK_CHECKPOINTS", "sometimes")
    with pytest.raises(ValueError, match="DEVSTACK_CHECKPOINTS='sometimes' is not a checkpoint mode: set it to "
                                         "end-of-run or every-step"):
        scratch_env(tmp_path)
    printed = subprocess.run([sys.executable, "-m", "tools.pulumi_env"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, env={"PATH": "/usr/bin:/bin", "DEVSTACK_CHECKPOINTS": "sometimes"})
    assert printed.returncode == 1 and printed.stderr.startswith("error: DEVSTACK_CHECKPOINTS='sometimes'")
