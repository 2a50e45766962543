"""`devstack`: one console script; each command group lives in its own module.

A command module exposes `register(subparsers)`, which adds its parsers and
sets `func` on each (a callable taking the parsed args and returning the exit
code); one that adds verbs to `devstack resource` takes that group too:
`register(subparsers, resource)`. Modules are imported lazily so a broken one
only breaks its commands.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tools.pulumi_env import let_plugins_see_sigint

#: Command modules, in the order `devstack --help` lists them, and whether they add verbs to `devstack resource`.
COMMAND_MODULES = (
    ("devstack.ledger_cli", True),    # resource list/show/gc/rm, destroy, recover
    ("devstack.env_cli", False),      # env, exec
    ("devstack.imperative", True),    # resource create, db/s3/queue/topic/stream aliases
    ("devstack.doctor_cli", False),   # doctor
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="devstack", description=__doc__.splitlines()[0])
    subparsers = root.add_subparsers(dest="command", required=True)
    resource = subparsers.add_parser("resource", help="resources of the workspace: create, list, show, gc, rm")
    verbs = resource.add_subparsers(dest="resource_command", required=True)
    for name, adds_resource_verbs in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue  # not written yet
            raise
        if adds_resource_verbs:
            module.register(subparsers, verbs)
        else:
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
