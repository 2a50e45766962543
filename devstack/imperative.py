"""Imperative verbs on the declarative substrate: `devstack resource create` and aliases.

A verb never talks to an engine itself. It edits one project's devstack.yaml
(comments and order kept, see devstack.yamledit), validates the would-be
workspace exactly as `pulumi preview` would, previews the change targeted at
that one resource, and on confirmation runs the same program `pulumi up`
runs, targeted at it. So `devstack db create orders` and adding

    - uses: pg
      kind: database
      name: orders

by hand followed by `pulumi up` are the same operation with the same result.

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

The `resource` group is shared with devstack.ledger_cli (list/show/gc/rm):
whichever module registers first creates `subparsers.add_parser("resource")`
and stores its sub-subparsers on the parser as `_devstack_sub`; the other
finds it in `subparsers.choices["resource"]` and adds to `._devstack_sub`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import dropwhile, takewhile
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto
from pydantic import Field, ValidationError

from components import templates
from components.models import WorkspaceConfig, shared_ref
from components.validation import WorkspaceInvalid, validate
from components.yamlfile import load_yaml_if_usable, refuse_special_file, stack_config_file, unreadable_reason
from devstack import cli, ledger, yamledit
from devstack.errors import Aborted, DevstackError, EngineError, IdentityConflict, InvalidQuery, NotFound
from devstack.ledger import EXCEPTION_LINE
from devstack.ledger_cli import (
    add_gc_options,
    add_lock_option,
    add_output_options,
    add_stack_options,
    lock_wait,
    open_from,
    quiet_stdout,
    resource_group,
    run_gc,
)
from providers import errors as provider_errors
from providers import registry
from providers.identity import Identity
from providers.instances import SharedInstance, parse_object

Confirm = Callable[[str], bool]
Out = Callable[[str], None]

#: Per-domain aliases: command -> (engines it may use, kind, add verb, remove verb).
ALIASES: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "db": (("postgres",), "database", "create", "rm"),
    "s3": (("minio", "localstack"), "bucket", "mb", "rb"),
    "queue": (("localstack",), "queue", "add", "rm"),
    "topic": (("kafka",), "topic", "add", "rm"),
    "stream": (("nats",), "stream", "add", "rm"),
}
#: Attributes every kind has and a table need not repeat (the instance's address).
INSTANCE_ATTRIBUTES = ("host", "port", "region", "endpoint")


class InvalidDeclaration(InvalidQuery):
    """The would-be workspace does not validate; `problems` are pulumi preview's messages."""

    def __init__(self, what: str, invalid: WorkspaceInvalid, verb: str = "declare") -> None:
        self.problems = [str(problem) for problem in invalid.problems]
        super().__init__(verb, what, f"{len(self.problems)} problem(s) in the workspace as the edit would "
                         "leave it (their lines are the edited file's); nothing was changed", "the file is as it was")


# --- the workspace behind a stack -------------------------------------------


@dataclass(frozen=True)
class ProjectRef:
    """One project of the workspace: its name and its devstack.yaml."""

    name: str
    relative: str
    path: Path
    #: Why the file cannot be read (not YAML, not UTF-8, missing); None when it can.
    unreadable: str | None = None


def cannot_read(refs: Sequence[ProjectRef]) -> str:
    """Which project files cannot be read, and why, on one line."""
    return "; ".join(f"{ref.relative} cannot be read: {ref.unreadable}" for ref in refs)


