"""`devstack doctor`: which verbs of this workspace can work on this machine, and the fix for each that cannot.

    devstack doctor [--workspace W] [--json]

For every shared instance of the workspace: whether it answers at its
address, its version, whether the admin credential from the stack config
works, and so which kinds are usable. For the toolchain: whether the
pulumi CLI, the Python language host and the dynamic-provider plugin in
.devstack/bin are there at the pinned version (the `pulumi` SDK's release).
A broken instance degrades only that engine's verbs; each problem comes with
the exact command that fixes it. Exit status 0 only when everything the
workspace declares is usable (its instances, the kinds its projects declare,
valid declarations and the toolchain), 1 otherwise.

`--json` prints one object (devstack/schemas/doctor.schema.json): {"workspace",
"ok", "toolchain": [part],
"instances": [instance], "declarations": {"ok", "problems"}} where a part is
{"name", "ok", "found", "expected", "problem", "fix"} and an instance is
{"name", "engine", "address", "ok", "reachable", "version", "admin",
"kinds", "declaredKinds", "degradedVerbs", "problem", "fix", "notes", "adminMode"}; `admin` is
null when it could not be checked; `notes` are warnings that leave it usable; `adminMode` is how a
PostgreSQL admin acts ("superuser" or "CREATEDB+CREATEROLE"), empty elsewhere.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from components.models import WorkspaceConfig, instance_name
from components.validation import WorkspaceInvalid, validate
from components.yamlfile import load_yaml_if_usable, stack_config_file
from devstack.errors import DevstackError
from devstack.ledger import short_stack_name
from providers import registry
from providers.engine import NoAnswer, Probed, Rejected, Unfit
from providers.errors import first_line
from providers.instances import SharedInstance, instances_from_config, parse_object
from tools.engines.credentials import LOCAL_STACK
from tools.pulumi_env import BIN_DIR, ROOT

SETUP = "scripts/setup"
#: The plugin scripts/setup installs; an installed copy that differs is stale.
PLUGIN_SHIM = ROOT / "tools" / "pulumi-cli" / "pulumi-resource-pulumi-python"
#: Seconds a probe may wait for an instance to accept a connection or answer.
TIMEOUT = 3.0
#: Seconds the whole admin check of an instance may take: a server stopped with its connections open
#: (SIGSTOP) trips no timeout a client library does not set for itself, and the report must still come.
PROBE_LIMIT = 10.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def pinned_version() -> str:
    """The release the CLI, host and plugin must match: that of the installed `pulumi` SDK."""
    return "v" + importlib.metadata.version("pulumi")


# --- toolchain -----------------------------------------------------------------


@dataclass
class Part:
    """One part of the toolchain: found where expected, at the expected version."""

    name: str
    ok: bool
    found: str | None
    expected: str | None
    problem: str = ""
    fix: str = ""


def toolchain(bin_dir: Path = BIN_DIR) -> list[Part]:
    """Check the pulumi CLI, the language host and the dynamic-provider plugin in `bin_dir`."""
    return [_cli(bin_dir), _language_host(bin_dir), _plugin(bin_dir)]


def _cli(bin_dir: Path) -> Part:
    expected, path = pinned_version(), bin_dir / "pulumi"
    if not os.access(path, os.X_OK):
        return Part("pulumi CLI", False, None, expected, f"{path} is missing", SETUP)
    try:
        found = subprocess.run([str(path), "version"], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return Part("pulumi CLI", False, None, expected, f"`{path} version` failed: {err}", SETUP)
    ok = found == expected
    return Part("pulumi CLI", ok, found or None, expected, "" if ok else f"{path} is {found or 'unknown'}", "" if ok else SETUP)


def language_host_stamp() -> str:
    """What tools/pulumi-cli/build.sh writes beside the host it builds: the release and its source's digest."""
    source = ROOT / "tools" / "pulumi-cli" / "language-python" / "main.go"
    return f"{pinned_version()} {hashlib.sha256(source.read_bytes()).hexdigest()[:16]}"


