"""`devstack env` and `devstack exec`: a service's environment without writing it to a file.

    devstack env PROJECT SERVICE [--show-secrets] [--json]
    devstack exec PROJECT SERVICE -- CMD [ARG...]

Both read the stack output `<project>.services.<service>.env`. `env` prints
`VAR=value` lines (values shell-quoted, secrets as [secret] unless
--show-secrets). `exec` runs CMD with the variables added to the current
environment (theirs win) and exits with CMD's status (127 when CMD cannot
be started), so secrets pass from the ledger to the process and never
through a file. A variable the workspace's secret store serves (`<VAR>_SECRET_ID`
in the outputs) is read from the store for --show-secrets and `exec`
(docs/secret-store.md). Both take --workspace, --backend-url and --work-dir.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from devstack.command import add_output_options, add_stack_options, emit_json, guarded, note, workspace_from
from devstack.errors import InvalidQuery
from devstack.models import ServiceEnv

#: The exit status of a command that cannot be started, as shells report it.
NOT_STARTED = 127


@guarded
def run_env(args: argparse.Namespace) -> int:
    found = _environment(args, show_secrets=args.show_secrets)
    if args.json:
        emit_json(found)
        return 0
    for var, value in found.env.items():
        shown = value if var in found.secret_vars and not found.secrets_shown else shlex.quote(value)
        print(f"{var}={shown}")
    if found.secret_vars and not found.secrets_shown:
        note(args, f"secrets masked: {', '.join(found.secret_vars)} (--show-secrets shows them)")
    return 0


def _environment(args: argparse.Namespace, show_secrets: bool) -> ServiceEnv:
    """The service's environment (devstack.api), warnings on stderr when the outputs it comes from may be stale."""
    found = workspace_from(args).env(args.project, args.service, show_secrets=show_secrets,
                                     warn=lambda text: note(args, text))
    return found.service_env()


def exec_with_env(command: list[str], env: dict[str, str]) -> int:
    """Run `command` with `env` over the current environment; its exit status (127 if it cannot start,
    128 + the signal's number if a signal ended it, as a shell reports it)."""
    try:
        code = subprocess.run(command, env={**os.environ, **env}, check=False).returncode
        return 128 - code if code < 0 else code
    except OSError as err:
        print(f"cannot run {command[0]!r}: {err.strerror or err}", file=sys.stderr)
        return NOT_STARTED


def _exec_head() -> argparse.ArgumentParser:
    """What may come before `--`: PROJECT SERVICE and the stack options (defaults left to the outer parser)."""
    head = argparse.ArgumentParser(prog="devstack exec", argument_default=argparse.SUPPRESS)
    head.add_argument("project")
    head.add_argument("service")
    add_stack_options(head)
    return head


def split_exec_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(our arguments, CMD): split at the first `--`; without one, CMD follows PROJECT SERVICE."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv[:2], argv[2:]


@guarded
def run_exec(args: argparse.Namespace) -> int:
    ours, command = split_exec_argv(list(args.argv))
    _exec_head().parse_args(ours, namespace=args)
    if not command:
        raise InvalidQuery("run", "a command", "none was given", "devstack exec PROJECT SERVICE -- CMD [ARG...]")
    if "--" not in args.argv and command[0].startswith("-"):  # `exec P S -w W`: -w would run as the command
        raise InvalidQuery("run", repr(command[0]), "an option where the command goes",
                           "put `--` between the options and the command: devstack exec PROJECT SERVICE "
                           "[options] -- CMD [ARG...]")
    found = _environment(args, show_secrets=True)
    sys.stdout.flush()
    return exec_with_env(command, found.env)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `env` and `exec`."""
    p = subparsers.add_parser("env", help="print a service's environment from the stack outputs")
    p.add_argument("project")
    p.add_argument("service")
    add_stack_options(p)
    p.add_argument("--show-secrets", action="store_true", help="print secret values instead of [secret]")
    add_output_options(p, "env.schema.json")
    p.set_defaults(func=run_env)

    p = subparsers.add_parser("exec", help="run a command with a service's environment (secrets never touch a file)",
                              usage="devstack exec [options] PROJECT SERVICE [options] -- CMD [ARG...]")
    add_stack_options(p)
    # argparse cannot place options between positionals and a trailing command:
    # take everything from PROJECT on and split it at `--` ourselves.
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="PROJECT SERVICE -- CMD", help="see usage")
    p.set_defaults(func=run_exec)