@dataclass
class Workspace:
    """A stack's `devstack:workspace` config, read once, plus the directory of its files."""

    stack: auto.Stack
    root: Path
    raw: dict[str, Any]
    config: WorkspaceConfig
    #: The stack config's keys as `of` read them, so `check` need not ask the CLI again.
    config_keys: frozenset[str] | None = None
    #: How preview and update meet another run's lock on the stack.
    lock_wait: ledger.LockWait = field(default_factory=ledger.LockWait)

    @classmethod
    def of(cls, stack: auto.Stack) -> Workspace:
        """Read the workspace config of `stack`; InvalidQuery when it is missing or malformed."""
        values = ledger.stack_config(stack)
        if "devstack:workspace" not in values:
            display = stack_config_file(Path(stack.workspace.work_dir), ledger.short_name(stack))
            raise NotFound("read", f"the workspace of stack {stack.name!r}", "no devstack:workspace in its config",
                           f"set it in {display}")
        try:
            raw = parse_object(values["devstack:workspace"])
            config = WorkspaceConfig.model_validate(raw)
        except (ValidationError, ValueError) as err:
            found = ledger.workspace_problems(stack, values) or [str(err).splitlines()[0]]
            raise InvalidQuery("read", f"the workspace of stack {stack.name!r}", "; ".join(found),
                               "`pulumi preview` lists every problem") from err
        return cls(stack=stack, root=Path(stack.workspace.work_dir), raw=raw, config=config,
                   config_keys=frozenset(values))

    def instance_for(self, engines: Sequence[str], name: str | None = None) -> SharedInstance:
        """The shared instance serving one of `engines`: `name` when given, else the only one."""
        shared = self.config.shared
        if name is not None:
            instance = shared.get(name)
            if instance is None or instance.engine not in engines:
                raise NotFound("use", f"instance {name!r}", f"workspace {self.config.name!r} has no "
                               f"{'/'.join(engines)} instance of that name", _listing(shared, engines))
            return instance
        found = [i for i in shared.values() if i.engine in engines]
        if not found:
            raise NotFound("use", "/".join(engines), f"no shared instance of workspace {self.config.name!r} "
                           f"provides it", f"declare one under devstack:workspace.shared; {_listing(shared, ())}")
        if len(found) > 1:
            hint = "--engine or --instance picks one" if len(engines) > 1 else "--instance picks one"
            raise InvalidQuery("use", "/".join(engines), f"several instances provide it: "
                               f"{', '.join(f'{i.name} ({i.engine})' for i in found)}", hint)
        return found[0]

    def projects(self) -> list[ProjectRef]:
        refs = []
        for relative in self.config.projects:
            path = self.root / relative
            data, unreadable = None, None
            try:
                refuse_special_file(path)
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
                unreadable = unreadable_reason(err)
            name = data.get("name") if isinstance(data, dict) else None
            refs.append(ProjectRef(name=str(name) if name else relative, relative=relative, path=path,
                                   unreadable=unreadable))
        return refs

    def project(self, name: str | None) -> ProjectRef:
        """The project named `name` (or whose file is `name`); with None, the current directory's project
        (the devstack.yaml found walking up from it) when the workspace lists it, else the only project."""
        refs = self.projects()
        if name is None:
            here = current_project(refs)
            if here is not None:
                return here
            if len(refs) != 1:
                raise InvalidQuery("pick", "a project", f"workspace {self.config.name!r} has {len(refs)} projects: "
                                   f"{', '.join(r.name for r in refs) or 'none'}",
                                   "name one with --project, or run the command in its directory")
            return refs[0]
        for ref in refs:
            if name in (ref.name, ref.relative):
                return ref
        unreadable = [ref for ref in refs if ref.unreadable]
        if unreadable:  # its name may be in there
            raise InvalidQuery("pick", f"project {name!r}", cannot_read(unreadable),
                               "fix the file (`pulumi preview` shows every problem)")
        raise NotFound("pick", f"project {name!r}", f"workspace {self.config.name!r} has no such project",
                       f"projects: {', '.join(r.name for r in refs) or 'none'}")

    def check(self, relative: str, text: str, what: str, verb: str = "declare") -> None:
        """Validate the workspace as it would be with `relative` holding `text`, as preview does.

        The files are copied to a temporary directory with the one file
        replaced, and components.validation runs there: the messages are
        the very ones `pulumi preview` prints. Raises InvalidDeclaration.
        """
        with tempfile.TemporaryDirectory(prefix="devstack-check-") as tmp:
            scratch = _scratch_root(Path(tmp), self.config.projects)
            for other in self.config.projects:
                if (self.root / other).is_file():
                    (scratch / other).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(self.root / other, scratch / other)
            (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
            (scratch / relative).write_text(text, encoding="utf-8")
            display = stack_config_file(self.root, ledger.short_name(self.stack))
            keys = self.config_keys if self.config_keys is not None else set(ledger.stack_config(self.stack))
            try:
                validate(self.raw, scratch, load_yaml_if_usable(self.root / display, display), display,
                         config_is_set=lambda key: f"devstack:{key}" in keys)
            except WorkspaceInvalid as invalid:
                raise InvalidDeclaration(what, invalid, verb) from None

    def state_urns(self) -> set[str]:
        """URNs of everything in the stack's state (the ledger)."""
        return {resource["urn"] for resource in self._state_resources()}

    def state_purge(self, urn: str) -> bool | None:
        """The `purge` the state holds for `urn`, which its delete will use; None when it is not there."""
        held = next((resource for resource in self._state_resources() if resource["urn"] == urn), None)
        return None if held is None else (held.get("inputs") or {}).get("purge") is True

    def state_dependents(self, urn: str) -> list[str]:
        """URNs of the resources the state records as depending on `urn`."""
        return [resource["urn"] for resource in self._state_resources() if urn in (resource.get("dependencies") or [])]

    def _state_resources(self) -> list[dict[str, Any]]:
        try:
            deployment = self.stack.export_stack().deployment or {}
        except auto.errors.CommandError as err:
            raise _cli_error("read", f"the state of stack {self.stack.name!r}", err) from err
        return deployment.get("resources") or []


def current_project(refs: Sequence[ProjectRef], here: Path | None = None) -> ProjectRef | None:
    """The project among `refs` whose devstack.yaml is the first one found walking up from `here` (the
    current directory); None when there is none, or the workspace does not list the one found."""
    found = yamledit.nearest_devstack_yaml(here)
    if found is None:
        return None
    return next((ref for ref in refs if ref.path.resolve() == found), None)


def _scratch_root(tmp: Path, projects: list[str]) -> Path:
    """A root inside `tmp` deep enough that every project path (`../x` too) stays inside `tmp`."""
    depth = 0
    for relative in projects:
        parts = Path(os.path.normpath(relative)).parts
        if Path(relative).is_absolute():
            raise InvalidQuery("check", f"project {relative!r}", "an absolute project path cannot be checked "
                               "before the edit", "list projects relative to the work dir")
        depth = max(depth, len(parts) - len(tuple(dropwhile(lambda part: part == "..", parts))))
    root = tmp.joinpath(*(["up"] * depth), "root")
    root.mkdir(parents=True)
    return root


def _listing(shared: dict[str, SharedInstance], engines: Sequence[str]) -> str:
    names = [f"{n} ({i.engine})" for n, i in shared.items() if not engines or i.engine in engines]
    return f"shared instances: {', '.join(names) or 'none'}"


# --- one resource of one project --------------------------------------------


@dataclass(frozen=True)
class Target:
    """The resource a verb acts on: (instance, kind, name) in one project of a workspace."""

    workspace: Workspace
    project: ProjectRef
    instance: SharedInstance
    kind: str
    name: str
    explicit_name: bool = True

    @property
    def key(self) -> str:
        """`<instance>/<kind>/<name>`: the output key and the ledger's short form."""
        return f"{self.instance.name}/{self.kind}/{self.name}"

    @property
    def what(self) -> str:
        return f"{self.instance.engine} {self.kind} {self.key} of project {self.project.name}"

    def urns(self) -> list[str]:
        """The resource's URN, then its Stack/Workspace/Project ancestors (outermost last)."""
        stack, name = self.workspace.stack, ledger.short_name(self.workspace.stack)
        prefix = f"urn:pulumi:{name}::{stack.workspace.project_settings().name}::"
        workspace, project = "devstack:index:Workspace", "devstack:index:Project"
        resource_type = f"{workspace}${project}$pulumi-python:dynamic/{self.instance.engine}:{self.kind}"
        return [
            f"{prefix}{resource_type}::{self.project.name}/{self.key}",
            f"{prefix}{workspace}${project}::{self.project.name}",
            f"{prefix}{workspace}::{self.workspace.config.name}",
            f"{prefix}pulumi:pulumi:Stack::{stack.workspace.project_settings().name}-{name}",
        ]

    def targets(self) -> tuple[list[str], bool]:
        """The URNs a targeted operation names, and whether it includes their dependents.

        Pulumi refuses to create a resource whose parent is neither in the
        state nor targeted, so a project's first resource brings its Project
        (and a new stack's Workspace and Stack) along. Dependents are then
        left out: they would include every child of the new Project, i.e.
        the project's other declarations, and a resource not created yet
        has no dependents in the state anyway.
        """
        resource, *ancestors = self.urns()
        present = self.workspace.state_urns()
        implied = self._implied_urns(resource)
        missing = [urn for urn in [*implied, *ancestors] if urn not in present]
        # What the program adds beside it follows it: made with the first, purged with the last.
        implied = [urn for urn in implied if urn in present]
        return [resource] + implied + missing, not missing

    def _implied_urns(self, resource: str) -> list[str]:
        """The URNs of what the program adds beside the resource and it is made after (a NATS stream's
        account): targeted with it, so a project's first such resource brings it and the removal of its
        last one (with its purge) takes it along."""
        kinds = registry.kinds(self.instance.engine)
        prefix, _ = resource.split(f"dynamic/{self.instance.engine}:{self.kind}::")
        return [f"{prefix}dynamic/{self.instance.engine}:{kind}::{self.project.name}/{self.instance.name}/{kind}/"
                f"{self.project.name}" for kind in kinds[self.kind].after_kinds if kinds[kind].implied]

def resolve(ws: Workspace, engines: Sequence[str], kind: str, name: str | None,
            project: str | None = None, instance: str | None = None) -> Target:
    """Pick the project and the instance and name the resource (the project's name by default)."""
    ref = ws.project(project)
    shared = ws.instance_for(engines, instance)
    return Target(ws, ref, shared, kind, name or ref.name, explicit_name=name is not None)


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """`k=v` pairs: keys as written (camelCase aliases), values as YAML (`20` is an int, `true` a bool)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidQuery("parse", f"--param {pair!r}", "expected KEY=VALUE", "e.g. --param connectionLimit=20")
        try:
            params[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as err:
            raise InvalidQuery("parse", f"--param {pair!r}", f"the value is not YAML: {err}") from None
    return params


# --- files -----------------------------------------------------------------


def read_text(path: Path) -> str:
    """The file as it is, line ends included (CRLF stays CRLF: write_text puts back what it gets)."""
    try:
        refuse_special_file(path)
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except OSError as err:
        raise NotFound("read", str(path), err.strerror or str(err), "fix devstack:workspace.projects") from err
    except UnicodeDecodeError as err:
        raise InvalidQuery("read", str(path), f"not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})",
                           "save the file as UTF-8") from err


def write_text(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its mode, so a reader never sees half an edit."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _entry_index(text: str, target: Target) -> int | None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:  # a file picked by its path (`--project p/devstack.yaml`) is not read before
        raise InvalidQuery("edit", target.what, f"{target.project.relative} cannot be read: {unreadable_reason(err)}",
                           "nothing was changed; fix the file (`pulumi preview` shows every problem)") from err
    found = yamledit.matching_entries(data, target.instance.name, target.kind, target.name)
    if len(found) > 1:
        raise InvalidQuery("edit", target.what, f"{len(found)} entries declare it in {target.project.relative}",
                           "keep one (`pulumi preview` reports the collision)")
    return found[0] if found else None


def remove_declaration(project_file: Path, instance: str, kind: str, name: str,
                       check: Callable[[str], None] | None = None) -> bool:
    """Remove the `resources:` entry (instance, kind, name) from `project_file`; False when absent.

    Comment-preserving and byte-identical outside the entry's own lines.
    `check(new_text)` runs before anything is written and may raise to keep
    the file as it is. Only the declaration goes: the resource itself is
    retained until an update runs (and kept even then unless purge was set).
    """
    new = without_declaration(project_file, instance, kind, name)
    if new is None:
        return False
    if check is not None:
        check(new)
    write_text(project_file, new)
    return True


def without_declaration(project_file: Path, instance: str, kind: str, name: str) -> str | None:
    """The text of `project_file` without the entry (instance, kind, name); None when it has none."""
    text = read_text(project_file)
    found = yamledit.matching_entries(yaml.safe_load(text), instance, kind, name)
    return yamledit.remove_entry(text, found[0]) if found else None


# --- targeted preview and update ---------------------------------------------


def _changes(result: Any) -> dict[str, int]:
    counts = result.change_summary if hasattr(result, "change_summary") else result.summary.resource_changes
    return {str(getattr(op, "value", op)): n for op, n in (counts or {}).items() if str(getattr(op, "value", op)) != "same"}


def _is_provider_error(name: str) -> bool:
    raised = getattr(provider_errors, name, None)
    return isinstance(raised, type) and issubclass(raised, provider_errors.DevstackError)


def _cli_error(verb: str, what: str, err: auto.errors.CommandError) -> EngineError:
    """The first diagnostic of a failed CLI run, not the whole command dump.

    A provider's own error arrives as one line, `Conflict: cannot create ...`
    (see tools.provider_server); any other exception as a Python traceback,
    whose last line is the message. A Conflict becomes IdentityConflict
    (exit 5), anything else EngineError.
    """
    text = str(err)
    lines = text.split("Diagnostics:", 1)[-1].splitlines()
    for i, line in enumerate(lines):
        message = line.strip().removeprefix("error: ")
        if not line.strip().startswith("error:") or message.endswith(("preview failed", "update failed")):
            continue
        if not message.startswith("Traceback"):
            raised = EXCEPTION_LINE.match(message)
            if not (raised and _is_provider_error(raised.group(1))):
                return EngineError(verb, what, message)
            kind, cause = raised.groups()
            return (IdentityConflict if kind == "Conflict" else EngineError)(verb, what, cause)
        # The traceback ends where the next resource's diagnostics start (indented less).
        block = [b.strip() for b in takewhile(lambda b: not b.strip() or b.startswith("    "), lines[i + 1:])]
        raised = [m for m in map(EXCEPTION_LINE.match, block) if m]
        if raised:
            kind, cause = raised[-1].groups()
            return (IdentityConflict if kind.endswith("Conflict") else EngineError)(verb, what, cause)
    # No diagnostics: the CLI stopped before any resource (a held lock, a bad backend), on stderr.
    return EngineError(verb, what, "\n".join(line.removeprefix("error: ") for line in ledger.cli_error(err).splitlines()))


Plan = tuple[list[str], bool]  # the URNs to target, and whether their dependents come along


def preview(target: Target, out: Out, plan: Plan | None = None) -> dict[str, int]:
    """Preview the update of exactly `target` (plus ancestors it needs); the counts of changes."""
    urns, dependents = plan or target.targets()
    ws = target.workspace
    try:
        return _changes(ledger.waiting_for_lock(ws.stack, "preview", target.what, ws.lock_wait, lambda: (
            ws.stack.preview(target=urns, target_dependents=dependents, on_output=out))))
    except auto.errors.CommandError as err:
        raise _cli_error("preview", target.what, err) from err


def update(target: Target, plan: Plan | None = None) -> auto.UpResult:
    """Run the update for `target` alone (and what depends on it)."""
    urns, dependents = plan or target.targets()
    ws = target.workspace
    try:
        # Each try cancels gracefully on Ctrl-C; a Ctrl-C while waiting between tries stops at once.
        return ledger.waiting_for_lock(ws.stack, "update", target.what, ws.lock_wait, lambda: ledger.gracefully(
            lambda: ws.stack.up(target=urns, target_dependents=dependents)))
    except auto.errors.CommandError as err:
        raise _cli_error("update", target.what, err) from err


def attributes(target: Target, outputs: dict[str, Any]) -> dict[str, Any]:
    """The resource's attributes in stack `outputs`, every secret one shown as `[secret]`."""
    project = outputs.get(target.project.name)
    values = ((project.value if project else None) or {}).get("resources", {}).get(target.key) or {}
    kind = templates.engine_template(target.instance.engine).kinds.get(target.kind)
    return {name: "[secret]" if kind is None or kind.is_secret(name) else value for name, value in values.items()}


# --- the verbs ---------------------------------------------------------------


@dataclass
class Outcome:
    """What a verb did: whether the file changed and the update's counts of changes."""

    file_changed: bool = False
    changes: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)  # the stack's, after the update