def _language_host(bin_dir: Path) -> Part:
    expected = language_host_stamp()
    host, exec_script = bin_dir / "pulumi-language-python", bin_dir / "pulumi-language-python-exec"
    missing = [p.name for p in (host, exec_script) if not os.access(p, os.X_OK)]
    stamp = bin_dir / ".language-host-version"
    found = stamp.read_text().strip() if stamp.is_file() else None
    if missing:
        return Part("language host", False, found, expected, f"missing in {bin_dir}: {', '.join(missing)}", SETUP)
    ok = found == expected
    return Part("language host", ok, found, expected, "" if ok else f"{stamp} says {found or 'nothing'}", "" if ok else SETUP)


def _plugin(bin_dir: Path) -> Part:
    path = bin_dir / "pulumi-resource-pulumi-python"
    if not os.access(path, os.X_OK):
        return Part("dynamic-provider plugin", False, None, str(path), f"{path} is missing", SETUP)
    if path.read_bytes() != PLUGIN_SHIM.read_bytes():
        return Part("dynamic-provider plugin", False, str(path), str(PLUGIN_SHIM),
                    f"{path} differs from {PLUGIN_SHIM.relative_to(ROOT)}", SETUP)
    try:
        importlib.import_module("tools.provider_server")
    except ImportError as err:
        return Part("dynamic-provider plugin", False, str(path), str(path), f"tools.provider_server: {err}", SETUP)
    return Part("dynamic-provider plugin", True, str(path), str(path))


# --- instances -----------------------------------------------------------------


def _probe(instance: SharedInstance) -> Probed:
    """The engine's probe (providers.registry) in a thread of its own, abandoned after PROBE_LIMIT (it cannot
    be interrupted; a daemon, it never holds the report's exit). A probe returns the version, or a Probed."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["version"] = registry.engine(instance.engine).probe(instance)
        except BaseException as err:  # re-raised in the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, name=f"doctor-{instance.name}", daemon=True)
    thread.start()
    thread.join(PROBE_LIMIT)
    if thread.is_alive():
        raise NoAnswer(f"no answer within {PROBE_LIMIT:.0f}s")
    if "error" in outcome:
        raise outcome["error"]
    found = outcome["version"]
    return found if isinstance(found, Probed) else Probed(str(found))


@dataclass
class InstanceHealth:
    name: str
    engine: str
    address: str
    reachable: bool = False
    version: str | None = None
    admin: bool | None = None
    kinds: list[str] = field(default_factory=list)
    declared_kinds: list[str] = field(default_factory=list)
    problem: str = ""
    fix: str = ""
    notes: list[str] = field(default_factory=list)  # warnings: usable all the same
    admin_mode: str = ""  # how the admin may act, where the engine has more than one way (PostgreSQL)
    transport: str = "plaintext"  # or "tls", "tls unverified"

    @property
    def ok(self) -> bool:
        return self.reachable and self.admin is True and set(self.declared_kinds) <= set(self.kinds)

    def degraded_verbs(self) -> list[str]:
        """The verbs this instance's problems disable (none when it is fine)."""
        if self.ok:
            return []
        from devstack.declare import ALIASES

        verbs = [f"{alias} {add}|{rm}" for alias, (engines, _, add, rm) in ALIASES.items() if self.engine in engines]
        return verbs + [f"resource create {self.engine} <kind> --instance {self.name}"]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["declaredKinds"] = data.pop("declared_kinds")
        data["adminMode"] = data.pop("admin_mode")
        return {**data, "ok": self.ok, "degradedVerbs": self.degraded_verbs()}


