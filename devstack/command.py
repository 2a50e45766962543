"""What every `devstack` command module shares: the stack, output and lock-wait options, questions on
the terminal, typed errors turned into their message and exit code (devstack.errors), JSON and tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from devstack.api import Workspace, open_workspace
from devstack.errors import Confirm, DevstackError, InvalidQuery
from devstack.locks import DEFAULT_LOCK_WAIT, LockWait

_NO_TTY = "not confirmed: no terminal to ask on (pass --yes)"


def ask(question: str) -> str | None:
    """The answer typed to `question`, stripped and lower-cased; None when stdin is no terminal.

    The question goes to stderr: stdout may be a report (`--json`) redirected to a
    file, which must hold the report alone, and the user must see what is asked.
    """
    if not sys.stdin.isatty():
        return None  # never assume an answer
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower()


def add_stack_options(parser: argparse.ArgumentParser) -> None:
    """--workspace, --backend-url, --work-dir: which stack, in which backend, with which program."""
    parser.add_argument("--workspace", "-w", default="local", help="the workspace (stack) name (default: local)")
    parser.add_argument("--backend-url", help="the Pulumi backend, e.g. postgres://user@host:port/db with the "
                        "password in $PGPASSWORD (default: $PULUMI_BACKEND_URL, else the checkout's file backend)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="directory of the program and stack config (default: the checkout)")


def add_output_options(parser: argparse.ArgumentParser, schema: str) -> None:
    """--json (a report, devstack/schemas/<schema>) or --quiet (nothing but errors; the exit code says it)."""
    way = parser.add_mutually_exclusive_group()
    way.add_argument("--json", action="store_true", help=f"JSON (devstack/schemas/{schema})")
    way.add_argument("--quiet", "-q", action="store_true",
                     help="print nothing but errors: the exit code says the outcome")


def add_lock_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock-wait", type=float, metavar="SECONDS",
                        help="how long to wait for another run's lock on the stack before giving up "
                        f"(default: $DEVSTACK_LOCK_WAIT, else {DEFAULT_LOCK_WAIT:.0f})")


def note(args: argparse.Namespace, text: str) -> None:
    """A remark on stderr (a count, a warning, what it waits for): not with --quiet."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr, flush=True)


def lock_wait(args: argparse.Namespace) -> LockWait:
    """How long the verb waits for another run's lock, saying on stderr whose lock it waits on."""
    say = lambda text: note(args, text)  # noqa: E731
    if getattr(args, "lock_wait", None) is None:
        return LockWait.default(say)
    if args.lock_wait < 0:
        raise InvalidQuery("wait", f"--lock-wait {args.lock_wait:g}", "a negative number of seconds", "pass 0 or more")
    return LockWait(args.lock_wait, say)


@contextmanager
def quiet_stdout(args: argparse.Namespace) -> Iterator[None]:
    """With --quiet, what the verb (and pulumi's progress through it) prints on stdout goes nowhere."""
    if not getattr(args, "quiet", False):
        yield
        return
    with open(os.devnull, "w") as devnull, redirect_stdout(devnull):
        yield


def work_dir_option(args: argparse.Namespace) -> dict[str, Path]:
    """--work-dir as a keyword for the ledger functions (their default: the checkout)."""
    return {"work_dir": args.work_dir} if args.work_dir else {}


def open_from(args: argparse.Namespace) -> auto.Stack:
    """The stack the stack options name."""
    return workspace_from(args).stack


def workspace_from(args: argparse.Namespace) -> Workspace:
    """The workspace the stack options name, opened through the Python API (devstack.api), waiting for
    another run's lock as --lock-wait says."""
    wait = lock_wait(args) if hasattr(args, "lock_wait") else None
    return open_workspace(args.workspace, args.backend_url, args.work_dir, lock_wait=wait)


def guarded(action: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose typed errors become their message on stderr and their exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            with quiet_stdout(args):
                return action(args)
        except DevstackError as err:
            if err.done is not None and getattr(args, "json", False):
                emit_json(err.done)  # stopped part-way: a script still learns what was done
            for problem in getattr(err, "problems", []):  # a refused file edit: preview's messages
                print(f"error: {problem}", file=sys.stderr)
            print(err, file=sys.stderr)
            return err.exit_code

    return run


def confirmer(args: argparse.Namespace) -> Confirm:
    """--yes confirms; otherwise ask on the terminal, and refuse without one."""
    if getattr(args, "yes", False):
        return lambda _text: True

    def confirm(text: str) -> bool:
        reply = ask(f"{text}\nType 'yes' to go ahead: ")
        if reply is None:
            print(f"{text}: {_NO_TTY}", file=sys.stderr)
        return reply == "yes"

    return confirm


def emit_json(model: Any) -> None:
    print(json.dumps(model.as_json(), indent=2, sort_keys=True))


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])