def declaration(target: Target, params: dict[str, Any], credentials: str | None) -> dict[str, Any]:
    """The `resources:` entry for `target`, in the order the docs write them."""
    entry: dict[str, Any] = {"uses": shared_ref(target.instance.name), "kind": target.kind}
    if target.explicit_name:
        entry["name"] = target.name
    if params:
        entry["params"] = params
    if credentials:
        entry["credentials"] = credentials
    return entry


def create(target: Target, params: dict[str, Any], credentials: str | None, confirm: Confirm, out: Out) -> Outcome:
    """Declare `target` (unless an equal entry exists), preview, confirm, update it alone.

    Idempotent: a second identical call leaves the file byte-identical and
    runs no update. An existing entry with other params or credentials is
    an error (edit the file to change it). Invalid input raises before the
    file is touched; a decline or a failed preview or update restores it.
    """
    path, relative = target.project.path, target.project.relative
    original = read_text(path)
    index = _entry_index(original, target)
    if index is not None:
        _require_same(yaml.safe_load(original)["resources"][index], target, params, credentials)
        new = original
    else:
        new = yamledit.add_entry(original, declaration(target, params, credentials))
        target.workspace.check(relative, new, target.what)
        write_text(path, new)
    return _apply(target, original, new, confirm, out, f"create {target.what}")


