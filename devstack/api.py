"""devstack's Python API: open a workspace (a stack of the devstack program) and run its verbs.

    from devstack.api import open_workspace

    ws = open_workspace()                       # the checkout's `local` workspace, as `devstack` opens it
    ws.up(on_event=print)                       # progress: small Event models from Pulumi's engine events
    page = ws.resources(engine="postgres")      # the ledger, a page at a time (devstack.listing)
    env = ws.env("shop", "api")                 # env["DATABASE_URL"] is the value; its repr masks it

Functions take and return pydantic models and raise the typed errors of devstack.errors
(InvalidQuery, NotFound, Ambiguous, IdentityConflict, ScopeMismatch, Aborted, EngineError), each
with the exit code `devstack` gives it. No model's repr or JSON holds a secret: secret values are
SecretStr. Every verb is the one the `devstack` command runs (docs/python-api.md).
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pulumi import automation as auto
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from devstack import doctor as doctor_verb
from devstack.declare import Out, Outcome, Target, attributes, change_counts, create as declare_create
from devstack.declare import remove as declare_remove
from devstack.declare import resolve
from devstack.environment import last_up_failed, service_env
from devstack.errors import Confirm, InvalidQuery
from devstack.gc import GcReport, collect_garbage
from devstack.listing import list_resources, resource_history, show_resource
from devstack.locks import LockWait, verb_lock, waiting_for_lock
from devstack.models import Destruction, Model, Recovery, ResourceDetail, ResourceHistory, ResourcePage, ServiceEnv
from devstack.recovery import recover
from devstack.removal import destroy_stack
from devstack.stack import command_error, gracefully, hide_passwords, open_stack
from devstack.state import REDACTED, tracked_resources
from devstack.workspace import Workspace as Declared
from providers import registry
from providers.identity import Identity
from providers.lifecycle import LAST_SEEN, is_stale
from tools.pulumi_env import ROOT

log = logging.getLogger("devstack")


# --- progress ---------------------------------------------------------------------------------------


class Event(Model):
    """One step of a preview, up or refresh, from Pulumi's engine event (pulumi.automation.EngineEvent)."""

    sequence: int
    kind: Literal["prelude", "start", "done", "failed", "diagnostic", "output", "summary", "end"]
    op: str | None = Field(default=None, description="create, update, same, delete, replace, refresh ...")
    urn: str | None = None
    type: str | None = Field(default=None, description="the resource type")
    severity: str | None = Field(default=None, description="a diagnostic's: info, warning, error")
    message: str | None = Field(default=None, description="a diagnostic's or the program's output, passwords hidden")
    changes: dict[str, int] = Field(default_factory=dict, description="a summary's counts by operation")

    @classmethod
    def of(cls, event: auto.EngineEvent) -> Event | None:
        """Our view of `event`; None for the kinds a caller has no use for (policy, debugging)."""
        base: dict[str, Any] = {"sequence": event.sequence}
        for kind, step in (("start", event.resource_pre_event), ("done", event.res_outputs_event),
                           ("failed", event.res_op_failed_event)):
            if step is not None:
                meta = step.metadata
                return cls(**base, kind=kind, op=_op(meta.op), urn=meta.urn, type=meta.type)
        if event.diagnostic_event is not None:
            found = event.diagnostic_event
            return cls(**base, kind="diagnostic", urn=found.urn, severity=found.severity,
                       message=hide_passwords(found.message.rstrip()))
        if event.stdout_event is not None:
            return cls(**base, kind="output", message=hide_passwords(event.stdout_event.message.rstrip()))
        if event.summary_event is not None:
            counts = event.summary_event.resource_changes or {}
            return cls(**base, kind="summary", changes={_op(op): n for op, n in counts.items() if _op(op) != "same"})
        if event.prelude_event is not None:
            return cls(**base, kind="prelude")
        if event.cancel_event is not None:  # Pulumi's last event of every run, cancelled or not
            return cls(**base, kind="end")
        return None

    @property
    def name(self) -> str | None:
        """The resource's Pulumi name (`<project>/<instance>/<kind>/<name>` for a tenant resource)."""
        return self.urn.rsplit("::", 1)[-1] if self.urn else None

    def __str__(self) -> str:
        if self.kind in ("start", "done", "failed"):
            return f"{self.kind:<6} {self.op} {self.name} ({self.type})"
        if self.kind == "summary":
            return "summary " + (", ".join(f"{n} {op}" for op, n in sorted(self.changes.items())) or "no changes")
        return f"{self.kind} {self.severity or ''} {self.message or ''}".replace("  ", " ").strip()


