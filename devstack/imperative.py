"""`devstack resource create` and the per-domain aliases: the imperative verbs (devstack.declare)
from a terminal.

    devstack resource create ENGINE KIND [NAME] [--project P] [--instance I]
                             [--param k=v ...] [--credentials predictable|generated]
    devstack db create|rm [NAME]         postgres database (and `db gc`: resource gc --engine postgres)
    devstack s3 mb|rb [NAME]             bucket on minio or localstack (--engine picks)
    devstack queue add|rm [NAME]         localstack queue
    devstack topic add|rm [NAME]         kafka topic
    devstack stream add|rm [NAME]        nats stream

A NAME left out means the project's own (the entry omits `name:`); a
--project left out, the current directory's (the devstack.yaml found
walking up from it) when the workspace lists it. A create asks nothing (it
drops nothing) and prints the attributes, secrets masked. `rm` removes the
declaration and retains the resource and its data; with `--purge-data`
(asked first, or --yes) it first sets `purge: true` and updates, then
removes the entry and updates again, so the provider drops the data.
Every verb takes --json or --quiet, and holds the checkout's lock on the
workspace from its read of the file to its update: a second verb waits.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from devstack import yamledit
from devstack.api import Change
from devstack.command import (
    add_lock_option,
    add_output_options,
    add_stack_options,
    ask,
    lock_wait,
    open_from,
    quiet_stdout,
)
from devstack.declare import ALIASES, Out, Outcome, Target, create, parse_params, remove, resolve
from devstack.errors import Confirm, DevstackError, InvalidQuery
from devstack.ledger_cli import add_gc_options, run_gc
from devstack.locks import verb_lock
from devstack.workspace import InvalidDeclaration, Workspace
from providers import registry


def _common(parser: argparse.ArgumentParser, schema: str) -> None:
    add_stack_options(parser)
    parser.add_argument("--project", "-p", help="the project, by name (default: the current directory's, when "
                        "the workspace lists it, else the workspace's only project)")
    parser.add_argument("--instance", help="the shared instance (default: the only one of the engine)")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before dropping data")
    add_output_options(parser, schema)
    add_lock_option(parser)


def _create_options(parser: argparse.ArgumentParser) -> None:
    # -p is --project here as in the ledger commands.
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a param of the kind; VALUE is YAML (20, true, [a, b]); repeatable")
    parser.add_argument("--credentials", choices=("predictable", "generated"), help="credential policy")


def register(subparsers: argparse._SubParsersAction, resource: argparse._SubParsersAction) -> None:
    """Add `create` to `resource` (the verbs of `devstack resource`), and the per-domain aliases (and
    `db gc`, resource gc of postgres)."""
    create_parser = resource.add_parser(
        "create", help="declare a resource in a project's devstack.yaml and create it",
        description="Add the declaration to the project's devstack.yaml, preview it, and update it alone.")
    create_parser.add_argument("engine", choices=registry.engines())
    create_parser.add_argument("kind")
    create_parser.add_argument("name", nargs="?", help="the name (default: the project's)")
    _common(create_parser, "resource-create.schema.json")
    _create_options(create_parser)
    create_parser.set_defaults(func=_run_create, engines=None)
    for command, (engines, kind, add_verb, rm_verb) in ALIASES.items():
        extra = ", gc" if command == "db" else ""
        group = subparsers.add_parser(command, help=f"{kind}s ({'/'.join(engines)}): {add_verb}, {rm_verb}{extra}")
        verbs = group.add_subparsers(dest=f"{command}_command", required=True)
        for verb, func in ((add_verb, _run_create), (rm_verb, _run_remove)):
            parser = verbs.add_parser(verb, help=f"{'declare and create' if func is _run_create else 'remove'} a {kind}")
            parser.add_argument("name", nargs="?", help="the name (default: the project's)")
            _common(parser, "resource-create.schema.json" if func is _run_create else "alias-rm.schema.json")
            if func is _run_create:
                _create_options(parser)
            else:
                parser.add_argument("--purge-data", action="store_true", help="drop the data too (asks first)")
            if len(engines) > 1:
                parser.add_argument("--engine", choices=engines, help="which engine, when the workspace has several")
            parser.set_defaults(func=func, engines=engines, kind=kind)
        if command == "db":
            parser = verbs.add_parser("gc", help="resource gc --engine postgres")
            add_gc_options(parser, engine=False)
            parser.set_defaults(func=run_gc, engine="postgres")


def _open(args: argparse.Namespace) -> Workspace:
    ws = Workspace.of(open_from(args))
    ws.lock_wait = lock_wait(args)
    return ws


def _target(args: argparse.Namespace, ws: Workspace) -> Target:
    picked = getattr(args, "engine", None)  # `resource create ENGINE`, or `s3 --engine`
    engines = (picked,) if picked else args.engines
    name = args.name.removeprefix("s3://").rstrip("/") if args.name is not None else None
    if name == "":
        # An unset shell variable must not turn into the project's own resource (and, with --purge-data, drop it).
        raise InvalidQuery("resolve", f"NAME {args.name!r}", "it is empty",
                           "give the resource's name, or leave NAME out for the project's own resource")
    return resolve(ws, engines, args.kind, name, args.project, args.instance)


def _progress(args: argparse.Namespace) -> Out:
    """Where pulumi's preview goes: stdout; stderr under --json (stdout holds the report alone)."""
    return (lambda line: print(line, file=sys.stderr)) if args.json else print