def _require_same(entry: dict[str, Any], target: Target, params: dict[str, Any], credentials: str | None) -> None:
    """An existing entry must agree with what was asked explicitly (options not given are not compared)."""
    have = (entry.get("params") or {}, entry.get("credentials") or "predictable")
    want = (params or have[0], credentials or have[1])
    if have != want:
        raise InvalidQuery("create", target.what, f"{target.project.relative} already declares it with "
                           f"params {have[0]} and credentials {have[1]}", "edit the entry, or rm it first")


def _apply(target: Target, original: str, new: str, confirm: Confirm | None, out: Out, question: str,
           note: str = "", removing: bool = False, restored: str = "is as it was") -> Outcome:
    """Preview the targeted change; on confirmation update it alone.

    Whatever stops it (a failed preview, a 'no', a failed update) puts
    `original` back, so file and state keep agreeing: a failed create or
    delete changed nothing in the engine (provider verbs are transactional).
    `confirm=None` means the change was confirmed already (the second step
    of a purge): no preview, the update runs at once.

    `removing`: the change takes the declaration out. What the state records
    as depending on it (an acl made after the project's topics, a key after
    its buckets) is targeted too: Pulumi skips, without a word, the delete
    of a resource whose dependents are left out, and the file would then no
    longer declare what the ledger still tracks.
    """
    outcome = Outcome(file_changed=new != original)
    try:
        urns, dependents = target.targets()
        if removing:
            urns += [urn for urn in target.workspace.state_dependents(urns[0]) if urn not in urns]
        plan = urns, dependents
        try:
            if confirm is not None:
                planned = preview(target, out, plan)
                if removing:
                    _require_deleted(target, planned, "preview")
                if not planned:
                    return outcome
                if note:
                    out(note)
                if not confirm(f"{question}?"):
                    raise Aborted("update", target.what, "not confirmed", "nothing was changed; --yes skips the question")
        except KeyboardInterrupt:
            # Stopped before the update: nothing was applied, so the file must not say otherwise.
            # (Stopped during it, the state may hold the change: the file then keeps it.)
            if outcome.file_changed:
                write_text(target.project.path, original)
            raise
        result = update(target, plan)
        if removing:
            _require_deleted(target, _changes(result), "update")
    except (EngineError, IdentityConflict, Aborted) as err:
        if not outcome.file_changed:
            raise
        write_text(target.project.path, original)
        hint = "; ".join(filter(None, [err.hint, f"{target.project.relative} {restored}"]))
        raise type(err)(err.verb, err.what, err.cause, hint) from err
    outcome.changes, outcome.outputs = _changes(result), result.outputs
    return outcome