def _op(op: Any) -> str:
    return str(getattr(op, "value", op))


OnEvent = Callable[[Event], None]


def _relay(on_event: OnEvent | None) -> Callable[[auto.EngineEvent], None] | None:
    if on_event is None:
        return None

    def relay(event: auto.EngineEvent) -> None:
        ours = Event.of(event)
        if ours is not None:
            on_event(ours)

    return relay


class Run(Model):
    """What a preview, an up or a refresh of the whole workspace did."""

    workspace: str
    operation: Literal["preview", "update", "refresh"]
    changes: dict[str, int] = Field(description="counts by operation (create, update, delete ...), `same` left out")
    seconds: float


# --- the environment of a service ---------------------------------------------------------------------


class Environment(Model):
    """A service's environment: plain values, and secrets as SecretStr (masked in repr and JSON).

    `env["VAR"]` and `env.environ()` give the real values, for a client or a subprocess."""

    workspace: str
    project: str
    service: str
    plain: dict[str, str]
    secrets: dict[str, SecretStr]
    secrets_shown: bool = Field(description="secrets were read; false: each is \"[secret]\"")

    @classmethod
    def of(cls, found: ServiceEnv) -> Environment:
        return cls(workspace=found.workspace, project=found.project, service=found.service,
                   plain={k: v for k, v in found.env.items() if k not in found.secret_vars},
                   secrets={k: SecretStr(found.env[k]) for k in found.secret_vars}, secrets_shown=found.secrets_shown)

    def __getitem__(self, var: str) -> str:
        if var in self.secrets:
            return self.secrets[var].get_secret_value()
        return self.plain[var]

    def __contains__(self, var: object) -> bool:
        return var in self.plain or var in self.secrets

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # the variables, as a mapping's keys
        return iter(sorted({*self.plain, *self.secrets}))

    def get(self, var: str, default: str | None = None) -> str | None:
        return self[var] if var in self else default

    def environ(self) -> dict[str, str]:
        """Every variable with its real value: for os.environ or subprocess.run(env=...)."""
        return {var: self[var] for var in self}

    def service_env(self) -> ServiceEnv:
        """As `devstack env --json` prints it: the secrets' values only when they were read."""
        return ServiceEnv(workspace=self.workspace, project=self.project, service=self.service,
                          env={var: self[var] if self.secrets_shown or var in self.plain else REDACTED for var in self},
                          secret_vars=sorted(self.secrets), secrets_shown=self.secrets_shown)


# --- one resource, declared or removed ------------------------------------------------------------------


class Declaration(BaseModel):
    """What `create` and `remove` act on: one resource of one project, as `devstack resource create` takes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str
    kind: str
    name: str | None = Field(default=None, description="the engine identifier (default: the project's name)")
    project: str | None = Field(default=None, description="default: the current directory's, else the only one")
    instance: str | None = Field(default=None, description="the shared instance (default: the engine's only one)")
    params: dict[str, Any] = Field(default_factory=dict, description="the kind's params, camelCase as in the file")
    credentials: Literal["predictable", "generated"] | None = None


class Change(Model):
    """What `resource create`, an alias's add or its removal did (resource-create.schema.json)."""

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

    @classmethod
    def of(cls, target: Target, outcome: Outcome, action: str, purged: bool = False) -> Change:
        """The report of a verb on `target`; a create's attributes read from the stack when no update ran."""
        shown = attributes(target, outcome.outputs or _stack_outputs(target)) if action == "create" else {}
        ident = Identity(target.instance.engine, target.instance.name, target.kind, target.name, target.project.name)
        return cls(workspace=target.workspace.stack.name, action=action, id=str(ident), project=target.project.name,
                   engine=target.instance.engine, instance=target.instance.name, kind=target.kind, name=target.name,
                   file=target.project.relative, file_changed=outcome.file_changed, changes=outcome.changes,
                   data_dropped=purged and bool(outcome.changes.get("delete")), attributes=shown)


