"""`devstack resource create` and the aliases' add and rm, as verbs on one resource of one project.

A verb never talks to an engine itself. It edits one project's devstack.yaml
(comments and order kept, see devstack.yamledit), validates the would-be
workspace exactly as `pulumi preview` would, previews the change targeted at
that one resource, and on confirmation runs the same program `pulumi up`
runs, targeted at it. So `devstack db create orders` and adding

    - uses: pg
      kind: database
      name: orders

by hand followed by `pulumi up` are the same operation with the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pulumi import automation as auto

from components import templates
from components.models import ResourceDecl, shared_ref
from components.secret_store import entry_urns
from components.yamlfile import unreadable_reason
from devstack import yamledit
from devstack.errors import Aborted, Confirm, EngineError, IdentityConflict, InvalidQuery
from devstack.locks import waiting_for_lock
from devstack.stack import command_error, gracefully, short_name
from devstack.workspace import ProjectRef, Workspace, read_text, remove_declaration, write_text
from providers import registry
from providers.instances import SharedInstance

#: Where a verb's progress goes (pulumi's preview, a note).
Out = Callable[[str], None]


#: Per-domain aliases: command -> (engines it may use, kind, add verb, remove verb).
ALIASES: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "db": (("postgres",), "database", "create", "rm"),
    "s3": (("minio", "localstack"), "bucket", "mb", "rb"),
    "queue": (("localstack",), "queue", "add", "rm"),
    "topic": (("kafka",), "topic", "add", "rm"),
    "stream": (("nats",), "stream", "add", "rm"),
}


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
        stack, name = self.workspace.stack, short_name(self.workspace.stack)
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
        return [resource] + implied + missing + self._stored_urns(resource), not missing

    def _stored_urns(self, resource: str) -> list[str]:
        """The declaration's secret-store entries (components.secret_store): made in the same update."""
        text = read_text(self.project.path)
        index = _entry_index(text, self)
        entry = yaml.safe_load(text)["resources"][index] if index is not None else None
        return entry_urns(self.workspace.config, resource, self.project.name, ResourceDecl.model_validate(entry)) if entry else []

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


# --- the project file's entry ---------------------------------------------------


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


# --- targeted preview and update ---------------------------------------------


def change_counts(result: Any) -> dict[str, int]:
    """The counts of a preview's or an update's changes by operation (`create`, `update`, `delete` ...),
    without `same`."""
    counts = result.change_summary if hasattr(result, "change_summary") else result.summary.resource_changes
    return {str(getattr(op, "value", op)): n for op, n in (counts or {}).items() if str(getattr(op, "value", op)) != "same"}


Plan = tuple[list[str], bool]  # the URNs to target, and whether their dependents come along


def preview(target: Target, out: Out, plan: Plan | None = None) -> dict[str, int]:
    """Preview the update of exactly `target` (plus ancestors it needs); the counts of changes."""
    urns, dependents = plan or target.targets()
    ws = target.workspace
    try:
        return change_counts(waiting_for_lock(ws.stack, "preview", target.what, ws.lock_wait, lambda: (
            ws.stack.preview(target=urns, target_dependents=dependents, on_output=out))))
    except auto.errors.CommandError as err:
        raise command_error("preview", target.what, err) from err


def update(target: Target, plan: Plan | None = None) -> auto.UpResult:
    """Run the update for `target` alone (and what depends on it)."""
    urns, dependents = plan or target.targets()
    ws = target.workspace
    try:
        # Each try cancels gracefully on Ctrl-C; a Ctrl-C while waiting between tries stops at once.
        return waiting_for_lock(ws.stack, "update", target.what, ws.lock_wait, lambda: gracefully(
            lambda: ws.stack.up(target=urns, target_dependents=dependents)))
    except auto.errors.CommandError as err:
        raise command_error("update", target.what, err) from err


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
            _require_deleted(target, change_counts(result), "update")
    except (EngineError, IdentityConflict, Aborted) as err:
        if not outcome.file_changed:
            raise
        write_text(target.project.path, original)
        hint = "; ".join(filter(None, [err.hint, f"{target.project.relative} {restored}"]))
        raise type(err)(err.verb, err.what, err.cause, hint) from err
    outcome.changes, outcome.outputs = change_counts(result), result.outputs
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