def _require_deleted(target: Target, changes: dict[str, int], verb: str) -> None:
    """A removal whose run left the resource tracked (its delete skipped) is an error, not a success."""
    if not any(op.startswith("delete") for op in changes) and target.urns()[0] in target.workspace.state_urns():
        raise EngineError(verb, f"the removal of {target.what}", "Pulumi planned no delete of it, so the ledger "
                          "would keep tracking what the file no longer declares",
                          "run `pulumi preview` with the entry removed to see what holds it")


def remove(target: Target, purge_data: bool, confirm: Confirm, out: Out) -> Outcome:
    """Remove the declaration and update `target` alone: retained, or dropped with `purge_data`.

    Pulumi deletes with the `purge` the state holds, so that is set first
    when it differs from what was asked, as by hand: `purge: true` on the
    entry and an update, then the removal, so the provider drops the data;
    or, for an entry declared `purge: true` removed without `--purge-data`,
    `purge: false` first, so the data stays. Absent from the file and from
    the state: nothing to do.
    """
    path = target.project.path
    original = read_text(path)
    index = _entry_index(original, target)
    held = target.workspace.state_purge(target.urns()[0])
    if index is None:
        if held is None:
            return Outcome()
        if held != purge_data:  # no entry left to set purge on
            raise InvalidQuery("remove", target.what, f"{target.project.relative} no longer declares it and the ledger "
                               f"holds it with purge: {str(held).lower()}, so its removal would "
                               f"{'drop' if held else 'keep'} the data", "declare it again with the purge you want, "
                               "`pulumi up`, then remove it; or un-track it, data kept, with `devstack resource rm`")
        return _apply(target, original, original, confirm, out, f"untrack {target.what}",
                      "" if purge_data else _RETAINED, removing=True)
    first = Outcome()
    declared = yaml.safe_load(original)["resources"][index].get("purge") is True
    if (declared if held is None else held) != purge_data:
        marked = yamledit.set_entry_field(original, index, "purge", purge_data)
        target.workspace.check(target.project.relative, marked, target.what)
        write_text(path, marked)
        first = _apply(target, original, marked, confirm, out,
                       f"drop {target.what} and its data" if purge_data else f"keep the data of {target.what}",
                       "then the entry is removed and the resource dropped with its data" if purge_data
                       else "then the entry is removed; the resource and its data stay (it was declared purge: true)")
        original, confirm = marked, None  # the question above covered both steps
    removed = {}

    def check(text: str) -> None:
        target.workspace.check(target.project.relative, text, target.what, "remove")
        removed["text"] = text

    remove_declaration(path, target.instance.name, target.kind, target.name, check)
    note = "" if purge_data else _RETAINED
    # After a first step, the file goes back to what that step made: the ledger holds its purge now.
    restored = (f"keeps `purge: {str(purge_data).lower()}`, as the ledger now does (run the command again)"
                if first.file_changed else "is as it was")
    second = _apply(target, original, removed["text"], confirm, out, f"remove {target.what}", note, removing=True,
                    restored=restored)
    merged = {k: first.changes.get(k, 0) + second.changes.get(k, 0) for k in {**first.changes, **second.changes}}
    return Outcome(True, merged, second.outputs)