def _stack_outputs(target: Target) -> dict[str, Any]:
    """The stack's outputs, for the attributes of a create that changed nothing (no update ran)."""
    try:
        return target.workspace.stack.outputs()
    except auto.errors.CommandError as err:
        raise command_error("read the outputs of", target.what, err) from err


def _declaration(declaration: Declaration | None, fields: Mapping[str, Any]) -> Declaration:
    if declaration is not None:
        return declaration
    try:
        return Declaration(**fields)
    except ValidationError as err:
        problem = err.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the declaration"
        raise InvalidQuery("declare", where, problem["msg"], "see devstack.api.Declaration") from None


# --- the doctor -------------------------------------------------------------------------------------------


class InstanceCheck(Model):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    name: str
    engine: str
    address: str
    ok: bool
    reachable: bool
    version: str | None
    admin: bool | None = Field(description="the admin credential works; null: not checked")
    kinds: list[str]
    declared_kinds: list[str] = Field(alias="declaredKinds")
    degraded_verbs: list[str] = Field(alias="degradedVerbs")
    problem: str
    fix: str
    notes: list[str]


class Health(Model):
    """`devstack doctor`: the toolchain, each shared instance, and the declarations' problems."""

    workspace: str
    ok: bool
    toolchain: list[doctor_verb.Part]
    instances: list[InstanceCheck]
    problems: list[str] = Field(description="of the declarations, as `pulumi preview` prints them")

    @classmethod
    def of(cls, report: doctor_verb.Report) -> Health:
        data = report.to_json()
        return cls(workspace=data["workspace"], ok=data["ok"], toolchain=report.toolchain,
                   instances=data["instances"], problems=data["declarations"]["problems"])


def doctor(stack: str = "local", backend_url: str | None = None, work_dir: Path | None = None, *,
           env: Mapping[str, str] | None = None) -> Health:
    """What works on this machine for the workspace `stack`, as `devstack doctor` reports it (never raises for a
    broken engine or toolchain: `ok` is false and each problem has its fix)."""
    return Health.of(doctor_verb.examine(stack, backend_url, Path(work_dir or ROOT), env=env))


# --- the workspace ------------------------------------------------------------------------------------------


def open_workspace(stack: str = "local", backend_url: str | None = None, work_dir: Path | str | None = None, *,
                   env: Mapping[str, str] | None = None, create: bool = False,
                   lock_wait: LockWait | None = None) -> Workspace:
    """The workspace `stack` of the devstack program, opened as `devstack -w STACK` opens it.

    `backend_url`: default $PULUMI_BACKEND_URL, else the checkout's file backend. `work_dir`: the program and
    the stack config (default: the checkout). `env` replaces the checkout's pulumi environment whole (a
    backend, passphrase and PULUMI_HOME of one's own: tools.pulumi_env.scratch_env). `create` makes a
    missing stack instead of raising NotFound. `lock_wait`: how long a verb waits for another run's lock
    (default $DEVSTACK_LOCK_WAIT, else 300 s, telling stderr whose lock it waits on).
    """
    opened = open_stack(stack, backend_url, Path(work_dir or ROOT), env=env, create=create)
    return Workspace(opened, lock_wait)


