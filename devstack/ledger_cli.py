"""`devstack resource list|show|gc|rm` and `devstack destroy`: the ledger from a terminal.

    devstack resource list [--workspace W] [--project P] [--engine E] [--kind K] [--instance I] [--name N]
                           [--lifecycle active|stale|deleted] [--json] [--limit N] [--cursor C]
    devstack resource show NAME [--engine E] [--project P] [--kind K] [--json] [--show-secrets]
    devstack resource history NAME [--engine E] [--project P] [--kind K] [--json]
    devstack resource gc [--engine E] [--kind K] [--project P] [--prune [--include-retained]] [--yes] [--json]
    devstack resource rm NAME [--engine E] [--project P] [--kind K] [--purge-data] [--yes] [--json]
    devstack workspace destroy [--project P] [--purge-data] [--yes] [--json]   (alias: devstack destroy)
    devstack recover [--json]

Every command also takes --workspace/-w (the stack, default `local`),
--backend-url (default: $PULUMI_BACKEND_URL, else the checkout's file
backend) and --work-dir (program and stack config, default: the checkout),
and --json or --quiet (nothing but errors); those that change the ledger
wait for another run's lock on the stack (--lock-wait SECONDS, default
$DEVSTACK_LOCK_WAIT, else 300), saying on stderr whose lock. Typed
errors print their message on stderr and exit with their code
(devstack.errors); argparse exits 2 on unknown flags. --json output
follows the schemas in devstack/schemas/.

Each command is a call of devstack.api, the API other Python code uses, and
its printing. `rm` and `recover` call their verbs themselves: `rm` also
edits the resource's devstack.yaml, and `recover` must work on a stack that
does not open.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components import templates
from devstack import yamledit
from devstack.command import (
    add_lock_option,
    add_output_options,
    add_stack_options,
    confirmer,
    emit_json,
    guarded,
    lock_wait,
    note,
    open_from,
    table,
    work_dir_option,
    workspace_from,
)
from devstack.errors import DevstackError, InvalidQuery, NotFound
from devstack.gc import GcItem
from devstack.listing import DEFAULT_LIMIT, MAX_LIMIT
from devstack.locks import verb_lock
from devstack.models import Resource, ResourcePage
from devstack.recovery import recover
from devstack.removal import remove_resource
from devstack.state import LIFECYCLES
from devstack.workspace import Workspace, cannot_read, current_project, without_declaration, write_text
from devstack.yamledit import EditError

#: Attributes every kind has and a table need not repeat (the instance's address).
INSTANCE_ATTRIBUTES = ("host", "port", "region", "endpoint")


def _short_time(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


# --- columns of `resource list` -------------------------------------------------------------


def columns_for(engine: str, kind: str) -> list[tuple[str, str]]:
    """The table columns `devstack resource list` prints for a kind: (title, attribute path).

    Read from an optional `columns:` list under the kind in
    templates/<engine>.yaml (`- {name: TITLE, path: attr[.key...]}`, the path
    into the resource's attributes); without one, the kind's non-secret
    attributes other than the instance's address. A column on a secret
    attribute or an attribute the kind does not have is a template error
    (ValueError naming the file and column); an unknown kind is a KeyError.
    """
    return list(_columns(engine, kind))


@cache
def _columns(engine: str, kind: str) -> tuple[tuple[str, str], ...]:
    template = templates.engine_template(engine).kinds[kind]
    raw = yaml.safe_load((templates.TEMPLATES_DIR / f"{engine}.yaml").read_text(encoding="utf-8")) or {}
    declared = ((raw.get("kinds") or {}).get(kind) or {}).get("columns")
    if declared is None:
        return tuple((_title(a), a) for a in template.attributes
                     if a not in INSTANCE_ATTRIBUTES and not template.is_secret(a))
    columns = []
    for i, column in enumerate(declared):
        where = f"templates/{engine}.yaml: kinds.{kind}.columns[{i}]"
        if not isinstance(column, dict) or not isinstance(column.get("name"), str) or not isinstance(column.get("path"), str):
            raise ValueError(f"{where}: a column is a mapping with string `name` and `path`")
        head = column["path"].split(".")[0]
        # Exports are composed in the stack outputs only; the ledger holds the provider's attributes.
        if head not in template.attributes or template.is_secret(head):
            raise ValueError(f"{where}: {head!r} is not a non-secret attribute of {engine} {kind} "
                             f"(attributes: {', '.join(n for n in template.attributes if not template.is_secret(n))})")
        columns.append((column["name"], column["path"]))
    return tuple(columns)


def _title(attribute: str) -> str:
    """`queueUrl` -> `QUEUE URL`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", attribute).upper()


def column_value(attributes: dict[str, Any], path: str) -> Any:
    """Follow a dotted path into a resource's attributes; None where it leads nowhere."""
    value: Any = attributes
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


# --- list -----------------------------------------------------------------------------------


def _kind_columns(page: ResourcePage) -> list[tuple[str, str]]:
    """Per-kind attribute columns (columns_for) when a page holds one kind only."""
    kinds = {(r.engine, r.kind) for r in page.items}
    if len(kinds) != 1:
        return []
    engine, kind = kinds.pop()
    try:
        return columns_for(engine, kind)
    except (KeyError, FileNotFoundError):  # a kind or engine gone from the templates: the common columns only
        return []
    except ValueError as err:  # the template's own mistake, named by file and column
        raise DevstackError("list", f"{engine} {kind} resources", str(err), "fix the template's columns") from None


def _cell(attributes: dict[str, Any], path: str) -> str:
    value = column_value(attributes, path)
    return "-" if value is None else str(value)


def project_here(args: argparse.Namespace, stack, name: str | None = None) -> str | None:
    """--project, else the project of the current directory (the nearest devstack.yaml up from it) when the
    workspace lists it; None: every project. A `name` that names its project itself (a declaration name
    `<project>/...` or an id `...@<project>`) is left to say so."""
    if args.project is not None or (name and ("/" in name or "@" in name)):
        return args.project
    if yamledit.nearest_devstack_yaml() is None:
        return None
    here = current_project(Workspace.of(stack).projects())
    if here is None:
        return None
    note(args, f"project {here.name!r}, the current directory's (--project to choose another)")
    return here.name


@guarded
def run_list(args: argparse.Namespace) -> int:
    ws = workspace_from(args)
    page = ws.resources(project=project_here(args, ws.stack), engine=args.engine, kind=args.kind,
                        instance=args.instance, name=args.name, lifecycle=args.lifecycle, limit=args.limit,
                        cursor=args.cursor)
    if args.json:
        emit_json(page)
        return 0
    extra = _kind_columns(page)
    header = ["PROJECT", "ENGINE", "INSTANCE", "KIND", "NAME", "LIFECYCLE", "RETAINED", "FIRST SEEN", "LAST SEEN",
              *(t for t, _ in extra)]
    rows = [[r.project, r.engine, r.instance, r.kind, r.name, r.lifecycle, "yes" if r.retained else "no",
             _short_time(r.first_seen), _short_time(r.last_seen), *(_cell(r.attributes, p) for _, p in extra)]
            for r in page.items]
    print(table(rows, header) if rows else "no resources")
    shown = f"{len(page.items)} of {page.total}"
    more = f"; next page: --cursor {page.next_cursor}" if page.next_cursor else ""
    note(args, f"{shown} resources in workspace {page.workspace!r}{more}")
    return 0


# --- show -----------------------------------------------------------------------------------


@guarded
def run_show(args: argparse.Namespace) -> int:
    ws = workspace_from(args)
    detail = ws.resource(args.name, engine=args.engine, project=project_here(args, ws.stack, args.name),
                         kind=args.kind, show_secrets=args.show_secrets)
    if args.json:
        emit_json(detail)
        return 0
    lines = [
        f"id:          {detail.id}", f"urn:         {detail.urn}", f"project:     {detail.project}",
        f"engine:      {detail.engine} (instance {detail.instance})", f"kind:        {detail.kind}",
        f"name:        {detail.name}", f"credentials: {detail.credentials}",
        f"retained:    {'yes' if detail.retained else 'no (purge: true)'}",
        f"created:     {_short_time(detail.created)}", f"modified:    {_short_time(detail.modified)}",
        f"lifecycle:   {detail.lifecycle}" + (f" (since {_short_time(detail.deleted_at)})" if detail.deleted_at else ""),
        f"first seen:  {_short_time(detail.first_seen)}", f"last seen:   {_short_time(detail.last_seen)}",
        "params:" + ("" if detail.params else " {}"),
        *(f"  {k}: {json.dumps(v)}" for k, v in sorted(detail.params.items())),
        "attributes:" + ("" if detail.attributes else " {}"),
        *(f"  {k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in sorted(detail.attributes.items())),
    ]
    print("\n".join(lines))
    if detail.secret_attributes and not detail.secrets_shown:
        note(args, f"secret attributes redacted: {', '.join(detail.secret_attributes)} (--show-secrets shows them)")
    return 0


@guarded
def run_history(args: argparse.Namespace) -> int:
    ws = workspace_from(args)
    found = ws.history(args.name, engine=args.engine, project=project_here(args, ws.stack, args.name),
                       kind=args.kind)
    if args.json:
        emit_json(found)
        return 0
    r = found.resource
    print(f"{r.id}: {r.lifecycle}" + (f" since {_short_time(r.deleted_at)}" if r.deleted_at else "")
          + f" (first seen {_short_time(r.first_seen)}, last seen {_short_time(r.last_seen)})")
    rows = [[_short_time(e.at), e.kind, e.cause, e.urn or "-"] for e in found.events]
    print(table(rows, ["AT", "EVENT", "CAUSE", "URN"]) if rows else "no events recorded")
    return 0


# --- gc -------------------------------------------------------------------------------------


def _gc_rows(items: list[GcItem]) -> list[list[str]]:
    return [[i.engine, i.instance, i.kind, i.engine_name, i.project or "-", i.stack or "-", i.reason] for i in items]


@guarded
def run_gc(args: argparse.Namespace) -> int:
    report = workspace_from(args).gc(engine=args.engine, kind=args.kind, project=args.project, prune=args.prune,
                                     include_retained=args.include_retained, confirm=confirmer(args))
    if args.json:
        emit_json(report)
    else:
        header = ["ENGINE", "INSTANCE", "KIND", "ENGINE NAME", "PROJECT", "WORKSPACE", "WHY"]
        print(f"scanned {', '.join(report.scanned) or 'nothing'}; {report.managed} managed resources match the ledger")
        for title, items in (("orphans", report.orphans), ("retained", report.retained), ("stale", report.stale),
                             ("foreign", report.foreign)):
            print(f"{title}: {len(items)}")
            if items:
                print(table(_gc_rows(items), header) + "\n")
        # Other workspaces' resources are not this ledger's business: a count per workspace says enough.
        per = Counter(i.stack or "unknown" for i in report.other_workspaces)
        print(f"other workspaces: {len(report.other_workspaces)}"
              + (f" ({', '.join(f'{w}: {n}' for w, n in sorted(per.items()))}; never touched, --json lists them)" if per else ""))
        if report.pruned:
            print(f"\npruned: {', '.join(report.pruned)}")
        elif report.orphans and not args.prune:
            print("\nnothing dropped (report only): --prune drops the orphans after confirmation")
        if report.retained and not (args.prune and args.include_retained):
            print("retained ones stay: --prune --include-retained drops them too")
    for error in report.errors:
        print(f"{error.engine} instance {error.instance!r}: {error.error}", file=sys.stderr)
    return 8 if report.errors else 0


# --- rm and destroy ---------------------------------------------------------------------------


@guarded
def run_rm(args: argparse.Namespace) -> int:
    stack, wait = open_from(args), lock_wait(args)
    edits: list[tuple[Path, str, str]] = []
    with verb_lock(stack, "remove", args.name, wait):
        # The file side: without it the next `pulumi up` would declare and adopt it again. Checked
        # before the ledger changes, as `pulumi preview` would check it (an import of the entry, say).
        removal = remove_resource(stack, args.name, engine=args.engine,
                                         project=project_here(args, stack, args.name),
                                         kind=args.kind, purge_data=args.purge_data, confirm=confirmer(args),
                                         before=lambda resource: edits.extend(_declaration_edit(stack, resource)),
                                         lock_wait=wait)
        for path, text, relative in edits:
            write_text(path, text)
            if not args.json:
                print(f"removed its declaration from {relative}")
    if args.json:
        emit_json(removal.model_copy(update={"edited": [relative for _, _, relative in edits]}))
    elif removal.data_dropped:
        print(f"dropped the data of {removal.resource.id} and removed it from the ledger")
    elif removal.already_gone:
        print(f"{removal.resource.id} was already gone from the engine; removed it from the ledger")
    else:
        print(f"removed {removal.resource.id} from the ledger; its data stays in the engine")
    return 0


def _declaration_edit(stack, resource: Resource) -> list[tuple[Path, str, str]]:
    """The resource's project file without its entry, as (path, new text, relative path), once the
    workspace has been validated that way; empty when no file declares it. InvalidDeclaration else."""
    try:
        workspace = Workspace.of(stack)
    except NotFound as err:
        # Nothing then says which devstack.yaml declares it (a --work-dir of another checkout, say): un-tracked,
        # it would be made again, a generated password new, by the next `up` of the checkout that declares it.
        raise InvalidQuery("remove", resource.id, f"{err.cause} in {stack.workspace.work_dir}, so no devstack.yaml "
                                                  f"can be checked or edited", "nothing was changed; run it from the "
                           "checkout of the stack (or pass its --work-dir); a stack without one: `pulumi state "
                           "delete` its URN") from err
    refs = workspace.projects()
    if not any(ref.name == resource.project for ref in refs):
        # One that exists but cannot be read may declare the entry, which the next `pulumi up` would then
        # make again; a missing one (its project's directory removed) declares nothing.
        unreadable = [ref for ref in refs if ref.unreadable and ref.path.exists()]
        if unreadable:
            raise InvalidQuery("remove", resource.id, cannot_read(unreadable),
                               "nothing was changed; fix the file (`pulumi preview` shows every problem), then "
                               "run the command again")
    for ref in refs:
        if ref.name == resource.project and ref.path.is_file():
            try:
                text = without_declaration(ref.path, resource.instance, resource.kind, resource.name)
            except EditError as err:
                raise InvalidQuery("remove", resource.id, f"cannot take its entry out of {ref.relative}: {err}",
                                   "nothing was changed; edit the file as it says, or remove the entry by hand "
                                   "and run `pulumi up`") from err
            if text is not None:
                workspace.check(ref.relative, text, resource.id, "remove")
                return [(ref.path, text, ref.relative)]
    return []


@guarded
def run_destroy(args: argparse.Namespace) -> int:
    ws = workspace_from(args)
    if args.project is not None and not args.project.strip():
        raise InvalidQuery("destroy", "--project ''", "the value is empty", "name a project, or leave --project out "
                           "to destroy the whole workspace")
    result = ws.destroy(purge_data=args.purge_data, project=args.project, confirm=confirmer(args))
    if args.json:
        emit_json(result)
        return 0
    kept = len(result.untracked) - len(result.dropped) - len(result.already_gone)
    what = f"project {result.project!r} of workspace" if result.project else "workspace"
    print(f"{what} {result.workspace!r} destroyed: {len(result.untracked)} resources removed from the ledger, "
          f"{len(result.dropped)} dropped with their data, {kept} kept in their engines"
          + (f", {len(result.already_gone)} already gone" if result.already_gone else ""))
    return 0


@guarded
def run_recover(args: argparse.Namespace) -> int:
    result = recover(args.workspace, args.backend_url, **work_dir_option(args))
    if args.json:
        emit_json(result)
        return 0
    for path in result.repaired:
        print(f"removed {path}: empty metadata left by the interrupted run")
    print(f"workspace {result.workspace!r} recovered: unlocked, {result.pending_cleared} pending operation(s) "
          "cleared from the ledger; run `pulumi up` (or scripts/up) next: it adopts what the killed run made "
          "and creates the rest (until then `devstack resource gc` lists those as orphans: do not prune)")
    return 0


# --- registration ---------------------------------------------------------------------------


def _filters(parser: argparse.ArgumentParser, *, kind: bool = True) -> None:
    parser.add_argument("--project", "-p", help="only this project (exact match)")
    parser.add_argument("--engine", "-e", help="only this engine (exact match)")
    if kind:
        parser.add_argument("--kind", "-k", help="only this kind (exact match)")


def _list_filters(parser: argparse.ArgumentParser) -> None:
    _filters(parser)
    parser.add_argument("--instance", "-i", help="only this shared instance (exact match)")
    parser.add_argument("--name", help="only this declaration name (exact match)")
    parser.add_argument("--lifecycle", "-l", choices=LIFECYCLES,
                        help="only active, stale or deleted (tombstones) ones (default: active and stale)")


_DESTROY = "empty the workspace's stack, or take one project out of it; data stays unless --purge-data"


def add_gc_options(parser: argparse.ArgumentParser, *, engine: bool = True) -> None:
    """The options of `resource gc` (`db gc` fixes the engine)."""
    add_stack_options(parser)
    parser.add_argument("--project", "-p", help="only this project (exact match)")
    if engine:
        parser.add_argument("--engine", "-e", help="only this engine (exact match)")
    parser.add_argument("--kind", "-k", help="only this kind (exact match)")
    parser.add_argument("--prune", action="store_true", help="drop the orphans (asks first, or --yes)")
    parser.add_argument("--include-retained", action="store_true",
                        help="with --prune, drop the retained ones too: their entry left the devstack.yaml of a "
                        "project still in the workspace")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before dropping")
    add_output_options(parser, "resource-gc.schema.json")
    add_lock_option(parser)


def register(subparsers: argparse._SubParsersAction, resource: argparse._SubParsersAction) -> None:
    """Add `list`, `show`, `history`, `gc` and `rm` to `resource` (the verbs of `devstack resource`), `destroy` and `recover`."""
    p = resource.add_parser("list", help="tenant resources in the ledger, in a stable order, one page at a time")
    add_stack_options(p)
    _list_filters(p)
    p.add_argument("--limit", "-n", type=int, default=DEFAULT_LIMIT,
                   help=f"rows per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})")
    p.add_argument("--cursor", help="next_cursor of the previous page (same filters only)")
    add_output_options(p, "resource-list.schema.json")
    p.set_defaults(func=run_list)

    p = resource.add_parser("show", help="one resource: attributes, owner, engine, kind, created and modified")
    p.add_argument("name", help="declaration name, <project>/<instance>/<kind>/<name>, or engine/instance/kind/name@owner")
    add_stack_options(p)
    _filters(p)
    p.add_argument("--show-secrets", action="store_true", help="show secret attributes instead of [secret]")
    add_output_options(p, "resource-show.schema.json")
    p.set_defaults(func=run_show)

    p = resource.add_parser("history", help="one resource's lifecycle and events (provision, update, drop, "
                            "gc.drop), tombstones too")
    p.add_argument("name", help="declaration name, <project>/<instance>/<kind>/<name>, or engine/instance/kind/name@owner")
    add_stack_options(p)
    _filters(p)
    add_output_options(p, "resource-history.schema.json")
    p.set_defaults(func=run_history)

    p = resource.add_parser("gc", help="scan the engines and reconcile with the ledger: orphans, retained, stale, "
                         "foreign")
    add_gc_options(p)
    p.set_defaults(func=run_gc)

    p = resource.add_parser("rm", help="remove a resource from the ledger; --purge-data drops its data first")
    p.add_argument("name", help="declaration name, <project>/<instance>/<kind>/<name>, or engine/instance/kind/name@owner")
    add_stack_options(p)
    _filters(p)
    p.add_argument("--purge-data", action="store_true", help="drop the data in the engine too (asks first, or --yes)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask before dropping data")
    add_output_options(p, "resource-rm.schema.json")
    add_lock_option(p)
    p.set_defaults(func=run_rm)

    workspace = subparsers.add_parser("workspace", help="the workspace as a whole: destroy")
    verbs = workspace.add_subparsers(dest="workspace_command", required=True)
    for p in (verbs.add_parser("destroy", help=_DESTROY), subparsers.add_parser("destroy", help=f"{_DESTROY} "
                                                                                "(workspace destroy)")):
        add_stack_options(p)
        p.add_argument("--project", "-p", help="only this project's resources (the others and the stack stay)")
        p.add_argument("--purge-data", action="store_true", help="drop the resources' data (asks first, or --yes)")
        p.add_argument("--yes", "-y", action="store_true", help="do not ask before dropping data")
        add_output_options(p, "destroy.schema.json")
        add_lock_option(p)
        p.set_defaults(func=run_destroy)

    p = subparsers.add_parser("recover", help="after a killed `pulumi up`: repair the backend, unlock, "
                              "resolve pending operations against the engines")
    add_stack_options(p)
    add_output_options(p, "recover.schema.json")
    p.set_defaults(func=run_recover)
