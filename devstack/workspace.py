"""The workspace behind a stack: its `devstack:workspace` config, its projects and their devstack.yaml files.

`Workspace.check` validates the workspace as an edit would leave it, exactly as
`pulumi preview` would; the file helpers read and replace a project file whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import dropwhile
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto
from pydantic import ValidationError

from components.models import WorkspaceConfig
from components.validation import WorkspaceInvalid, validate
from components.yamlfile import load_yaml_if_usable, refuse_special_file, stack_config_file, unreadable_reason
from devstack import state, yamledit
from devstack.errors import InvalidQuery, NotFound
from devstack.locks import LockWait
from devstack.stack import command_error, short_name
from providers.instances import SharedInstance, parse_object


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
    lock_wait: LockWait = field(default_factory=LockWait)

    @classmethod
    def of(cls, stack: auto.Stack) -> Workspace:
        """Read the workspace config of `stack`; InvalidQuery when it is missing or malformed."""
        values = state.stack_config(stack)
        if "devstack:workspace" not in values:
            display = stack_config_file(Path(stack.workspace.work_dir), short_name(stack))
            raise NotFound("read", f"the workspace of stack {stack.name!r}", "no devstack:workspace in its config",
                           f"set it in {display}")
        try:
            raw = parse_object(values["devstack:workspace"])
            config = WorkspaceConfig.model_validate(raw)
        except (ValidationError, ValueError) as err:
            found = state.workspace_problems(stack, values) or [str(err).splitlines()[0]]
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
            display = stack_config_file(self.root, short_name(self.stack))
            keys = self.config_keys if self.config_keys is not None else set(state.stack_config(self.stack))
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
            raise command_error("read", f"the state of stack {self.stack.name!r}", err) from err
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


# --- project files -------------------------------------------------------------


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
