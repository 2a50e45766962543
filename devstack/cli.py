"""`devstack`: one console script; each command group lives in its own module.

A command module exposes `register(subparsers)`, which adds its parsers and
sets `func` on each (a callable taking the parsed args and returning the exit
code). Modules are imported lazily so a broken one only breaks its commands.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tools.pulumi_env import let_plugins_see_sigint

#: Command modules, in the order `devstack --help` lists them.
COMMAND_MODULES = (
    "devstack.ledger_cli",   # resource list/show/gc/rm, destroy
    "devstack.env_cli",      # env, exec
    "devstack.imperative",   # resource create, db/s3/queue/topic/stream aliases
    "devstack.doctor",       # doctor
)


def ask(question: str) -> str | None:
    """The answer typed to `question`, stripped and lower-cased; None when stdin is no terminal.

    The question goes to stderr: stdout may be a report (`--json`) redirected to a
    file, which must hold the report alone, and the user must see what is asked.
    """
    if not sys.stdin.isatty():
        return None  # never assume an answer
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower()


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="devstack", description=__doc__.splitlines()[0])
    subparsers = root.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue  # not written yet
            raise
        module.register(subparsers)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    let_plugins_see_sigint()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (`devstack resource list | head`): stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 141
    except KeyboardInterrupt:
        # Ctrl-C: a verb puts back a file edit it had not applied (drops already made stay made); a traceback says nothing more.
        print("devstack: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