def check_instance(instance: SharedInstance, declared: list[str], local_port: int | None,
                   local_stack: bool = True, stack: str = LOCAL_STACK) -> InstanceHealth:
    """Reach, version, admin login and usable kinds of one instance; never raises.

    `local_port` is the port of this machine's engine of that kind, so a
    loopback instance there is fixed by starting it; others by their owner.
    Starting it also writes its admin password, but into the local stack's
    config only (`local_stack`): another stack's (`stack`) is set by hand.
    """
    health = InstanceHealth(instance.name, instance.engine, instance.address, declared_kinds=sorted(set(declared)),
                            transport=_transport(instance))
    if instance.tls is None and instance.host not in LOOPBACK:
        health.notes.append(f"reached in plaintext: admin and project credentials cross the network in the clear "
                            f"(give shared.{instance.name} a tls: block, docs/tls.md)")
    elif instance.tls is not None and not instance.tls.verify:
        health.notes.append(f"TLS without verification: anything answering at {instance.address} is trusted "
                            f"(remove verify: false from shared.{instance.name}.tls and give its caFile)")
    local = instance.host in LOOPBACK and instance.port == local_port
    start = f"python -m tools.engines start {instance.engine}"
    credential_start = start if local and local_stack else None
    try:
        socket.create_connection((instance.host, instance.port), timeout=TIMEOUT).close()
    except OSError as err:
        health.problem = f"not reachable at {instance.address}: {err.strerror or err}"
        health.fix = start if local else f"start {instance.engine} at {instance.address} or fix devstack:workspace.shared.{instance.name}"
        return health
    health.reachable = True
    if instance.admin_password is None:
        health.problem = f"no admin password in the stack config (devstack:{instance.admin_secret})"
        health.fix = credential_start or (f"pulumi config set --secret devstack:{instance.admin_secret} --stack {stack} "
                                          "(the value on stdin)")
        return health
    try:
        probed = _probe(instance)
        health.version, health.notes, health.admin = probed.version, list(probed.notes), True
        health.admin_mode = probed.mode
    except Rejected as err:
        health.admin = False
        health.problem = f"the admin credential was refused: {err}"
        health.fix = credential_start or f"set devstack:{instance.admin_secret} to the admin password of {instance.address}"
        return health
    except Unfit as err:
        health.admin = False
        health.problem, health.fix = f"the admin logs in, but {err}", err.fix
        return health
    except ImportError as err:
        health.problem, health.fix = f"the {instance.engine} client library is missing: {err}", SETUP
        return health
    except (NoAnswer, TimeoutError) as err:  # stopped with its connections open, or overloaded
        health.problem = f"it accepts connections at {instance.address} but did not answer the admin check " \
                         f"({first_line(err)})"
        health.fix = (f"restart it: python -m tools.engines stop {instance.engine}, then start it" if local
                      else f"check {instance.engine} at {instance.address}: stopped, or overloaded")
        return health
    except Exception as err:  # any other failure of the probe: report it, never crash the doctor
        health.problem = f"the admin check failed: {type(err).__name__}: {_first_line(err)}"
        health.fix = start if local else f"check {instance.engine} at {instance.address}"
        return health
    return _kinds(health)


def _transport(instance: SharedInstance) -> str:
    if instance.tls is None:
        return "plaintext"
    return "tls" if instance.tls.verify else "tls unverified"


def _kinds(health: InstanceHealth) -> InstanceHealth:
    try:
        health.kinds = list(registry.kinds(health.engine))
    except ImportError as err:
        health.problem, health.fix = f"the {health.engine} provider cannot load: {err}", SETUP
        return health
    unknown = sorted(set(health.declared_kinds) - set(health.kinds))
    if unknown:
        health.problem = f"declared kinds the engine does not serve: {', '.join(unknown)}"
        health.fix = "`pulumi preview` shows where they are declared"
    return health


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0]


# --- the report ------------------------------------------------------------------


@dataclass
class Report:
    workspace: str
    toolchain: list[Part]
    instances: list[InstanceHealth]
    problems: list[str]  # of the declarations, as `pulumi preview` prints them

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.toolchain) and all(i.ok for i in self.instances) and not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace, "ok": self.ok,
            "toolchain": [asdict(p) for p in self.toolchain],
            "instances": [i.to_json() for i in self.instances],
            "declarations": {"ok": not self.problems, "problems": self.problems},
        }


