"""Locks on a stack: waiting for another run's Pulumi lock, and the checkout's lock a verb holds.

A verb that changes the ledger waits for the stack's lock a bounded time,
saying whose lock it waits on; a killed run's lock is refused at once
(`devstack recover` frees it).
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from devstack.errors import EngineError, InvalidQuery
from devstack.stack import file_backend_root, short_name

#: How long a verb waits for another run's lock on the stack, in seconds, unless --lock-wait or
#: $DEVSTACK_LOCK_WAIT says otherwise: long enough for an `up` of the examples, short enough to notice.
DEFAULT_LOCK_WAIT = 300.0


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LockWait:
    """How a verb meets a stack another run has locked: it waits at most `seconds`, telling `say` whose
    lock it waits on (once per holder)."""

    seconds: float = DEFAULT_LOCK_WAIT
    say: Callable[[str], None] = _stderr

    @classmethod
    def default(cls, say: Callable[[str], None] = _stderr) -> LockWait:
        """The wait $DEVSTACK_LOCK_WAIT sets (seconds), else DEFAULT_LOCK_WAIT."""
        raw = os.environ.get("DEVSTACK_LOCK_WAIT", "")
        try:
            return cls(max(0.0, float(raw)) if raw.strip() else DEFAULT_LOCK_WAIT, say)
        except ValueError:
            raise InvalidQuery("read", f"DEVSTACK_LOCK_WAIT={raw!r}", "not a number of seconds",
                               "set it to e.g. 300, or unset it") from None


class _Waiting:
    """One bounded wait: its deadline, and the holder last announced."""

    def __init__(self, wait: LockWait, name: str) -> None:
        self.wait, self.name = wait, name
        self.started = time.monotonic()
        self.announced: str | None = None

    def met(self, holder: str, verb: str, what: str) -> None:
        """Another run holds the lock: say so (once per holder), or fail once the wait is over."""
        waited = time.monotonic() - self.started
        if waited >= self.wait.seconds:
            raise EngineError(verb, what, f"stack {self.name!r} stayed locked by {holder} for the {waited:.0f}s "
                              f"this verb waits (--lock-wait)", "nothing was changed by this run; wait for that "
                              f"one to end and run it again, or if none is running, `devstack recover -w {self.name}`")
        if holder != self.announced:
            self.wait.say(f"waiting for the lock on stack {self.name!r} held by {holder} (at most "
                          f"{self.wait.seconds - waited:.0f}s more)")
            self.announced = holder

    def pause(self, interval: float = 0.2) -> None:
        time.sleep(min(interval, max(0.0, self.wait.seconds - (time.monotonic() - self.started))))


def lock_holder(stack: auto.Stack) -> str | None:
    """Who holds the stack's Pulumi lock, as its lock file says (`pid P of user@host, since T`); None when
    no lock file is there (unlocked, or a backend whose locks cannot be seen from here)."""
    locks = lock_files(_backend_root(stack), stack.workspace.project_settings().name, short_name(stack))
    if not locks:
        return None
    try:
        held = json.loads(locks[0].read_text())
        return f"pid {held.get('pid')} of {held.get('username')}@{held.get('hostname')}, since {held.get('timestamp')}"
    except (OSError, ValueError, AttributeError):  # released while read, or not Pulumi's
        return f"the run of lock file {locks[0]}"


def _backend_root(stack: auto.Stack) -> Path | None:
    return file_backend_root(stack.workspace.env_vars.get("PULUMI_BACKEND_URL", ""), Path(stack.workspace.work_dir))


def wait_while_locked(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> None:
    """Return once no other run holds the stack's lock (on a file backend, where it can be seen), waiting
    for it at most `wait.seconds`; EngineError, nothing changed, naming the holder when the wait is over.

    Called before data is dropped: the ledger edit after the drops would fail on the lock, and an `up`
    holding it records what it makes only once made (gc would take its new resources for orphans)."""
    waiting = _Waiting(wait, short_name(stack))
    while (holder := lock_holder(stack)) is not None:
        _refuse_a_killed_runs_lock(stack, verb, what)
        waiting.met(holder, verb, what)
        waiting.pause()


def waiting_for_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait, call: Callable[[], Any]) -> Any:
    """`call()` (one pulumi command on `stack`), run again once the lock it met is released.

    A command that meets another run's lock fails at once without doing anything, so running it again
    is safe. The wait is bounded by `wait.seconds`: then EngineError names the holder."""
    waiting = _Waiting(wait, short_name(stack))
    while True:
        try:
            return call()
        except auto.errors.ConcurrentUpdateError:
            _refuse_a_killed_runs_lock(stack, verb, what)
            waiting.met(lock_holder(stack) or "another pulumi run", verb, what)
            while lock_holder(stack) is not None and time.monotonic() - waiting.started < wait.seconds:
                waiting.pause()
            if _backend_root(stack) is None:  # no lock file to watch: try again a second later
                waiting.pause(1.0)


@contextmanager
def verb_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> Iterator[None]:
    """Hold the checkout's lock on the workspace for a verb that edits its devstack.yaml files or ledger.

    Two verbs at once would each read a devstack.yaml, add their entry and write it back, and one entry
    would be lost; the second waits here instead (bounded by `wait`), told whose verb it waits for. The
    lock is an flock on `<work dir>/.devstack/locks/<stack>.lock`, released when its holder exits,
    however; the file names the holder for the waiter's message.
    """
    path = Path(stack.workspace.work_dir) / ".devstack" / "locks" / f"{short_name(stack)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        waiting = _Waiting(wait, short_name(stack))
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waiting.met(_verb_holder(path), verb, what)
                waiting.pause()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "username": getpass.getuser(), "hostname": socket.gethostname(),
                                  "verb": f"{verb} {what}", "since": datetime.now().astimezone().isoformat(
                                      timespec="seconds")}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


def _verb_holder(path: Path) -> str:
    """The devstack verb holding the checkout's lock, as its lock file names it."""
    try:
        held = json.loads(path.read_text())
        return (f"devstack pid {held['pid']} of {held['username']}@{held['hostname']} ({held['verb']}), "
                f"since {held['since']}")
    except (OSError, ValueError, KeyError, TypeError):  # taken a moment ago, not written yet
        return "another devstack verb"


