"""Throwaway workspaces on the shared engines: one project, declared from a devstack.yaml snippet, a path or a
dict, brought up in a stack of its own, and purged afterwards. What a dead process left behind is reaped by
the next process's first use (`reap_dead`).

Each lives in `<root>/eph-<pid>-<hex>/` (root: $DEVSTACK_EPHEMERAL_DIR, else the checkout's
.devstack/ephemeral): `owner.json` (pid, host and the process's start time, written first), its own file
backend, passphrase and PULUMI_HOME, and a work dir with the program and the project's devstack.yaml. The
stack and its workspace take the directory's name; the project is `<name>-<hex>`, so two processes
(pytest-xdist workers, two test runs) never share a name in an engine. The engines and their admin
secrets come from a source workspace's config (default: the checkout's `local`; $DEVSTACK_WORKSPACE,
$DEVSTACK_WORK_DIR and $PULUMI_BACKEND_URL choose another).
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto
from pydantic import BaseModel, SecretStr

from components.models import instance_name, shared_ref
from components.templates import engine_template
from devstack.api import Environment, OnEvent, Run, Workspace, open_workspace
from devstack.errors import DevstackError, EngineError, InvalidQuery, NotFound
from devstack.models import Destruction, Model
from devstack.state import stack_config
from providers.instances import parse_object
from tools.pulumi_env import ROOT, STATE_DIR, scratch_env

log = logging.getLogger("devstack.ephemeral")

ROOT_VARIABLE = "DEVSTACK_EPHEMERAL_DIR"
PREFIX = "eph-"
OWNER_FILE = "owner.json"
#: The service the fixture adds when the project declares none: it imports every resource's usual variables.
DEFAULT_SERVICE = "test"


def ephemeral_root() -> Path:
    return Path(os.environ.get(ROOT_VARIABLE) or STATE_DIR / "ephemeral")


# --- the engines, from a source workspace ---------------------------------------------------------------


class Engines(Model):
    """The shared instances (addresses, admin users, their secrets' config keys) and the admin secrets."""

    shared: dict[str, dict[str, Any]]
    secrets: dict[str, SecretStr]  # `devstack:<adminSecret>` -> the password

    @classmethod
    def of_workspace(cls, stack: str | None = None, backend_url: str | None = None,
                     work_dir: Path | None = None) -> Engines:
        """Those of the workspace `stack` (default $DEVSTACK_WORKSPACE, else `local`), read once per process."""
        return _engines(stack or os.environ.get("DEVSTACK_WORKSPACE") or "local", backend_url,
                        Path(work_dir or os.environ.get("DEVSTACK_WORK_DIR") or ROOT))


@functools.lru_cache(maxsize=8)
def _engines(stack: str, backend_url: str | None, work_dir: Path) -> Engines:
    values = stack_config(open_workspace(stack, backend_url, work_dir).stack)
    try:
        shared = dict(parse_object(values.get("devstack:workspace")).get("shared") or {})
    except (ValueError, AttributeError) as err:
        raise InvalidQuery("read the engines of", f"workspace {stack!r}", f"devstack:workspace: {err}",
                           "`devstack doctor` shows the problem") from err
    keys = [f"devstack:{instance['adminSecret']}" for instance in shared.values()]
    missing = [key for key in keys if values.get(key) is None]
    if missing:
        raise NotFound("read the engines of", f"workspace {stack!r}", f"no {', '.join(missing)} in its config",
                       "run `python -m tools.engines start` (it sets the local ones), or `devstack doctor`")
    return Engines(shared=shared, secrets={key: SecretStr(str(values[key])) for key in keys})


# --- who owns a workspace directory ------------------------------------------------------------------


class Owner(BaseModel):
    """The process an ephemeral workspace belongs to: dead (same host, no such process) means reapable."""

    pid: int
    host: str
    started: str | None  # the process's start time (/proc), so a reused pid is not taken for the owner

    @classmethod
    def me(cls) -> Owner:
        return cls(pid=os.getpid(), host=socket.gethostname(), started=_process_start(os.getpid()))

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # another machine's: nothing here can tell
        started = _process_start(self.pid)
        if started is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return self.started is None
        return self.started in (None, started)


def _process_start(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_of(directory: Path) -> Owner:
    try:
        return Owner.model_validate_json((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        # Killed between its mkdir and its owner file: the pid is in the name.
        pid = directory.name.removeprefix(PREFIX).split("-", 1)[0]
        return Owner(pid=int(pid) if pid.isdigit() else 0, host=socket.gethostname(), started=None)


# --- the project ------------------------------------------------------------------------------------


def project_data(project: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The project as a dict: from a dict, a path to a devstack.yaml, or the YAML text of one."""
    if isinstance(project, Mapping):
        data: Any = dict(project)
    else:
        text = project.read_text(encoding="utf-8") if isinstance(project, Path) else project
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise InvalidQuery("declare", "the ephemeral project", f"not YAML: {err}") from None
    if not isinstance(data, dict):
        raise InvalidQuery("declare", "the ephemeral project", "it is not a mapping",
                           "give a devstack.yaml's text, its path, or a dict with resources and services")
    return data


def _declare(data: dict[str, Any], name: str, shared: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The project file: `data` under `name`, with a service that imports every resource when it has none."""
    declared = {"apiVersion": "devstack/v1", "kind": "Project", **data, "name": name}
    resources = declared.get("resources") or []
    if not declared.get("services") and resources:
        declared["services"] = {DEFAULT_SERVICE: {"env": {"import": _imports(resources, name, shared)}}}
    return declared


def _imports(resources: list[dict[str, Any]], project: str, shared: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    """Each resource's usual variables (its kind's `vars`), those an earlier resource took left out."""
    imports, taken = [], set()
    for entry in resources:
        instance = instance_name(str(entry.get("uses")))
        engine = (shared.get(instance) or {}).get("engine")
        kind = engine_template(engine).kinds.get(entry.get("kind")) if engine else None
        names = [var for var in (kind.vars if kind else {}) if var not in taken]
        if names:
            source = f"{shared_ref(instance)}/{entry['kind']}/{entry.get('name') or project}"
            imports.append({"from": source, "vars": names})
            taken.update(names)
    return imports


# --- one ephemeral workspace ------------------------------------------------------------------------


class Ephemeral:
    """A throwaway workspace holding one project: `start()` (or `with`) brings it up, `close()` purges it.

    After start: `workspace` (devstack.api.Workspace), `project` (its unique name), `service`, `env` (the
    service's Environment, real credentials), `setup` (the up's Run)."""

    def __init__(self, project: str | Path | Mapping[str, Any], *, service: str | None = None,
                 engines: Engines | None = None, root: Path | None = None, on_event: OnEvent | None = None) -> None:
        self.data = project_data(project)
        self.service = service
        self.engines = engines
        self.root = Path(root or ephemeral_root())
        self.on_event = on_event
        self.directory: Path | None = None
        self.workspace: Workspace | None = None
        self.project = f"{str(self.data.get('name') or 'eph')[:24]}-{secrets.token_hex(4)}"
        self.env: Environment | None = None
        self.setup: Run | None = None
        #: Seconds each phase took: reap, open (stack made), config, up, env; then teardown.
        self.timings: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"Ephemeral({self.project!r}, directory={str(self.directory)!r})"

    def __enter__(self) -> Ephemeral:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def start(self) -> Ephemeral:
        with self._timed("reap"):
            reap_dead(self.root, once=True)
        engines = self.engines or Engines.of_workspace()
        self.directory = _new_directory(self.root)
        try:
            with self._timed("open"):
                self.workspace = _open(self.directory, create=True)
            declared = _declare(self.data, self.project, engines.shared)
            with self._timed("config"):
                _write_project(self.workspace, declared, engines)
            with self._timed("up"):
                self.setup = self.workspace.up(on_event=self.on_event)
            services = sorted(declared.get("services") or {})
            self.service = self.service or (services[0] if len(services) == 1 else None)
            if self.service is None and services:
                raise InvalidQuery("pick", "the service", f"the project declares {len(services)}: "
                                   f"{', '.join(services)}", "name one (service=...)")
            if self.service is not None:
                with self._timed("env"):
                    self.env = self.workspace.env(self.project, self.service)
        except BaseException:
            self.close()
            raise
        return self

    @contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.timings[phase] = round(time.monotonic() - started, 3)

    def close(self) -> Destruction | None:
        """Drop every resource of the project in its engine, then remove the directory (stack included)."""
        if self.directory is None:
            return None
        done = None
        with self._timed("teardown"):
            if self.workspace is not None:
                done = self.workspace.destroy(purge_data=True, project=self.project)
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        return done


def _new_directory(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    directory = root / f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    directory.mkdir(mode=0o700)
    (directory / OWNER_FILE).write_text(Owner.me().model_dump_json())
    (directory / "work").mkdir()
    shutil.copyfile(ROOT / "__main__.py", directory / "work" / "__main__.py")
    return directory


def _open(directory: Path, create: bool = False) -> Workspace:
    return open_workspace(directory.name, work_dir=directory / "work", env=scratch_env(directory), create=create)


def _write_project(workspace: Workspace, declared: dict[str, Any], engines: Engines) -> None:
    relative = f"{declared['name']}/devstack.yaml"
    path = workspace.work_dir / relative
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(declared, sort_keys=False))
    config = {"name": workspace.name, "shared": engines.shared, "projects": [relative]}
    values = {"devstack:workspace": auto.ConfigValue(json.dumps(config))}
    values.update({key: auto.ConfigValue(value.get_secret_value(), secret=True) for key, value in engines.secrets.items()})
    workspace.stack.set_all_config(values)


# --- reaping what dead processes left ---------------------------------------------------------------


_reaped: set[Path] = set()


def reap_dead(root: Path | None = None, *, once: bool = False) -> list[str]:
    """Purge every ephemeral workspace under `root` whose process is dead (on this host); the names reaped.

    `once`: only on this process's first call for `root`. A workspace another process is reaping (its lock
    held) is left to it; one that cannot be purged now (an engine down) stays for the next call."""
    root = Path(root or ephemeral_root())
    if once and root in _reaped:
        return []
    _reaped.add(root)
    reaped = []
    for directory in sorted(root.glob(f"{PREFIX}*")) if root.is_dir() else []:
        if directory.is_dir() and not _owner_of(directory).alive():
            try:
                if reap(directory):
                    reaped.append(directory.name)
            except DevstackError as err:
                log.warning("cannot reap the ephemeral workspace %s: %s", directory.name, err)
    return reaped


def reap(directory: Path) -> bool:
    """Purge one dead process's workspace: its ledger's resources, then what a killed up made without
    recording it (gc, retained ones included), then the directory. False when another process reaps it."""
    try:
        lock = open(directory / ".reap.lock", "a")
    except OSError:  # another process reaped it meanwhile
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not directory.is_dir():
            return False
        try:
            workspace = _open(directory)
        except NotFound:  # killed before its stack was made: nothing of it in any engine
            workspace = None
        if workspace is not None and (directory / "work" / f"Pulumi.{directory.name}.yaml").exists():
            started = time.monotonic()
            _purge(workspace)
            log.info("reaped %s in %.1fs", directory.name, time.monotonic() - started)
        shutil.rmtree(directory, ignore_errors=True)
    return True


def _purge(workspace: Workspace) -> None:
    try:
        workspace.destroy(purge_data=True)
    except EngineError:  # a killed run's lock or pending operations: recover, then once more
        workspace.recover()
        workspace.destroy(purge_data=True)
    if workspace.stack.get_all_config().get("devstack:workspace") is not None:
        workspace.gc(prune=True, include_retained=True)
