"""The ledger (the Pulumi stack state) as a typed Python API.

Everything goes through the Pulumi automation API and the CLI built into
.devstack/bin, in the offline environment of tools/pulumi_env.py. Functions
return pydantic models and raise the typed errors of `devstack.errors`.

Stable entry points (other command modules build on them):

- `open_stack(workspace="local", backend_url=None, work_dir=ROOT, *, env=None, create=False) -> auto.Stack`
- `tracked_resources(stack, show_secrets=False) -> list[Tracked]`: every tenant resource of the state
- `list_resources(stack, *, project, engine, kind, limit, cursor) -> ResourcePage`
- `show_resource(stack, name, *, engine, project, kind, show_secrets) -> ResourceDetail`
- `remove_resource(stack, name, *, engine, project, kind, purge_data, confirm) -> Removal`
- `destroy_stack(stack, *, purge_data, confirm) -> Destruction`
- `collect_garbage(stack, *, engine, kind, project, prune, confirm) -> GcReport`
- `service_env(stack, project, service, *, show_secrets) -> ServiceEnv`

`confirm` is a callable that receives a description of the data about to be
dropped and returns True to go ahead; None (or False) aborts with `Aborted`
before anything changes. It is asked only when data would be dropped.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import getpass
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import takewhile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import yaml
from pulumi import automation as auto
from pulumi.runtime.rpc import UNKNOWN
from pydantic import BaseModel, ConfigDict, Field

from devstack.errors import (
    Aborted,
    Ambiguous,
    DevstackError,
    EngineError,
    IdentityConflict,
    InvalidQuery,
    NotFound,
    ScopeMismatch,
)
from providers.base import ACCESS_RULES, POLICY_FIELDS, REACH, REFS
from providers.identity import NAMING, Identity
from tools.pulumi_env import ROOT, STATE_DIR, cancelled_gracefully_on_interrupt, pulumi_env

#: Variables a user may set (e.g. after `eval "$(python -m tools.pulumi_env)"`)
#: that take precedence over the checkout's defaults.
USER_OVERRIDES = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_HOME")
#: The type prefix of every tenant resource: `pulumi-python:dynamic/<engine>:<kind>`.
DYNAMIC_PREFIX = "pulumi-python:dynamic/"
#: Pulumi's marker for a secret value in a deployment (`stack export`).
SECRET_SIG = "4dabf18193072939515e22adb298388d"
REDACTED = "[secret]"
#: Inputs/outputs that are not attributes: identity, policy, params, rules revision and the pickled provider.
NOT_ATTRIBUTES = frozenset({*Identity.field_names(), *POLICY_FIELDS, "params", ACCESS_RULES, NAMING, REFS, REACH,
                            "__provider"})
DEFAULT_LIMIT, MAX_LIMIT = 100, 500

Confirm = Callable[[str], bool]


# --- opening a stack ----------------------------------------------------------


def stack_env(backend_url: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The offline environment for a stack operation.

    `base` replaces the checkout defaults entirely (tests pass their own
    backend and passphrase); otherwise the defaults of tools/pulumi_env.py
    apply, overridden by the caller's PULUMI_BACKEND_URL,
    PULUMI_CONFIG_PASSPHRASE_FILE and PULUMI_HOME. An explicit
    `backend_url` (file://, postgres://, s3://...) wins over both.
    """
    if base is not None:
        env = dict(base)
    else:
        env = pulumi_env()
        env.update({key: os.environ[key] for key in USER_OVERRIDES if os.environ.get(key)})
    if backend_url:
        env["PULUMI_BACKEND_URL"] = backend_url
    if not env.get("PULUMI_BACKEND_URL"):  # the CLI would ask for a Pulumi Cloud login instead
        raise InvalidQuery("open", "the ledger", "the environment passed names no backend (PULUMI_BACKEND_URL)",
                           "pass backend_url, or PULUMI_BACKEND_URL in env")
    _password_out_of_url(env)
    return env


def _password_out_of_url(env: dict[str, str]) -> None:
    """Move a `postgres://` backend's password from the URL to PGPASSWORD, which the backend's driver reads.

    The CLI records the backend URL of every stack it selects under $PULUMI_HOME/workspaces, in plaintext.
    """
    parts = urlsplit(env.get("PULUMI_BACKEND_URL", ""))
    if parts.scheme not in ("postgres", "postgresql"):
        return
    userinfo, _, host = parts.netloc.rpartition("@")
    query = parse_qsl(parts.query, keep_blank_values=True)
    password = unquote(parts.password) if parts.password is not None else dict(query).get("password")
    if password is None:
        return
    user = userinfo.partition(":")[0]
    netloc = f"{user}@{host}" if user else host
    rest = urlencode([(key, value) for key, value in query if key != "password"])
    env["PULUMI_BACKEND_URL"] = urlunsplit(parts._replace(netloc=netloc, query=rest))
    env["PGPASSWORD"] = password


#: The Pulumi project of the devstack program (Pulumi.yaml's `name`), which names its state and lock files.
PROGRAM_PROJECT = "devstack"


def pulumi_command() -> auto.PulumiCommand:
    """The pinned CLI in .devstack/bin (never a downloaded one)."""
    return auto.PulumiCommand(root=str(STATE_DIR))


#: The names the CLI reads a project's settings from, in its order.
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml", "Pulumi.json")


def _project_settings(work_dir: Path) -> auto.ProjectSettings | None:
    """None when `work_dir` has the devstack project's settings file; the same project in memory when it
    has none (tests, tools: the automation API writes it there as Pulumi.yaml). Another project's file
    is refused: the automation API would overwrite it with these settings."""
    found = next((work_dir / name for name in PROJECT_FILES if (work_dir / name).exists()), None)
    if found is not None:
        try:
            name = (yaml.safe_load(found.read_text()) or {}).get("name")
        except (yaml.YAMLError, AttributeError, OSError, UnicodeDecodeError):
            name = None
        if name != PROGRAM_PROJECT:
            raise InvalidQuery("open", f"the work dir {work_dir}",
                               f"its {found.name} is not the {PROGRAM_PROJECT} project's (name: {name!r})",
                               "--work-dir names the devstack checkout, or a directory without a Pulumi project file")
        return None
    return auto.ProjectSettings(
        name=PROGRAM_PROJECT,
        runtime=auto.ProjectRuntimeInfo(name="python", options={"virtualenv": str(ROOT / ".venv")}),
    )


#: A stack name as the CLI takes it: `local`, `organization/local`, `organization/devstack/local`.
STACK_NAME = re.compile(r"(?:(?!\.+/)[A-Za-z0-9_.-]+/){0,2}(?!\.+$)[A-Za-z0-9_.-]+")


def require_stack_name(workspace: str) -> None:
    """InvalidQuery, before anything is read or touched, when `workspace` is no stack name."""
    if not STACK_NAME.fullmatch(workspace):
        raise InvalidQuery("open", f"stack {workspace!r}", "it is not a stack name",
                           "name the workspace's stack: letters, digits, '-', '_' and '.', as `pulumi stack ls` "
                           "lists it (optionally organization/[project/])")


def short_stack_name(workspace: str) -> str:
    """A stack's own name, `local` for `organization/local` too: URNs and `Pulumi.<stack>.yaml` use it."""
    return workspace.rsplit("/", 1)[-1]