def lock_files(root: Path | None, project: str, short: str) -> list[Path]:
    """The stack's lock files on a file backend (none elsewhere: other backends' locks cannot be seen)."""
    # Project-scoped layout (organization/<project>/<stack>), and the legacy one (<stack>) of older backends.
    patterns = (f"*/{project}/{short}/*.json", f"{short}/*.json")
    return sorted(lock for pattern in patterns for lock in (root / ".pulumi" / "locks").glob(pattern)) if root else []


def _this_machines(lock: Path) -> tuple[int, dict[str, Any]] | None:
    """(pid, the lock's fields) when `lock` is a Pulumi lock taken on this machine; None otherwise
    (another machine's, or a lock file that is not Pulumi's)."""
    try:
        held = json.loads(lock.read_text())
        pid = int(held["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, held) if held.get("hostname") == socket.gethostname() else None


def _runs_pulumi(pid: int) -> bool:
    try:  # a pid reused by another program since the holder was killed is not the holder
        return b"pulumi" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def running_holder(lock: Path) -> str | None:
    """Who holds `lock`, when it is a pulumi process still running on this machine; None when that cannot
    be told (another machine's, or a lock file that is not Pulumi's) or the holder is gone."""
    found = _this_machines(lock)
    if found is None or not _runs_pulumi(found[0]):
        return None
    return f"pid {found[0]}, since {found[1].get('timestamp')}"


def _refuse_a_killed_runs_lock(stack: auto.Stack, verb: str, what: str) -> None:
    """EngineError at once, rather than a wait that cannot end, when the stack's lock is that of a run
    killed on this machine (its pid runs no pulumi): `devstack recover` is what frees it."""
    for lock in lock_files(_backend_root(stack), stack.workspace.project_settings().name, short_name(stack)):
        found = _this_machines(lock)
        if found is not None and not _runs_pulumi(found[0]):
            raise EngineError(verb, what, f"stack {short_name(stack)!r} is locked by pid {found[0]} of this "
                              f"machine, since {found[1].get('timestamp')}, which no longer runs: a killed run's "
                              f"lock", f"nothing was changed by this run; `devstack recover -w {stack.name}`, "
                              f"then run it again")
