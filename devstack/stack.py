"""Opening a stack and running the pulumi CLI on it: the lowest devstack layer, over tools.pulumi_env.

Everything goes through the Pulumi automation API and the CLI built into
.devstack/bin, in the offline environment of tools/pulumi_env.py; failures
raise the typed errors of `devstack.errors`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from itertools import takewhile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import yaml
from pulumi import automation as auto

from devstack.errors import EngineError, IdentityConflict, InvalidQuery, NotFound
from providers import errors as provider_errors
from tools.pulumi_env import ROOT, STATE_DIR, cancelled_gracefully_on_interrupt, pulumi_env

#: Variables a user may set (e.g. after `eval "$(python -m tools.pulumi_env)"`)
#: that take precedence over the checkout's defaults.
USER_OVERRIDES = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_HOME")


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


def _is_provider_error(name: str) -> bool:
    raised = getattr(provider_errors, name, None)
    return isinstance(raised, type) and issubclass(raised, provider_errors.DevstackError)


def command_error(verb: str, what: str, err: auto.errors.CommandError) -> EngineError:
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
    return EngineError(verb, what, "\n".join(line.removeprefix("error: ") for line in cli_error(err).splitlines()))


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


def gracefully(command: Callable[[], Any]) -> Any:
    """One pulumi command that a Ctrl-C lets cancel (cancelled_gracefully_on_interrupt)."""
    with cancelled_gracefully_on_interrupt():
        return command()


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