def open_stack(
    workspace: str = "local",
    backend_url: str | None = None,
    work_dir: Path = ROOT,
    *,
    env: Mapping[str, str] | None = None,
    create: bool = False,
) -> auto.Stack:
    """The stack named `workspace` of project devstack, through the automation API.

    `work_dir` holds the program (`__main__.py`) and the stack config
    (`Pulumi.yaml` with `stackConfigDir`); when it has no Pulumi.yaml the
    project settings are supplied in memory. `env`: see `stack_env`.
    Raises NotFound when the stack does not exist in the backend (unless
    `create`, which creates it), EngineError when the CLI cannot run.
    """
    require_stack_name(workspace)
    work_dir = Path(work_dir)
    if not work_dir.is_dir():
        raise InvalidQuery("open", f"stack {workspace!r}", f"the work dir {work_dir} is not a directory",
                           "--work-dir names the checkout: the directory of Pulumi.yaml and the program")
    variables = stack_env(backend_url, env)
    try:
        workspace_obj = auto.LocalWorkspace(
            work_dir=str(work_dir),
            project_settings=_project_settings(work_dir),
            env_vars=variables,
            pulumi_command=pulumi_command(),
        )
        if create:
            try:
                return auto.Stack.create_or_select(workspace, workspace_obj)
            except auto.errors.StackAlreadyExistsError:  # another caller created it since the select
                pass
            except auto.errors.ConcurrentUpdateError:  # another caller is creating it: its lock, for a moment
                return _select_once_made(workspace, workspace_obj)
        return auto.Stack.select(workspace, workspace_obj)
    except auto.errors.StackNotFoundError as err:
        raise NotFound(
            "open", f"stack {workspace!r}", f"the backend {hide_passwords(variables['PULUMI_BACKEND_URL'])} has no such stack",
            "run `pulumi up --stack <workspace>` first, or pass --workspace / --backend-url",
        ) from err
    except auto.errors.CommandError as err:
        torn = torn_metadata(variables["PULUMI_BACKEND_URL"], short_stack_name(workspace), work_dir)
        hint = f"an interrupted run left {torn[0]} empty: run `devstack recover -w {workspace}`" if torn else ""
        raise EngineError("open", f"stack {workspace!r}", cli_error(err), hint) from err


def _select_once_made(workspace: str, workspace_obj: auto.LocalWorkspace, wait: float = 10.0) -> auto.Stack:
    """The stack another caller is creating, selected once its creation ends (bounded by `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return auto.Stack.select(workspace, workspace_obj)
        except (auto.errors.StackNotFoundError, auto.errors.ConcurrentUpdateError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


#: A password inside a backend URL: postgres://user:pass@host/db, or ...?user=u&password=pass.
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+):[^@\s]+@|([?&]password=)[^&\s]+")


def short_name(stack: auto.Stack) -> str:
    """The stack's own name (short_stack_name)."""
    return short_stack_name(stack.name)