def _run_create(args: argparse.Namespace) -> int:
    def action() -> int:
        params = parse_params(args.param)
        ws = _open(args)
        # The file's read, edit and update in one piece: a second verb on the workspace waits here.
        with verb_lock(ws.stack, "create", args.name or "the project's own resource", ws.lock_wait):
            target = _target(args, ws)
            # A create drops nothing: no question (the preview still shows what the update does).
            outcome = create(target, params, args.credentials, _yes, _progress(args))
        _report(args, target, outcome, "created")
        return 0

    return _guarded(args, action)


def _run_remove(args: argparse.Namespace) -> int:
    def action() -> int:
        ws = _open(args)
        with verb_lock(ws.stack, "remove", args.name or "the project's own resource", ws.lock_wait):
            target = _target(args, ws)
            # Retained (no --purge-data), the data stays: only a drop asks first.
            confirm = _confirm(args) if args.purge_data else _yes
            outcome = remove(target, args.purge_data, confirm, _progress(args))
        _report(args, target, outcome, "dropped" if args.purge_data else "removed (retained)")
        return 0

    return _guarded(args, action)


def _report(args: argparse.Namespace, target: Target, outcome: Outcome, done: str) -> None:
    change = Change.of(target, outcome, "create" if done == "created" else "remove", purged=done == "dropped")
    if args.json:
        print(json.dumps(change.as_json(), indent=2, sort_keys=True))
        return
    if not outcome.changes and not outcome.file_changed:
        print(f"{target.what}: nothing to change")
    else:
        summary = ", ".join(f"{n} {op}" for op, n in sorted(outcome.changes.items())) or "no update"
        print(f"{target.what}: {done} ({summary}; {target.project.relative}"
              f"{' updated' if outcome.file_changed else ' unchanged'})")
    for name, value in change.attributes.items():
        print(f"  {name}: {value}")


def _confirm(args: argparse.Namespace) -> Confirm:
    if args.yes:
        return _yes

    def confirm(question: str) -> bool:
        reply = ask(f"{question} [y/N] ")
        if reply is None:
            print(f"{question} not confirmed: no terminal to ask on (pass --yes)", file=sys.stderr)
        return reply in ("y", "yes")

    return confirm


def _guarded(args: argparse.Namespace, action: Callable[[], int]) -> int:
    """Run a verb; typed errors become their message on stderr and their exit code."""
    try:
        with quiet_stdout(args):
            return action()
    except InvalidDeclaration as err:
        for problem in err.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(err, file=sys.stderr)
        return err.exit_code
    except DevstackError as err:
        print(err, file=sys.stderr)
        return err.exit_code
    except yamledit.EditError as err:
        print(f"cannot edit the devstack.yaml: {err}", file=sys.stderr)
        return InvalidQuery.exit_code


def _yes(_question: str) -> bool:
    return True
