"""The environment every pulumi command of this checkout runs in: offline and local.

The CLI we build sits in .devstack/bin, state goes to a file backend under
.devstack/state, and the local stack's secrets are encrypted with a
passphrase generated once per checkout into .devstack/passphrase. Nothing
tries to download: update checks and plugin acquisition are off.

Pulumi writes the state once, at the end of each run (`PULUMI_SKIP_CHECKPOINTS`):
a run killed part-way leaves no record of itself, and `devstack recover` then
`pulumi up` adopt what it made, by its ownership markers.
`DEVSTACK_CHECKPOINTS=every-step` restores a checkpoint after every step.

`python -m tools.pulumi_env` prints `export` lines for shell scripts.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".devstack"
BIN_DIR = STATE_DIR / "bin"
PASSPHRASE_FILE = STATE_DIR / "passphrase"
#: `end-of-run` (the default) or `every-step`: when Pulumi writes the state during a run.
CHECKPOINTS_VARIABLE = "DEVSTACK_CHECKPOINTS"
CHECKPOINT_MODES = ("end-of-run", "every-step")


def let_plugins_see_sigint() -> None:
    """Undo an inherited "ignore SIGINT" before this process runs pulumi (call from the main thread).

    A shell without job control starts a background job (`cmd &`) with SIGINT
    ignored, and an ignored signal passes on to every child. Pulumi stops its
    plugins with SIGINT and kills them only 5s later, so every command of such
    a job would wait 5s per plugin.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def cancelled_gracefully_on_interrupt() -> Iterator[None]:
    """Run a pulumi command of the automation API so that Ctrl-C lets it cancel instead of killing it.

    Ctrl-C in a terminal reaches pulumi too (one process group): it cancels, lets the operations in
    flight end, saves the state and releases the stack's lock. The automation API would meanwhile
    take the KeyboardInterrupt, close pulumi's pipes and leave, and pulumi die on its next write
    with the lock held and operations pending. So the first Ctrl-C here only waits for pulumi to
    end: when it failed (cancelled), KeyboardInterrupt is raised from its error; when it finished
    (the signal reached this process alone, or came after its last step), the caller goes on, so
    what pulumi did is never left half-recorded (`rm`'s file edit after its ledger edit). A second
    Ctrl-C stops waiting at once. Outside the main thread, or with SIGINT handled otherwise, a no-op.
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    interrupted = threading.Event()

    def wait_for_pulumi(_signum: int, _frame: object) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        print("interrupted: waiting for pulumi to end (Ctrl-C in a terminal cancels its run: it saves what it "
              "made and releases the stack); Ctrl-C again stops waiting, and the stack then needs "
              "`devstack recover`", file=sys.stderr)

    signal.signal(signal.SIGINT, wait_for_pulumi)
    try:
        yield
    except Exception as err:
        if interrupted.is_set():
            raise KeyboardInterrupt from err
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def ensure_passphrase(path: Path = PASSPHRASE_FILE) -> Path:
    """Create the per-checkout passphrase once (0600); never overwrite it."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
    return path


def private_dir(path: Path) -> Path:
    """`path` made if missing, readable by its owner alone."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def pulumi_env(backend_dir: Path | None = None, passphrase_file: Path | None = None,
               temp_dir: Path | None = None) -> dict[str, str]:
    """Variables for the CLI and the automation API (merge into os.environ)."""
    backend_dir = backend_dir or STATE_DIR / "state"
    backend_dir.mkdir(parents=True, exist_ok=True)
    venv_bin = ROOT / ".venv" / "bin"
    return {
        "PATH": os.pathsep.join([str(BIN_DIR), str(venv_bin), os.environ.get("PATH", "")]),
        # The CLI's verbose logs (`-v=9`) go to the temporary directory and hold every secret in
        # plaintext, admin passwords included: a directory of the checkout only its owner reads.
        "TMPDIR": str(private_dir(temp_dir or STATE_DIR / "tmp")),
        "PULUMI_HOME": str(STATE_DIR / "pulumi-home"),
        "PULUMI_BACKEND_URL": backend_dir.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase_file or ensure_passphrase()),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # A stack config that lost its encryptionsalt (reverted, say) gets the state's back instead of a
        # new one: its secrets stay readable, and ownership markers, which name the salt, stay the same.
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
        # Inline automation-API programs start the dynamic-provider plugin with this interpreter.
        "PULUMI_PYTHON_CMD": str(venv_bin / "python"),
        **checkpoint_env(),
    }


def checkpoint_mode() -> str:
    """The checkpoint mode DEVSTACK_CHECKPOINTS asks for: `end-of-run` unless it says `every-step`."""
    mode = os.environ.get(CHECKPOINTS_VARIABLE) or CHECKPOINT_MODES[0]
    if mode not in CHECKPOINT_MODES:
        raise ValueError(f"{CHECKPOINTS_VARIABLE}={mode!r} is not a checkpoint mode: set it to "
                         f"{' or '.join(CHECKPOINT_MODES)}, or unset it (end-of-run)")
    return mode


def checkpoint_env() -> dict[str, str]:
    """The variables of that mode. Every step's checkpoint rewrites the whole state, so a run's cost grows with
    the square of its resources; the markers make the end-of-run state safe (the next up adopts a killed
    run's objects)."""
    return {"PULUMI_SKIP_CHECKPOINTS": "true"} if checkpoint_mode() == "end-of-run" else {}


def scratch_env(base: Path) -> dict[str, str]:
    """The same environment with its file backend, passphrase and PULUMI_HOME under `base`:
    for tests and benchmarks, which must leave the checkout's state alone."""
    base.mkdir(parents=True, exist_ok=True)
    env = pulumi_env(backend_dir=base / "state", passphrase_file=ensure_passphrase(base / "passphrase"),
                     temp_dir=base / "tmp")
    env["PULUMI_HOME"] = str(base / "pulumi-home")
    return env


if __name__ == "__main__":
    try:
        variables = pulumi_env()
    except ValueError as err:
        sys.exit(f"error: {err}")
    for key, value in variables.items():
        print(f"export {key}={shlex.quote(value)}")