def diagnose(config: dict[str, Any], root: Path, stack: str, bin_dir: Path = BIN_DIR,
             unreadable: frozenset[str] = frozenset(), plaintext: frozenset[str] | None = None) -> Report:
    """The doctor's report for a stack's config (keys `devstack:...`, secrets decrypted) and files under `root`.

    `unreadable`: keys set in the config whose (secret) values could not be read; they count as set.
    `plaintext`: the keys the config file holds unencrypted (None: not known)."""
    if config.get("devstack:workspace") is None:
        return Report(stack, toolchain(bin_dir), [], [f"{stack_config_file(root, short_stack_name(stack))}: "
                                                      "devstack:workspace is not set: the stack config names no "
                                                      "shared instances or projects (stacks/Pulumi.local.yaml has "
                                                      "an example)"])
    try:
        raw = parse_object(config.get("devstack:workspace")) or {}
    except ValueError as err:
        return Report(stack, toolchain(bin_dir), [], [f"{stack_config_file(root, short_stack_name(stack))}: "
                                                      f"devstack:workspace: {err}"])
    declared, problems = _declarations(
        raw, root, stack, lambda key: config.get(f"devstack:{key}") is not None or f"devstack:{key}" in unreadable,
        None if plaintext is None else lambda key: f"devstack:{key}" not in plaintext)
    try:
        name = WorkspaceConfig.model_validate(raw).name
        shared = instances_from_config(config)
    except (ValidationError, AttributeError, TypeError):  # malformed workspace: `problems` says where
        return Report(str(raw.get("name", stack)) if isinstance(raw, dict) else stack, toolchain(bin_dir), [],
                      problems or ["devstack:workspace is not a mapping with name, shared and projects"])
    instances = [check_instance(i, declared.get(n, []), _local_port(i.engine), local_stack=stack == LOCAL_STACK, stack=stack)
                 for n, i in shared.items()]
    return Report(name, toolchain(bin_dir), instances, problems)


def _declarations(raw: dict[str, Any], root: Path, stack: str, config_is_set: Callable[[str], bool],
                  config_is_secret: Callable[[str], bool] | None) -> tuple[dict[str, list[str]], list[str]]:
    """Kinds each instance's declarations use, and the problems `pulumi preview` would report."""
    declared: dict[str, list[str]] = {}
    for relative in (raw.get("projects") or [] if isinstance(raw, dict) else []):
        try:
            data = yaml.safe_load((root / relative).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # reported by validate below
        for item in (data or {}).get("resources") or [] if isinstance(data, dict) else []:
            if isinstance(item, dict) and isinstance(item.get("uses"), str):
                declared.setdefault(instance_name(item["uses"]), []).append(str(item.get("kind")))
    try:
        validate(raw, root, None, stack_config_file(root, short_stack_name(stack)), config_is_set=config_is_set,
                 config_is_secret=config_is_secret)
    except WorkspaceInvalid as invalid:
        return declared, [str(p) for p in invalid.problems]
    return declared, []


def _local_port(engine: str) -> int | None:
    try:
        from tools.engines import load

        return load(engine).port
    except Exception:  # no local engine of that kind (or its module is broken): no local fix to offer
        return None


# --- the verb ---------------------------------------------------------------------


def examine(workspace: str, backend_url: str | None, work_dir: Path, *, env: Mapping[str, str] | None = None) -> Report:
    """The doctor's report on the stack `workspace`: its config read through the CLI (or, with a broken CLI,
    from its file), its instances probed, its declarations validated, its history checked for plaintext
    secrets. DevstackError only when the stack cannot be read at all."""
    config, root, unreadable, url = _read_config(workspace, backend_url, work_dir, env=env)
    plain, secure = _plain_config(root, workspace)
    report = diagnose(config, root, workspace, unreadable=unreadable, plaintext=frozenset(plain))
    report.problems += plaintext_in_history(url, root, workspace, secure)
    return report


def _read_config(workspace: str, backend_url: str | None, work_dir: Path, *,
                 env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], Path, frozenset[str], str | None]:
    """The stack's config with secrets (through the CLI), its directory and its backend's URL; without a
    working CLI, the file's plain part, the names of the secret keys it could not decrypt and no URL."""
    from devstack.ledger import open_stack, stack_config

    try:
        stack = open_stack(workspace, backend_url, work_dir, env=env)
    except DevstackError:
        raise
    except Exception:  # the CLI itself is broken: the toolchain check says how to fix it
        plain, unreadable = _plain_config(work_dir, workspace)
        return plain, work_dir, unreadable, None
    return stack_config(stack), Path(stack.workspace.work_dir), frozenset(), stack.workspace.env_vars.get("PULUMI_BACKEND_URL")