class Workspace:
    """An open workspace: every verb of the `devstack` command, as methods. Obtain one with open_workspace."""

    def __init__(self, stack: auto.Stack, lock_wait: LockWait | None = None) -> None:
        self.stack = stack
        self.lock_wait = lock_wait or LockWait.default()

    @property
    def name(self) -> str:
        return self.stack.name

    @property
    def work_dir(self) -> Path:
        return Path(self.stack.workspace.work_dir)

    @property
    def env_vars(self) -> dict[str, str]:
        """The pulumi environment this workspace runs in (backend URL without its password)."""
        return dict(self.stack.workspace.env_vars)

    def __repr__(self) -> str:
        backend = hide_passwords(self.stack.workspace.env_vars.get("PULUMI_BACKEND_URL", ""))
        return f"Workspace({self.name!r}, backend={backend!r}, work_dir={str(self.work_dir)!r})"

    # --- the whole workspace: Pulumi's own verbs

    def preview(self, *, on_event: OnEvent | None = None, on_output: Out | None = None) -> Run:
        """`pulumi preview`: what an up would change; nothing is changed."""
        return self._run("preview", lambda: self.stack.preview(on_event=_relay(on_event), on_output=on_output))

    def up(self, *, on_event: OnEvent | None = None, on_output: Out | None = None, refresh: bool = False) -> Run:
        """`pulumi up` of every project the workspace lists (`refresh`: read the engines first, as scripts/up)."""
        return self._run("update", lambda: gracefully(lambda: self.stack.up(
            on_event=_relay(on_event), on_output=on_output, refresh=refresh, run_program=refresh or None)))

    def refresh(self, *, on_event: OnEvent | None = None, on_output: Out | None = None) -> Run:
        """`pulumi refresh --run-program`: the ledger brought in line with the engines (drift, gone resources)."""
        return self._run("refresh", lambda: gracefully(lambda: self.stack.refresh(
            on_event=_relay(on_event), on_output=on_output, run_program=True)))

    def _run(self, operation: Literal["preview", "update", "refresh"], call: Callable[[], Any]) -> Run:
        started, what = time.monotonic(), f"workspace {self.name!r}"
        try:
            result = waiting_for_lock(self.stack, operation, what, self.lock_wait, call)
        except auto.errors.CommandError as err:
            raise command_error(operation, what, err) from err
        return Run(workspace=self.name, operation=operation, changes=change_counts(result),
                   seconds=round(time.monotonic() - started, 3))

    def outputs(self) -> dict[str, Any]:
        """The stack outputs, secret values masked ("[secret]"): per project, its resources and services."""
        try:
            return {key: REDACTED if value.secret else value.value for key, value in self.stack.outputs().items()}
        except auto.errors.CommandError as err:
            raise command_error("read the outputs of", f"workspace {self.name!r}", err) from err

    # --- the ledger

    def resources(self, **filters: Any) -> ResourcePage:
        """One page of the ledger's tenant resources (devstack.listing.list_resources): filters such as
        project=, engine=, kind=, limit=, cursor= pass through as keywords."""
        return list_resources(self.stack, **filters)

    def resource(self, name: str, **filters: Any) -> ResourceDetail:
        """One resource in full (`devstack resource show`); secret attributes masked unless show_secrets=True."""
        return show_resource(self.stack, name, **filters)

    def history(self, name: str, **filters: Any) -> ResourceHistory:
        """One resource's lifecycle and events, a removed one's too (`devstack resource history`)."""
        return resource_history(self.stack, name, **filters)

    def env(self, project: str, service: str, *, show_secrets: bool = True,
            warn: Callable[[str], None] | None = None) -> Environment:
        """The service's environment (`devstack env`). `warn` (default: the `devstack` logger) hears when the
        outputs it comes from may be stale: a failed last up, a password changed behind Pulumi's back."""
        found = service_env(self.stack, project, service, show_secrets=show_secrets)
        for warning in self._env_warnings(project):
            (warn or log.warning)(warning)
        return Environment.of(found)

    def _env_warnings(self, project: str) -> Iterator[str]:
        if last_up_failed(self.stack):
            yield ("warning: the last `pulumi up` failed, and Pulumi keeps the stack outputs of the last one that "
                   "finished: values changed since (a rotated password, say) may be old here; run `pulumi up`")
        tracked = [t for t in tracked_resources(self.stack) if t.ident.owner == project]
        stale = [str(t.ident) for t in tracked if t.props.get("passwordInSync") is False]
        if stale:
            yield (f"warning: a refresh found that the password of {', '.join(stale)} no longer works (changed "
                   f"behind Pulumi's back): values built on it fail until `pulumi up` sets it again")
        gone = [f"{t.ident} (last seen {t.props.get(LAST_SEEN) or 'never'})" for t in tracked if is_stale(t.props)]
        if gone:
            yield (f"warning: a refresh did not find {', '.join(gone)} in its engine: values of it may not work "
                   f"until `pulumi up` makes it again")

    # --- the imperative verbs

    def create(self, declaration: Declaration | None = None, /, *, on_output: Out | None = None,
               **fields: Any) -> Change:
        """Declare one resource in its project's devstack.yaml and update it alone (`devstack resource create`).
        Idempotent: the same declaration again changes nothing."""
        found = _declaration(declaration, fields)
        return self._verb("create", found, lambda target: declare_create(
            target, found.params, found.credentials, _yes, on_output or log.info))

    def remove(self, declaration: Declaration | None = None, /, *, purge_data: bool = False,
               on_output: Out | None = None, **fields: Any) -> Change:
        """Take one resource's entry out of its devstack.yaml and update it alone (`devstack db rm` ...): the
        data stays unless `purge_data`, asked for here in code, so nothing asks again."""
        found = _declaration(declaration, fields)
        return self._verb("remove", found, lambda target: declare_remove(
            target, purge_data, _yes, on_output or log.info), purge_data)

    def _verb(self, action: str, found: Declaration, run: Callable[[Target], Outcome], purged: bool = False) -> Change:
        if found.engine not in registry.engines():
            raise InvalidQuery(action, f"engine {found.engine!r}", "no such engine",
                               f"use one of {', '.join(registry.engines())}")
        ws = Declared.of(self.stack)
        ws.lock_wait = self.lock_wait
        with verb_lock(self.stack, action, found.name or "the project's own resource", self.lock_wait):
            target = resolve(ws, (found.engine,), found.kind, found.name, found.project, found.instance)
            outcome = run(target)
        return Change.of(target, outcome, action, purged)

    def destroy(self, *, purge_data: bool = False, project: str | None = None,
                confirm: Confirm | None = None) -> Destruction:
        """Empty the workspace, or take one `project` out of it (`devstack workspace destroy`); the data stays
        in the engines unless `purge_data`. `confirm` hears what would be dropped (default: purge_data asked
        for here in code is the confirmation)."""
        with verb_lock(self.stack, "destroy", f"workspace {self.name!r}", self.lock_wait):
            return destroy_stack(self.stack, purge_data=purge_data, confirm=confirm or _yes, lock_wait=self.lock_wait,
                                 project=project)

    def gc(self, *, prune: bool = False, include_retained: bool = False, confirm: Confirm | None = None,
           **filters: Any) -> GcReport:
        """Scan the engines and reconcile with the ledger (`devstack resource gc`); `prune` drops the orphans."""
        # A prune holds the checkout's verb lock, as every verb that drops data does.
        with verb_lock(self.stack, "prune", "orphans", self.lock_wait) if prune else nullcontext():
            return collect_garbage(self.stack, prune=prune, include_retained=include_retained,
                                   confirm=confirm or _yes, lock_wait=self.lock_wait, **filters)

    def recover(self) -> Recovery:
        """After a killed up: repair, unlock, resolve pending operations (`devstack recover`)."""
        settings = self.stack.workspace
        return recover(self.name, None, self.work_dir, env=settings.env_vars)

    def doctor(self) -> Health:
        """`devstack doctor` for this workspace."""
        return doctor(self.name, None, self.work_dir, env=self.stack.workspace.env_vars)


def _yes(_question: str) -> bool:
    return True


__all__ = ["Change", "Declaration", "Environment", "Event", "Health", "InstanceCheck", "Run",
           "Workspace", "doctor", "open_workspace"]