_RETAINED = "(retained: the resource and its data stay in the engine; --purge-data drops them)"


def _yes(_question: str) -> bool:
    return True


# --- columns for `resource list` ----------------------------------------------


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


# --- command line ------------------------------------------------------------


class VerbReport(ledger._Model):
    """What `resource create`, an alias's add or its removal did (--json)."""

    workspace: str
    action: str = Field(description="create or remove")
    id: str = Field(description="canonical identity: engine/instance/kind/name@owner")
    project: str
    engine: str
    instance: str
    kind: str
    name: str
    file: str = Field(description="the project's devstack.yaml, relative to the work dir")
    file_changed: bool
    changes: dict[str, int] = Field(description="the targeted update's counts of changes, by operation")
    data_dropped: bool = Field(description="a removal with --purge-data dropped the data")
    attributes: dict[str, Any] = Field(description="a create's attributes; secret ones read \"[secret]\"")


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


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `resource create` and the per-domain aliases (and `db gc`, resource gc of postgres)."""
    create_parser = resource_group(subparsers).add_parser(
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
        with ledger.verb_lock(ws.stack, "create", args.name or "the project's own resource", ws.lock_wait):
            target = _target(args, ws)
            # A create drops nothing: no question (the preview still shows what the update does).
            outcome = create(target, params, args.credentials, _yes, _progress(args))
        _report(args, target, outcome, "created")
        return 0

    return _guarded(args, action)


def _run_remove(args: argparse.Namespace) -> int:
    def action() -> int:
        ws = _open(args)
        with ledger.verb_lock(ws.stack, "remove", args.name or "the project's own resource", ws.lock_wait):
            target = _target(args, ws)
            # Retained (no --purge-data), the data stays: only a drop asks first.
            confirm = _confirm(args) if args.purge_data else _yes
            outcome = remove(target, args.purge_data, confirm, _progress(args))
        _report(args, target, outcome, "dropped" if args.purge_data else "removed (retained)")
        return 0

    return _guarded(args, action)


def _report(args: argparse.Namespace, target: Target, outcome: Outcome, done: str) -> None:
    created = done == "created"
    shown = attributes(target, outcome.outputs or _stack_outputs(target)) if created else {}
    if args.json:
        ident = Identity(target.instance.engine, target.instance.name, target.kind, target.name, target.project.name)
        print(json.dumps(VerbReport(
            workspace=target.workspace.stack.name, action="create" if created else "remove", id=str(ident),
            project=target.project.name, engine=target.instance.engine, instance=target.instance.name,
            kind=target.kind, name=target.name, file=target.project.relative, file_changed=outcome.file_changed,
            changes=outcome.changes, data_dropped=done == "dropped" and bool(outcome.changes.get("delete")),
            attributes=shown).as_json(), indent=2, sort_keys=True))
        return
    if not outcome.changes and not outcome.file_changed:
        print(f"{target.what}: nothing to change")
    else:
        summary = ", ".join(f"{n} {op}" for op, n in sorted(outcome.changes.items())) or "no update"
        print(f"{target.what}: {done} ({summary}; {target.project.relative}"
              f"{' updated' if outcome.file_changed else ' unchanged'})")
    for name, value in shown.items():
        print(f"  {name}: {value}")


def _stack_outputs(target: Target) -> dict[str, Any]:
    """The stack's outputs, for the attributes of a create that changed nothing (no update ran)."""
    try:
        return target.workspace.stack.outputs()
    except auto.errors.CommandError as err:
        raise _cli_error("read the outputs of", target.what, err) from err


def _confirm(args: argparse.Namespace) -> Confirm:
    if args.yes:
        return _yes

    def ask(question: str) -> bool:
        reply = cli.ask(f"{question} [y/N] ")
        if reply is None:
            print(f"{question} not confirmed: no terminal to ask on (pass --yes)", file=sys.stderr)
        return reply in ("y", "yes")

    return ask


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