def plaintext_in_history(backend_url: str | None, work_dir: Path, workspace: str, secure: frozenset[str]) -> list[str]:
    """Problems for secret config keys an update of a file backend's stack recorded in plaintext in its history.

    A plain `pulumi refresh` (or any command that does not run the program) goes through while an admin
    password is set without --secret, and the history entry it writes keeps the value for good, after the
    key has been set again as a secret.
    """
    from devstack.ledger import PROGRAM_PROJECT, file_backend_root

    root = file_backend_root(backend_url or "", work_dir)
    history = root / ".pulumi" / "history" / PROGRAM_PROJECT / short_stack_name(workspace) if root else None
    problems = []
    for entry in sorted(history.glob("*.history.json")) if history and history.is_dir() else []:
        try:
            recorded = json.loads(entry.read_text()).get("config") or {}
        except (OSError, ValueError, AttributeError):
            continue
        leaked = sorted(key for key, value in recorded.items()
                        if key in secure and not (isinstance(value, dict) and "secure" in value))
        if leaked:
            problems.append(f"{entry}: the stack's history records {', '.join(leaked)} in plaintext (an update ran "
                            f"while it was set without --secret): delete that file (`pulumi stack history` then "
                            f"lacks that entry) and take the password as seen")
    return problems


def _plain_config(work_dir: Path, workspace: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The config file's plain values, and the names of its `secure:` ones."""
    display = stack_config_file(work_dir, short_stack_name(workspace))
    parsed = load_yaml_if_usable(work_dir / display, display)
    data = parsed.data if parsed and isinstance(parsed.data, dict) else {}
    items = (data.get("config") or {}).items()
    secure = frozenset(k for k, v in items if isinstance(v, dict) and "secure" in v)
    return {k: v for k, v in items if k not in secure}, secure


def render(report: Report) -> str:
    """The report for a terminal: one line per part and instance, a fix under each problem."""
    mark = lambda ok: "ok  " if ok else "FAIL"  # noqa: E731
    lines = [f"workspace {report.workspace}: {'everything usable' if report.ok else 'problems found'}", "toolchain:"]
    for part in report.toolchain:
        lines.append(f"  {mark(part.ok)} {part.name:<24} {part.found or '-'}")
        lines += _problem(part.problem, part.fix)
    lines.append("instances:")
    for health in report.instances:
        admin = {True: "admin ok", False: "admin refused", None: "admin unchecked"}[health.admin]
        admin += f" ({health.admin_mode})" if health.admin_mode else ""
        lines.append(f"  {mark(health.ok)} {health.name:<10} {health.engine:<10} {health.address:<21} "
                     f"{admin:<15} {health.version or '-'}" + (f" over {health.transport}" if health.transport != "plaintext" else ""))
        lines.append(f"       kinds: {', '.join(health.kinds) or 'none'}"
                     + (f" (declared: {', '.join(health.declared_kinds)})" if health.declared_kinds else ""))
        lines += _problem(health.problem, health.fix)
        lines += [f"       note: {note}" for note in health.notes]
        if health.degraded_verbs():
            lines.append(f"       degraded: {'; '.join(health.degraded_verbs())}")
    lines.append(f"declarations: {'ok' if not report.problems else f'{len(report.problems)} problem(s)'}")
    lines += [f"  error: {problem}" for problem in report.problems]
    return "\n".join(lines)


def _problem(problem: str, fix: str) -> list[str]:
    return [f"       {problem}", f"       fix: {fix}"] if problem else []