def hide_passwords(text: str) -> str:
    """`text` with the password of every backend URL in it replaced by ***."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:***@" if m.group(1) else f"{m.group(2)}***", text)


def cli_error(err: BaseException) -> str:
    """The useful part of a CLI failure: its `error:` lines, not the whole command dump; the CLI's
    own closing words (`update failed`, `python program failed`) only when nothing else says why.

    A backend URL in it loses its password (postgres://user:***@host/db).
    """
    text = getattr(err, "stderr", None) or str(err)
    lines = [line.strip().removeprefix("stderr:").strip() for line in str(text).splitlines() if line.strip()]
    errors = list(dict.fromkeys(_raised(lines[i + 1:]) if line == _TRACEBACK else line
                                for i, line in enumerate(lines) if line.startswith("error:")))
    why = [line for line in errors if not _CLI_CLOSING.search(line)]
    return hide_passwords("\n".join(why) if why else (errors or lines or ["pulumi failed"])[-1])


_TRACEBACK = "error: Traceback (most recent call last):"
#: The line a Python exception ends its traceback with: its (dotted) class name, then its message.
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.+)$")


def _raised(after: list[str]) -> str:
    """A traceback's own last word: the exception line that ends its block (the lines before the next error)."""
    block = list(takewhile(lambda line: not line.startswith("error:"), after))
    raised = [line for line in block if EXCEPTION_LINE.match(line)]
    return f"error: {raised[-1]}" if raised else _TRACEBACK


#: How the CLI ends a failed command whatever the cause: it says nothing a line before it has not.
_CLI_CLOSING = re.compile(r"^error: (\w+ failed|an unhandled error occurred: \w+ program failed: exit status \d+)$")


def run_cli(stack: auto.Stack, *args: str) -> str:
    """Run one pulumi command on `stack` in its workspace and environment; its stdout."""
    workspace = stack.workspace
    try:
        result = workspace.pulumi_command.run(
            [*args, "--stack", stack.name, "--non-interactive"], workspace.work_dir, dict(workspace.env_vars)
        )
    except auto.errors.CommandError as err:
        raise EngineError(f"run `pulumi {args[0]} {args[1] if len(args) > 1 else ''}`".rstrip() + " on",
                          f"stack {stack.name!r}", cli_error(err)) from err
    return result.stdout


# --- reading the state --------------------------------------------------------


@dataclass(frozen=True)
class Tracked:
    """One tenant resource as the state records it.

    `props` are its outputs (inputs for a resource that has none yet) with
    secret values either revealed or replaced by "[secret]"; `secrets` names
    the top-level props that are secret.
    """

    urn: str
    ident: Identity
    props: dict[str, Any]
    secrets: frozenset[str]
    entry: dict[str, Any] = field(repr=False, compare=False)

    @property
    def sort_key(self) -> tuple[str, ...]:
        """The stable order of list: project, engine, instance, kind, name (urn breaks ties)."""
        i = self.ident
        return (i.owner, i.engine, i.instance, i.kind, i.name, self.urn)

    @property
    def dependencies(self) -> list[str]:
        return list(self.entry.get("dependencies") or [])


def export_deployment(stack: auto.Stack, show_secrets: bool = False) -> dict[str, Any]:
    """The stack's deployment; secrets stay ciphertext unless `show_secrets`."""
    if show_secrets:
        try:
            return stack.export_stack().deployment or {}
        except auto.errors.CommandError as err:
            raise EngineError("export", f"stack {stack.name!r}", cli_error(err)) from err
    return json.loads(run_cli(stack, "stack", "export")).get("deployment") or {}


def _reveal(value: Any, show: bool) -> tuple[Any, bool]:
    """(value with secrets revealed or redacted, whether it held a secret)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            if show and "plaintext" in value:
                return json.loads(value["plaintext"]), True
            return REDACTED, True
        pairs = {key: _reveal(item, show) for key, item in value.items()}
        return {key: pair[0] for key, pair in pairs.items()}, any(pair[1] for pair in pairs.values())
    if isinstance(value, list):
        pairs = [_reveal(item, show) for item in value]
        return [pair[0] for pair in pairs], any(pair[1] for pair in pairs)
    return value, False


def _tracked(entry: dict[str, Any], show: bool) -> Tracked | None:
    """A state entry as Tracked, or None when it is not a tenant resource."""
    if not str(entry.get("type", "")).startswith(DYNAMIC_PREFIX) or entry.get("delete"):
        return None
    raw = entry.get("outputs") or entry.get("inputs") or {}
    props, secrets = {}, set()
    for key, value in raw.items():
        props[key], secret = _reveal(value, show)
        if secret:
            secrets.add(key)
    try:
        ident = Identity.from_props(props)
    except KeyError:
        return None  # not one of ours: no identity envelope
    return Tracked(urn=entry["urn"], ident=ident, props=props, secrets=frozenset(secrets), entry=entry)


def tracked_resources(stack: auto.Stack, show_secrets: bool = False) -> list[Tracked]:
    """Every tenant resource of the stack's state, in the stable list order."""
    entries = export_deployment(stack, show_secrets).get("resources") or []
    found = [t for t in (_tracked(e, show_secrets) for e in entries) if t is not None]
    return sorted(found, key=lambda t: t.sort_key)


# --- models -------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Resource(_Model):
    """One row of `devstack resource list`."""

    id: str = Field(description="canonical identity: engine/instance/kind/name@owner")
    urn: str
    project: str = Field(description="the owner")
    engine: str
    instance: str
    kind: str
    name: str
    credentials: str
    purge: bool
    retained: bool = Field(description="retainOnDelete: removing the declaration keeps the data")
    created: datetime | None
    modified: datetime | None
    attributes: dict[str, Any] = Field(description="provider outputs; secret ones are \"[secret]\" unless shown")

    @classmethod
    def of(cls, t: Tracked) -> Resource:
        i, entry = t.ident, t.entry
        return cls(
            id=str(i), urn=t.urn, project=i.owner, engine=i.engine, instance=i.instance, kind=i.kind, name=i.name,
            credentials=str(t.props.get("credentials") or "predictable"), purge=bool(t.props.get("purge")),
            retained=bool(entry.get("retainOnDelete")), created=entry.get("created"), modified=entry.get("modified"),
            attributes={k: v for k, v in t.props.items() if k not in NOT_ATTRIBUTES},
        )


class Filters(_Model):
    """The exact-match filters of a list; a cursor is bound to them."""

    project: str | None = None
    engine: str | None = None
    kind: str | None = None

    def matches(self, ident: Identity) -> bool:
        return all(want is None or want == have for want, have in
                   ((self.project, ident.owner), (self.engine, ident.engine), (self.kind, ident.kind)))

    def fingerprint(self, workspace: str) -> str:
        text = json.dumps({"workspace": workspace, **self.model_dump()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResourcePage(_Model):
    """One page of `devstack resource list`."""

    workspace: str
    filters: Filters
    total: int = Field(description="rows matching the filters, over all pages")
    limit: int
    items: list[Resource]
    next_cursor: str | None = Field(description="pass as --cursor for the next page; null on the last page")


class ResourceDetail(Resource):
    """`devstack resource show`: a row plus params, marker stack, secrets and dependencies."""

    workspace: str
    stack: str | None = Field(description="the stack recorded in the resource's ownership marker")
    params: dict[str, Any]
    secret_attributes: list[str] = Field(description="attributes holding secrets")
    secrets_shown: bool
    dependencies: list[str] = Field(description="URNs this resource depends on")


# --- validation ---------------------------------------------------------------


def validate_filters(engine: str | None, kind: str | None, project: str | None = None) -> Filters:
    """Filters naming a known engine and one of its kinds; InvalidQuery otherwise."""
    from providers import registry

    if engine is not None and engine not in registry.engines():
        raise InvalidQuery("filter by", f"engine {engine!r}", "no such engine",
                           f"use one of {', '.join(registry.engines())}")
    if kind is not None:
        known = {k for e in ([engine] if engine else registry.engines()) for k in registry.kinds(e)}
        if kind not in known:
            raise InvalidQuery("filter by", f"kind {kind!r}", f"no engine{' ' + engine if engine else ''} serves it",
                               f"use one of {', '.join(sorted(known))}")
    for label, value in (("project", project), ("engine", engine), ("kind", kind)):
        if value is not None and not value.strip():
            raise InvalidQuery("filter by", label, "the value is empty")
    return Filters(project=project, engine=engine, kind=kind)


# --- list -----------------------------------------------------------------------


def encode_cursor(fingerprint: str, key: tuple[str, ...]) -> str:
    raw = json.dumps({"v": 1, "f": fingerprint, "k": list(key)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str) -> tuple[str, ...]:
    """The sort key after which the next page starts.

    InvalidQuery for a cursor that is not one of ours; ScopeMismatch for
    one made for other filters or another workspace.
    """
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        key = tuple(data["k"])
        valid = data.get("v") == 1 and isinstance(data.get("f"), str) and len(key) == 6 and all(isinstance(k, str) for k in key)
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError):
        valid = False
    if not valid:
        raise InvalidQuery("page with", "--cursor", "it is malformed", "pass the next_cursor of a previous page unchanged")
    if data["f"] != fingerprint:
        raise ScopeMismatch("page with", "--cursor", "it was made for other filters or another workspace",
                            "repeat the query with the filters that produced the cursor, or start without --cursor")
    return key


def list_resources(
    stack: auto.Stack,
    *,
    project: str | None = None,
    engine: str | None = None,
    kind: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    tracked: list[Tracked] | None = None,
) -> ResourcePage:
    """One page of tenant resources in stable order (project, engine, instance, kind, name).

    Keyset pagination: `cursor` is the previous page's `next_cursor`, valid
    only with the same filters and workspace. `tracked` skips reading the
    state again (callers that already hold it).
    """
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidQuery("list", "resources", f"--limit {limit!r} is not a whole number", f"use 1 to {MAX_LIMIT}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery("list", "resources", f"--limit {limit} is out of range", f"use 1 to {MAX_LIMIT}")
    filters = validate_filters(engine, kind, project)
    fingerprint = filters.fingerprint(short_name(stack))  # `-w local` and `-w organization/local` alike
    after = decode_cursor(cursor, fingerprint) if cursor is not None else None
    rows = [t for t in (tracked if tracked is not None else tracked_resources(stack)) if filters.matches(t.ident)]
    rest = [t for t in rows if after is None or t.sort_key > after]
    page = rest[:limit]
    more = len(rest) > limit
    return ResourcePage(
        workspace=stack.name, filters=filters, total=len(rows), limit=limit, items=[Resource.of(t) for t in page],
        next_cursor=encode_cursor(fingerprint, page[-1].sort_key) if more else None,
    )


# --- show -------------------------------------------------------------------------


def find_resource(
    tracked: Iterable[Tracked], name: str, *, engine: str | None = None, project: str | None = None,
    kind: str | None = None, verb: str = "show",
) -> Tracked:
    """The one resource `name` designates: its canonical id, its Pulumi name
    (`<project>/<instance>/<kind>/<name>`) or its declaration name, narrowed by
    the filters. NotFound for none, Ambiguous (listing them) for several.
    """
    filters = Filters(project=project, engine=engine, kind=kind)
    candidates = [t for t in tracked if filters.matches(t.ident)]
    for designates in (
        lambda t: str(t.ident) == name,
        lambda t: t.urn.rsplit("::", 1)[-1] == name,
        lambda t: t.ident.name == name,
    ):
        found = [t for t in candidates if designates(t)]
        if len(found) == 1:
            return found[0]
        if found:
            raise Ambiguous(verb, f"resource {name!r}", [str(t.ident) for t in found])
    scope = ", ".join(f"{k} {v!r}" for k, v in filters.model_dump().items() if v)
    raise NotFound(verb, f"resource {name!r}", "the ledger has no such resource" + (f" ({scope})" if scope else ""),
                   "see `devstack resource list`")


def show_resource(
    stack: auto.Stack,
    name: str,
    *,
    engine: str | None = None,
    project: str | None = None,
    kind: str | None = None,
    show_secrets: bool = False,
) -> ResourceDetail:
    """Everything the ledger knows about one resource; secret attributes redacted unless `show_secrets`."""
    validate_filters(engine, kind, project)
    t = find_resource(tracked_resources(stack, show_secrets), name, engine=engine, project=project, kind=kind)
    row = Resource.of(t)
    return ResourceDetail(
        **row.model_dump(), workspace=stack.name, stack=t.props.get("stack"), params=t.props.get("params") or {},
        secret_attributes=sorted(k for k in t.secrets if k in row.attributes), secrets_shown=show_secrets,
        dependencies=t.dependencies,
    )


# --- providers from the stack config ---------------------------------------------------


def stack_config(stack: auto.Stack) -> dict[str, Any]:
    """The stack's config with secrets decrypted (admin credentials): key -> value."""
    try:
        return {key: value.value for key, value in stack.get_all_config().items()}
    except auto.errors.CommandError as err:
        from components.yamlfile import stack_config_file

        display = stack_config_file(Path(stack.workspace.work_dir), short_name(stack))
        raise EngineError("read the config of", f"stack {stack.name!r}", cli_error(err),
                          f"fix {display}, or the passphrase if it cannot be decrypted "
                          f"(PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE)") from err


def workspace_problems(stack: auto.Stack, config: Mapping[str, Any]) -> list[str]:
    """The problems `pulumi preview` reports in the stack config's `devstack:workspace`, located in its file."""
    from components.validation import WorkspaceInvalid, validate
    from components.yamlfile import load_yaml_if_usable, stack_config_file
    from providers.instances import parse_object

    root = Path(stack.workspace.work_dir)
    display = stack_config_file(root, short_name(stack))
    try:
        validate(parse_object(config.get("devstack:workspace")), root, load_yaml_if_usable(root / display, display),
                 display)
    except WorkspaceInvalid as invalid:
        return [str(p) for p in invalid.problems if p.file == display]
    except ValueError as err:  # not a JSON object at all
        return [f"{display}: config.devstack:workspace: {err}"]
    return []


def instances_config(stack: auto.Stack) -> dict[str, Any]:
    """The stack's config (`stack_config`), once its shared instances are known to be usable: the engine
    calls build them from it. InvalidQuery (nothing done) naming the file, line and field otherwise."""
    from pydantic import ValidationError

    from components.models import WorkspaceConfig
    from providers.instances import WORKSPACE_KEY, instances_from_config, parse_object

    config = stack_config(stack)
    try:
        instances_from_config(config)
        raw = parse_object(config.get(WORKSPACE_KEY))
        if raw is not None:  # the whole of it: a misspelt `projects` would make every project an orphan
            WorkspaceConfig.model_validate(raw)
    except (ValidationError, ValueError, AttributeError, TypeError) as err:
        found = workspace_problems(stack, config) or [str(err).splitlines()[0]]
        raise InvalidQuery("read", f"the workspace of stack {short_name(stack)!r}", "; ".join(found),
                           "fix the stack config; nothing was changed") from None
    return config


def configured_provider(config: Mapping[str, Any], engine: str, kind: str):
    """The kind's provider, configured exactly as Pulumi configures it (admin secrets via configure)."""
    from pulumi.dynamic import Config, ConfigureRequest

    from providers import registry

    provider = registry.provider_class(engine, kind)()
    provider.configure(ConfigureRequest(Config(raw_config=dict(config), project_name=PROGRAM_PROJECT)))
    return provider


def drop_data(config: Mapping[str, Any], ident: Identity, props: Mapping[str, Any]) -> bool:
    """Drop one resource's data through its provider: one engine call. False when it was already gone.

    Raises IdentityConflict when the engine gives it to someone else, another
    workspace included (nothing dropped), EngineError when the engine fails.
    """
    from providers import errors as perr

    provider = configured_provider(config, ident.engine, ident.kind)
    try:
        provider.purge(ident, props)
    except perr.NotFound:
        return False
    except perr.Conflict as err:
        raise IdentityConflict("drop", str(ident), err.cause, err.hint or "it was not dropped") from err
    except perr.EngineUnavailable as err:  # its `what` is the instance: name it
        raise EngineError("drop", str(ident), f"cannot {err.verb} {err.what}: {err.cause}", err.hint) from err
    except perr.DevstackError as err:
        raise EngineError("drop", str(ident), err.cause, err.hint) from err
    except Exception as err:  # a client library's own error: still "cannot drop <id>", cause chained
        raise EngineError("drop", str(ident), f"{type(err).__name__}: {err}") from err
    return True


def _require_confirmation(confirm: Confirm | None, text: str) -> None:
    if confirm is None or not confirm(text):
        raise Aborted("drop", "data", "not confirmed; nothing was changed", "confirm, or pass --yes")


def _stopped(err: DevstackError, done: _Model) -> DevstackError:
    """`err`, carrying the report of what was done before it (printed with --json)."""
    err.done = done.model_copy(update={"error": str(err)})
    return err


def file_backend_root(backend_url: str, work_dir: Path) -> Path | None:
    """The directory of a file backend as the CLI resolves it, run in `work_dir`; None for any other backend.

    Like the CLI: the text after `file://` and before `?`, a leading `~` for the home directory
    (`file://~`, `pulumi login --local`), a relative path from the working directory; `%20` for a
    space (as_uri() writes one), as the URL is read in the end."""
    if not backend_url.startswith("file://"):
        return None
    path = backend_url.removeprefix("file://").split("?", 1)[0]
    if path.startswith("~"):
        path = str(Path.home()) + path[1:]
    return Path(os.path.normpath(Path(work_dir) / unquote(path)))


#: How long a verb waits for another run's lock on the stack, in seconds, unless --lock-wait or
#: $DEVSTACK_LOCK_WAIT says otherwise: long enough for an `up` of the examples, short enough to notice.
DEFAULT_LOCK_WAIT = 300.0


def _stderr(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LockWait:
    """How a verb meets a stack another run has locked: it waits at most `seconds`, telling `say` whose
    lock it waits on (once per holder)."""

    seconds: float = DEFAULT_LOCK_WAIT
    say: Callable[[str], None] = _stderr

    @classmethod
    def default(cls, say: Callable[[str], None] = _stderr) -> LockWait:
        """The wait $DEVSTACK_LOCK_WAIT sets (seconds), else DEFAULT_LOCK_WAIT."""
        raw = os.environ.get("DEVSTACK_LOCK_WAIT", "")
        try:
            return cls(max(0.0, float(raw)) if raw.strip() else DEFAULT_LOCK_WAIT, say)
        except ValueError:
            raise InvalidQuery("read", f"DEVSTACK_LOCK_WAIT={raw!r}", "not a number of seconds",
                               "set it to e.g. 300, or unset it") from None


class _Waiting:
    """One bounded wait: its deadline, and the holder last announced."""

    def __init__(self, wait: LockWait, name: str) -> None:
        self.wait, self.name = wait, name
        self.started = time.monotonic()
        self.announced: str | None = None

    def met(self, holder: str, verb: str, what: str) -> None:
        """Another run holds the lock: say so (once per holder), or fail once the wait is over."""
        waited = time.monotonic() - self.started
        if waited >= self.wait.seconds:
            raise EngineError(verb, what, f"stack {self.name!r} stayed locked by {holder} for the {waited:.0f}s "
                              f"this verb waits (--lock-wait)", "nothing was changed by this run; wait for that "
                              f"one to end and run it again, or if none is running, `devstack recover -w {self.name}`")
        if holder != self.announced:
            self.wait.say(f"waiting for the lock on stack {self.name!r} held by {holder} (at most "
                          f"{self.wait.seconds - waited:.0f}s more)")
            self.announced = holder

    def pause(self, interval: float = 0.2) -> None:
        time.sleep(min(interval, max(0.0, self.wait.seconds - (time.monotonic() - self.started))))


def lock_holder(stack: auto.Stack) -> str | None:
    """Who holds the stack's Pulumi lock, as its lock file says (`pid P of user@host, since T`); None when
    no lock file is there (unlocked, or a backend whose locks cannot be seen from here)."""
    locks = _lock_files(_backend_root(stack), stack.workspace.project_settings().name, short_name(stack))
    if not locks:
        return None
    try:
        held = json.loads(locks[0].read_text())
        return f"pid {held.get('pid')} of {held.get('username')}@{held.get('hostname')}, since {held.get('timestamp')}"
    except (OSError, ValueError, AttributeError):  # released while read, or not Pulumi's
        return f"the run of lock file {locks[0]}"


def _backend_root(stack: auto.Stack) -> Path | None:
    return file_backend_root(stack.workspace.env_vars.get("PULUMI_BACKEND_URL", ""), Path(stack.workspace.work_dir))


def wait_while_locked(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> None:
    """Return once no other run holds the stack's lock (on a file backend, where it can be seen), waiting
    for it at most `wait.seconds`; EngineError, nothing changed, naming the holder when the wait is over.

    Called before data is dropped: the ledger edit after the drops would fail on the lock, and an `up`
    holding it records what it makes only once made (gc would take its new resources for orphans)."""
    waiting = _Waiting(wait, short_name(stack))
    while (holder := lock_holder(stack)) is not None:
        _refuse_a_killed_runs_lock(stack, verb, what)
        waiting.met(holder, verb, what)
        waiting.pause()


def waiting_for_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait, call: Callable[[], Any]) -> Any:
    """`call()` (one pulumi command on `stack`), run again once the lock it met is released.

    A command that meets another run's lock fails at once without doing anything, so running it again
    is safe. The wait is bounded by `wait.seconds`: then EngineError names the holder."""
    waiting = _Waiting(wait, short_name(stack))
    while True:
        try:
            return call()
        except auto.errors.ConcurrentUpdateError:
            _refuse_a_killed_runs_lock(stack, verb, what)
            waiting.met(lock_holder(stack) or "another pulumi run", verb, what)
            while lock_holder(stack) is not None and time.monotonic() - waiting.started < wait.seconds:
                waiting.pause()
            if _backend_root(stack) is None:  # no lock file to watch: try again a second later
                waiting.pause(1.0)


@contextmanager
def verb_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> Iterator[None]:
    """Hold the checkout's lock on the workspace for a verb that edits its devstack.yaml files or ledger.

    Two verbs at once would each read a devstack.yaml, add their entry and write it back, and one entry
    would be lost; the second waits here instead (bounded by `wait`), told whose verb it waits for. The
    lock is an flock on `<work dir>/.devstack/locks/<stack>.lock`, released when its holder exits,
    however; the file names the holder for the waiter's message.
    """
    path = Path(stack.workspace.work_dir) / ".devstack" / "locks" / f"{short_name(stack)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        waiting = _Waiting(wait, short_name(stack))
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waiting.met(_verb_holder(path), verb, what)
                waiting.pause()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "username": getpass.getuser(), "hostname": socket.gethostname(),
                                  "verb": f"{verb} {what}", "since": datetime.now().astimezone().isoformat(
                                      timespec="seconds")}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


def _verb_holder(path: Path) -> str:
    """The devstack verb holding the checkout's lock, as its lock file names it."""
    try:
        held = json.loads(path.read_text())
        return (f"devstack pid {held['pid']} of {held['username']}@{held['hostname']} ({held['verb']}), "
                f"since {held['since']}")
    except (OSError, ValueError, KeyError, TypeError):  # taken a moment ago, not written yet
        return "another devstack verb"


def _lock_files(root: Path | None, project: str, short: str) -> list[Path]:
    """The stack's lock files on a file backend (none elsewhere: other backends' locks cannot be seen)."""
    # Project-scoped layout (organization/<project>/<stack>), and the legacy one (<stack>) of older backends.
    patterns = (f"*/{project}/{short}/*.json", f"{short}/*.json")
    return sorted(lock for pattern in patterns for lock in (root / ".pulumi" / "locks").glob(pattern)) if root else []


def _this_machines(lock: Path) -> tuple[int, dict[str, Any]] | None:
    """(pid, the lock's fields) when `lock` is a Pulumi lock taken on this machine; None otherwise
    (another machine's, or a lock file that is not Pulumi's)."""
    try:
        held = json.loads(lock.read_text())
        pid = int(held["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, held) if held.get("hostname") == socket.gethostname() else None


def _runs_pulumi(pid: int) -> bool:
    try:  # a pid reused by another program since the holder was killed is not the holder
        return b"pulumi" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _running_holder(lock: Path) -> str | None:
    """Who holds `lock`, when it is a pulumi process still running on this machine; None when that cannot
    be told (another machine's, or a lock file that is not Pulumi's) or the holder is gone."""
    found = _this_machines(lock)
    if found is None or not _runs_pulumi(found[0]):
        return None
    return f"pid {found[0]}, since {found[1].get('timestamp')}"


def _refuse_a_killed_runs_lock(stack: auto.Stack, verb: str, what: str) -> None:
    """EngineError at once, rather than a wait that cannot end, when the stack's lock is that of a run
    killed on this machine (its pid runs no pulumi): `devstack recover` is what frees it."""
    for lock in _lock_files(_backend_root(stack), stack.workspace.project_settings().name, short_name(stack)):
        found = _this_machines(lock)
        if found is not None and not _runs_pulumi(found[0]):
            raise EngineError(verb, what, f"stack {short_name(stack)!r} is locked by pid {found[0]} of this "
                              f"machine, since {found[1].get('timestamp')}, which no longer runs: a killed run's "
                              f"lock", f"nothing was changed by this run; `devstack recover -w {stack.name}`, "
                              f"then run it again")


# --- rm -------------------------------------------------------------------------------


class Removal(_Model):
    """What `devstack resource rm` did."""

    workspace: str
    resource: Resource
    untracked: bool = Field(description="removed from the ledger (pulumi state delete)")
    data_dropped: bool = Field(description="the engine's data was dropped (only with purge_data)")
    already_gone: bool = Field(description="purge_data found nothing to drop in the engine")
    edited: list[str] = Field(default_factory=list, description="project files the entry was taken out of (the command line's edit)")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


def gracefully(command: Callable[[], Any]) -> Any:
    """One pulumi command that a Ctrl-C lets cancel (cancelled_gracefully_on_interrupt)."""
    with cancelled_gracefully_on_interrupt():
        return command()


def _state_delete(stack: auto.Stack, urns: list[str], wait: LockWait) -> None:
    """Un-track resources: `pulumi state delete` (one CLI call, again once a lock it meets is released),
    never an engine call."""
    if not urns:
        return
    workspace, args = stack.workspace, ["state", "delete", *urns, "--yes", "--stack", stack.name, "--non-interactive"]

    try:
        # Each try cancels gracefully on Ctrl-C; a Ctrl-C while waiting between tries stops at once.
        waiting_for_lock(stack, "un-track", f"{len(urns)} resource(s)", wait, lambda: gracefully(
            lambda: workspace.pulumi_command.run(args, workspace.work_dir, dict(workspace.env_vars))))
    except auto.errors.CommandError as err:
        raise EngineError("run `pulumi state delete` on", f"stack {stack.name!r}", cli_error(err)) from err


def _dependents(tracked: Iterable[Tracked], urns: set[str]) -> list[Tracked]:
    return [t for t in tracked if t.urn not in urns and urns & set(t.dependencies)]


def _ordered_after(dependent: Tracked, target: Tracked) -> bool:
    """Whether `dependent` depends on `target` only by its kind's order (an acl after the project's
    topics, an access key after its buckets), not by naming it."""
    from providers import registry

    try:
        kind = registry.provider_class(dependent.ident.engine, dependent.ident.kind)
    except KeyError:
        return False
    return dependent.ident.instance == target.ident.instance and target.ident.kind in kind.after_kinds


def remove_resource(
    stack: auto.Stack,
    name: str,
    *,
    engine: str | None = None,
    project: str | None = None,
    kind: str | None = None,
    purge_data: bool = False,
    confirm: Confirm | None = None,
    before: Callable[[Resource], None] | None = None,
    lock_wait: LockWait | None = None,
) -> Removal:
    """Un-track one resource; with `purge_data`, drop its data first (after `confirm`).

    `before(resource)` runs once the resource is found, before anything changes,
    and may raise to change nothing (the command line checks its file edit there).

    Without purge_data only the ledger changes (`pulumi state delete`): the
    data stays and a later `pulumi up` that still declares it adopts it again.
    Refuses (InvalidQuery, nothing changed) a resource others depend on.
    Another run's lock on the stack is waited for (`lock_wait`, LockWait.default() when None).
    """
    wait = lock_wait or LockWait.default()
    validate_filters(engine, kind, project)
    tracked = tracked_resources(stack)
    target = find_resource(tracked, name, engine=engine, project=project, kind=kind, verb="remove")
    dependents = _dependents(tracked, {target.urn})
    if dependents:
        hint = "remove those first"
        if all(_ordered_after(t, target) for t in dependents):
            hint = ("they do not use it, they are only made after it: to stop declaring it, take its entry out of "
                    "the devstack.yaml and run `pulumi up` (or `devstack topic rm` / `devstack s3 rb`), which moves "
                    "that order; to un-track the project's resources, remove those first")
        raise InvalidQuery("remove", str(target.ident), "other resources depend on it: "
                           + ", ".join(str(t.ident) for t in dependents), hint)
    if before is not None:
        before(Resource.of(target))
    dropped = gone = False
    if purge_data:
        wait_while_locked(stack, "drop the data of", str(target.ident), wait)
        _require_confirmation(confirm, f"drop the data of {target.ident} in {target.ident.engine} "
                                       f"instance {target.ident.instance!r}")
        dropped = drop_data(instances_config(stack), target.ident, target.props)
        gone = not dropped
    done = Removal(workspace=stack.name, resource=Resource.of(target), untracked=False,
                   data_dropped=dropped, already_gone=gone)
    try:
        _state_delete(stack, [target.urn], wait)
    except EngineError as err:
        if not dropped:
            raise
        raise _stopped(EngineError(err.verb, err.what, err.cause,
                                   "its data was dropped, and the ledger and its devstack.yaml still list it: "
                                   "once the stack is free, run this again (it finds the data gone and finishes)"),
                       done) from err
    return done.model_copy(update={"untracked": True})


# --- destroy --------------------------------------------------------------------------


class Destruction(_Model):
    """What `devstack destroy` did."""

    workspace: str
    project: str | None = Field(default=None, description="the one project destroyed; null: the whole workspace")
    untracked: list[str] = Field(description="ids of the tenant resources removed from the ledger")
    dropped: list[str] = Field(description="ids whose data was dropped (only with purge_data)")
    already_gone: list[str] = Field(description="ids purge_data found nothing to drop for")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


def _refuse_other_workspaces(config: Mapping[str, Any], tracked: list[Tracked]) -> None:
    """IdentityConflict, before anything is dropped, naming every resource another workspace adopted."""
    from providers import errors as perr

    refused = []
    for t in tracked:
        provider = configured_provider(config, t.ident.engine, t.ident.kind)
        try:
            provider.refuse_another_workspaces(t.ident, t.props)
        except perr.Conflict as err:
            refused.append(f"{t.ident}: {err.cause}")
        except perr.DevstackError:
            continue  # its own drop reports it
    if refused:
        raise IdentityConflict("drop the data of", f"{len(refused)} resource(s)", "; ".join(refused),
                               "nothing was dropped; take each out of this workspace's ledger alone first "
                               "(`pulumi state delete <its urn>`, as docs/lifecycle.md's moving a project says), then "
                               "destroy again")


def drop_order(tracked: list[Tracked]) -> list[Tracked]:
    """Dependents before what they depend on (a consumer before its stream, an ACL before its topics)."""
    remaining, ordered = list(tracked), []
    while remaining:
        needed = {dep for t in remaining for dep in t.dependencies}
        ready = [t for t in remaining if t.urn not in needed] or remaining[:1]  # a cycle cannot happen; never hang
        ordered += ready
        remaining = [t for t in remaining if t not in ready]
    return ordered


def destroy_stack(stack: auto.Stack, *, purge_data: bool = False, confirm: Confirm | None = None,
                  lock_wait: LockWait | None = None, project: str | None = None) -> Destruction:
    """Empty the stack, or with `project` take that project's tenant resources out of it. Without
    purge_data every tenant resource is only un-tracked: data stays.

    With purge_data (after `confirm`) each tenant resource's data is dropped
    through its provider first, dependents first, one engine call each. Then
    the tenant resources leave the ledger (`pulumi state delete`, so no
    provider delete can run whatever `purge` says) and `pulumi destroy`
    removes what is left (components, outputs); with `project`, there is no
    `pulumi destroy`: the other projects stay, and so does the project's
    component (the next `up` declares the project again while the workspace
    lists it, and deletes the component once it does not). A drop that fails
    raises before the ledger changes: what was dropped is "already gone" on
    a rerun. Another run's lock on the stack is waited for (`lock_wait`).
    """
    wait = lock_wait or LockWait.default()
    tracked = [t for t in tracked_resources(stack) if project in (None, t.ident.owner)]
    scope = f"project {project!r} of workspace {stack.name!r}" if project else f"workspace {stack.name!r}"
    dropped, gone = [], []

    def done(untracked: bool = False) -> Destruction:
        return Destruction(workspace=stack.name, project=project, dropped=dropped, already_gone=gone,
                           untracked=[str(t.ident) for t in tracked] if untracked else [])

    if purge_data and tracked:
        wait_while_locked(stack, "drop the data of", scope, wait)
        _require_confirmation(confirm, f"drop the data of {len(tracked)} resources of {scope}: "
                                       + ", ".join(str(t.ident) for t in tracked))
        config = instances_config(stack)
        _refuse_other_workspaces(config, tracked)
        for t in drop_order(tracked):
            try:
                (dropped if drop_data(config, t.ident, t.props) else gone).append(str(t.ident))
            except (IdentityConflict, EngineError) as err:
                if not dropped:
                    raise
                # Say what already happened: a rerun finds those gone, and stops here again until refreshed.
                raise _stopped(type(err)(err.verb, err.what, err.cause,
                                         f"{err.hint}; {len(dropped)} resource(s) before it were dropped, the "
                                         "ledger is unchanged: `pulumi refresh`, then destroy again"),
                               done()) from err
    try:
        _state_delete(stack, [t.urn for t in tracked], wait)
    except EngineError as err:
        if not dropped:
            raise
        raise _stopped(EngineError(err.verb, err.what, err.cause,
                                   f"the data of {len(dropped)} resource(s) was dropped, and the ledger still "
                                   "lists them: once the stack is free, `pulumi refresh`, then destroy again"),
                       done()) from err
    if project is not None:
        return done(untracked=True)
    try:
        waiting_for_lock(stack, "destroy", f"stack {stack.name!r}", wait, lambda: gracefully(stack.destroy))
    except auto.errors.CommandError as err:
        raise _stopped(EngineError("destroy", f"stack {stack.name!r}", cli_error(err)), done(untracked=True)) from err
    except EngineError as err:  # locked past the wait: the tenant resources are out of the ledger already
        raise _stopped(EngineError(err.verb, err.what, err.cause, "its tenant resources left the ledger; once the "
                                   "stack is free, destroy again to remove the rest"), done(untracked=True)) from err
    return done(untracked=True)


# --- recover ----------------------------------------------------------------------------


class Recovery(_Model):
    """What `devstack recover` did after an interrupted run."""

    workspace: str
    repaired: list[str] = Field(description="zero-length metadata files of the file backend that were removed")
    pending_cleared: int = Field(description="operations the interrupted run left pending, now resolved")
    error: str | None = Field(default=None, description="why it stopped part-way (the other fields say what it did)")


def torn_metadata(backend_url: str, workspace: str, work_dir: Path) -> list[Path]:
    """Zero-length `.attrs` files beside the stack's checkpoint on a file backend.

    The file backend writes each checkpoint atomically (a temporary file, then
    a rename) but its `<stack>.json.attrs` metadata in place, so a run killed
    at the wrong moment leaves that file empty and every later command fails
    with "failed to load checkpoint: EOF". Without the file the backend uses
    defaults, so removing an empty one loses nothing.
    """
    root = file_backend_root(backend_url, work_dir)
    if root is None:
        return []
    stacks = root / ".pulumi" / "stacks" / PROGRAM_PROJECT
    return [path for path in sorted(stacks.glob(f"{workspace}.json*.attrs")) if path.stat().st_size == 0]


def recover(
    workspace: str = "local", backend_url: str | None = None, work_dir: Path = ROOT, *, env: Mapping[str, str] | None = None
) -> Recovery:
    """The documented recovery after a killed `pulumi up`: repair, unlock, resolve pending operations.

    On a file backend it removes only the locks of runs no longer running on this machine; elsewhere,
    where locks cannot be seen, `pulumi cancel` removes any lock: run it once nothing else works on
    the stack.

    Creates that were in flight leave the ledger, made or not, and the rest is
    refreshed with the current stack config (`refresh --clear-pending-creates
    --run-program`). The next `pulumi up` adopts what the killed run made
    (setting the credentials the ledger records) and creates the rest; until
    then gc sees those as orphans. Nothing is created or dropped in an engine.
    """
    require_stack_name(workspace)  # before any file is touched
    variables = stack_env(backend_url, env)
    root = file_backend_root(variables["PULUMI_BACKEND_URL"], Path(work_dir))
    stale = _lock_files(root, PROGRAM_PROJECT, short_stack_name(workspace))
    for lock in stale:
        holder = _running_holder(lock)
        if holder:  # its lock broken and its pending operations cleared, the run would lose what it records
            raise EngineError("recover", f"stack {workspace!r}", f"a pulumi run that holds its lock is still "
                              f"running on this machine ({holder})", "recover is for a run that was killed: "
                              "wait for this one to end; nothing was changed")
    repaired = torn_metadata(variables["PULUMI_BACKEND_URL"], short_stack_name(workspace), Path(work_dir))
    for path in repaired:
        path.unlink()
    stack = open_stack(workspace, backend_url, work_dir, env=env)
    pending = len(export_deployment(stack).get("pending_operations") or [])
    if root is None:
        run_cli(stack, "cancel", "--yes")  # another backend's lock cannot be seen: whichever it holds goes
    for lock in stale:
        # Only the killed run's, as checked above: `pulumi cancel` would also take the lock of a run
        # started since, which the refresh below then waits for (or fails on) instead.
        lock.unlink(missing_ok=True)
    done = Recovery(workspace=workspace, repaired=[str(p) for p in repaired], pending_cleared=0)
    try:
        with cancelled_gracefully_on_interrupt():
            stack.refresh(clear_pending_creates=True, run_program=True)
    except auto.errors.CommandError as err:
        raise _stopped(EngineError("refresh", f"stack {workspace!r}", cli_error(err),
                                   "the stack is unlocked and its metadata repaired; once the cause is fixed, "
                                   "run `devstack recover` again"), done) from err
    return done.model_copy(update={"pending_cleared": pending})


# --- env ------------------------------------------------------------------------------


class ServiceEnv(_Model):
    """A service's environment from the stack output `<project>.services.<service>.env`."""

    workspace: str
    project: str
    service: str
    env: dict[str, str]
    secret_vars: list[str] = Field(description="variables holding secrets")
    secrets_shown: bool


def _env_text(value: Any) -> str:
    """Environment values are text; numbers and booleans as JSON writes them."""
    return value if isinstance(value, str) else json.dumps(value)


def service_env(stack: auto.Stack, project: str, service: str, *, show_secrets: bool = False) -> ServiceEnv:
    """The service's environment; secret values are "[secret]" unless `show_secrets`.

    The masked output decides which variables are secret; the plaintext one
    is read only when `show_secrets` asks for it.
    """
    masked = json.loads(run_cli(stack, "stack", "output", "--json") or "{}")
    env = _service_section(masked, stack.name, project, service)
    unknown = sorted(k for k, v in env.items() if UNKNOWN in str(v))
    if unknown:  # Pulumi's placeholder for a value not known yet: never hand it to a service
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"{', '.join(unknown)} have no value yet: a resource they import is declared but was not "
                       f"applied (a targeted update, such as a `devstack` verb's, leaves the others out)",
                       f"run `pulumi up --stack {short_name(stack)}`")
    secret = sorted(k for k, v in env.items() if v == REDACTED)
    if show_secrets and secret:
        plain = json.loads(run_cli(stack, "stack", "output", "--json", "--show-secrets") or "{}")
        env = _service_section(plain, stack.name, project, service)
    return ServiceEnv(workspace=stack.name, project=project, service=service,
                      env={k: _env_text(v) for k, v in sorted(env.items())}, secret_vars=secret, secrets_shown=show_secrets)


def last_up_failed(stack: auto.Stack) -> bool:
    """Whether the stack's last update failed: its resources may then be newer than its outputs."""
    try:
        updates = stack.history(page_size=20, show_secrets=False)
    except auto.errors.CommandError:
        return False  # no history to tell: say nothing rather than fail the command
    return next((u.result == "failed" for u in updates if u.kind == "update"), False)


def _service_section(outputs: dict[str, Any], workspace: str, project: str, service: str) -> dict[str, Any]:
    if project not in outputs:
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"workspace {workspace!r} has no project {project!r}",
                       f"projects with outputs: {', '.join(sorted(outputs)) or 'none'}")
    services = (outputs[project] or {}).get("services") or {}
    if service not in services:
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"project {project!r} has no service {service!r}",
                       f"its services: {', '.join(sorted(services)) or 'none'}")
    return dict((services[service] or {}).get("env") or {})


# --- gc -----------------------------------------------------------------------------


class GcItem(_Model):
    """One resource a scan found (orphan, foreign, other workspace) or the ledger lists (stale)."""

    engine: str
    instance: str
    kind: str
    engine_name: str = Field(description="the name inside the engine")
    project: str | None = Field(description="owner from the ownership marker (ledger owner for stale); null = no marker")
    stack: str | None = Field(description="workspace recorded in the marker, when the engine keeps it")
    name: str | None = Field(description="the declaration name, when it can be derived")
    reason: str

    @property
    def same_object(self) -> tuple[str | None, ...]:
        """What tells one found object from another between two scans (not why it was listed)."""
        return (self.engine, self.instance, self.kind, self.engine_name, self.project, self.stack)


class GcError(_Model):
    engine: str
    instance: str
    error: str


class GcReport(_Model):
    """`devstack resource gc`: a complete scan reconciled against the ledger."""

    workspace: str
    filters: Filters
    scanned: list[str] = Field(description="instances scanned completely")
    managed: int = Field(description="resources both in the engine and in the ledger")
    orphans: list[GcItem] = Field(description="of projects the workspace no longer lists: --prune drops them")
    retained: list[GcItem] = Field(description="this workspace's, outside the ledger, of projects it still lists "
                                               "(their entry left the devstack.yaml): dropped only with "
                                               "--include-retained")
    stale: list[GcItem]
    foreign: list[GcItem]
    other_workspaces: list[GcItem] = Field(description="marked by devstack for another workspace: never touched")
    pruned: list[str] = Field(description="ids of orphans dropped (only with prune)")
    errors: list[GcError]


def workspace_projects(config: Mapping[str, Any], work_dir: Path) -> set[str]:
    """Names of the projects the workspace lists now; InvalidQuery when a project file cannot be read."""
    from components.yamlfile import unreadable_reason
    from providers.instances import WORKSPACE_KEY, parse_object

    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    if not workspace.get("shared"):
        # A report of nothing found would read as "all clean" while nothing was scanned.
        raise InvalidQuery("collect garbage in", "this stack",
                           f"its config has no {WORKSPACE_KEY} with shared instances, so there is nothing to scan",
                           "pass the --work-dir holding the stack's Pulumi.<stack>.yaml (the checkout by default)")
    names = set()
    for relative in workspace.get("projects") or []:
        path = Path(work_dir) / relative
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            why = None if isinstance(data, dict) and data.get("name") else "it has no top-level name"
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            data, why = None, unreadable_reason(err)
        if why:
            raise InvalidQuery("collect garbage in", f"workspace {workspace.get('name')!r}",
                               f"project file {relative} cannot be read ({why})",
                               "fix the workspace first: without its projects, gc cannot tell orphans")
        names.add(str(data["name"]))
    return names


def collect_garbage(
    stack: auto.Stack,
    *,
    engine: str | None = None,
    kind: str | None = None,
    project: str | None = None,
    prune: bool = False,
    include_retained: bool = False,
    confirm: Confirm | None = None,
    lock_wait: LockWait | None = None,
) -> GcReport:
    """Scan every instance in scope and reconcile with the ledger.

    Orphans: marked for this workspace but not in the ledger, or owned by a
    project the workspace no longer lists. Stale: in the ledger, missing from
    the engine. Foreign: no marker of ours, never touched. Resources marked
    for another workspace are listed apart and never touched either. With
    `prune` (after `confirm`), each orphan is dropped by its provider: one
    engine call per orphan, nothing else (the ledger is not changed).
    Retained: marked for this workspace, outside the ledger, of a project it
    still lists (an entry taken out of its devstack.yaml, data retained);
    pruned only with `include_retained` too.
    """
    from components.yamlfile import encryption_salt
    from devstack import gc as reconcile
    from providers.markers import marker_workspace

    filters = validate_filters(engine, kind, project)
    if prune:
        # An up running on this stack makes resources it records only once each is made: they would
        # look like this workspace's orphans.
        wait_while_locked(stack, "prune", "orphans", lock_wait or LockWait.default())
    config = instances_config(stack)
    projects = workspace_projects(config, Path(stack.workspace.work_dir))
    # The program knows its stack by the short name (`local` of `organization/local`), as the config file is named.
    short = short_name(stack)
    mark = marker_workspace(short, encryption_salt(Path(stack.workspace.work_dir), short))
    report = reconcile.reconcile(stack.name, mark, filters, config, projects, tracked_resources(stack))
    doomed = report.orphans + (report.retained if include_retained else [])
    if not (prune and doomed):
        return report
    _require_confirmation(confirm, f"drop {len(report.orphans)} orphans"
                          + (f" and {len(report.retained)} retained" if include_retained else "") + ": "
                          + ", ".join(f"{o.engine}/{o.instance}/{o.kind}/{o.engine_name}" for o in doomed))
    # While the question was open, an up may have adopted one (this workspace's, or another's that
    # re-marked it): drop only what a fresh scan, against the ledger as it is now, still finds so.
    fresh = reconcile.reconcile(stack.name, mark, filters, config, projects, tracked_resources(stack))
    still = {item.same_object for item in fresh.orphans + (fresh.retained if include_retained else [])}
    left = [GcError(engine=o.engine, instance=o.instance,
                    error=f"{o.engine}/{o.instance}/{o.kind}/{o.engine_name}: "
                          + ("no longer an orphan when confirmed (adopted or re-marked meanwhile)"
                             if o.instance in fresh.scanned else "could not be scanned again once confirmed")
                          + "; left as it is")
            for o in doomed if o.same_object not in still]
    pruned, errors = reconcile.prune(config, [o for o in doomed if o.same_object in still])
    return report.model_copy(update={"pruned": pruned, "errors": report.errors + left + errors})


__all__ = [
    "Aborted",
    "Ambiguous",
    "Destruction",
    "DevstackError",
    "Filters",
    "GcReport",
    "InvalidQuery",
    "NotFound",
    "Removal",
    "Resource",
    "ResourceDetail",
    "ResourcePage",
    "ScopeMismatch",
    "ServiceEnv",
    "Tracked",
    "collect_garbage",
    "destroy_stack",
    "list_resources",
    "open_stack",
    "remove_resource",
    "service_env",
    "show_resource",
    "tracked_resources",
]
