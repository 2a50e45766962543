"""Fixtures for the `devstack` command and its modules: temporary backends, synthetic and real stacks,
a scratch workspace for the imperative verbs, the CLI.

Every stack lives on a temporary file backend (or a temporary PostgreSQL
database) with its own passphrase, so nothing here touches the checkout's
`local` stack or the real examples/. The `devstack` console script runs as a
subprocess with that backend in its environment, exactly as a user would run
it; the imperative verbs' `scratch.verb(...)` runs it in-process on a
temporary directory with the program, one project whose devstack.yaml
carries comments and a declaration no test creates, and a stack whose
workspace lists all six local engines. Whatever a scratch stack holds at the
end is purged (dropped in the engines).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from psycopg import sql
from pulumi import automation as auto

from components.models import WorkspaceConfig, instance_name
from devstack import cli, yamledit
from devstack.stack import open_stack
from devstack.state import SECRET_SIG
from devstack.workspace import Workspace
from providers import registry
from providers.identity import CURRENT_NAMING, Identity
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.nats.account import Account
from tests.conftest import configured
from tests.devstack.stacks import pg, redis_client
from tools.engines.ports import PORTS
from tools.pulumi_env import BIN_DIR, ROOT, scratch_env

DEVSTACK = Path(sys.executable).parent / "devstack"
PG_PORT = PORTS["postgres"]
#: Every (engine, kind) the providers serve, with the instance name the local workspace gives the engine.
KINDS = [
    ("postgres", "pg", "database"), ("postgres", "pg", "role"), ("postgres", "pg", "user"),
    ("redis", "cache", "redis_index"), ("redis", "cache", "acl_user"),
    ("minio", "objects", "bucket"), ("minio", "objects", "lifecycle"), ("minio", "objects", "access_key"),
    ("localstack", "aws", "bucket"), ("localstack", "aws", "queue"), ("localstack", "aws", "topic"),
    ("localstack", "aws", "stream"), ("localstack", "aws", "table"),
    ("nats", "events", "stream"), ("nats", "events", "consumer"), ("nats", "events", "kv"),
    ("kafka", "kafka", "topic"), ("kafka", "kafka", "acl"),
]


@pytest.fixture(scope="session", autouse=True)
def pulumi_cli() -> None:
    if not (BIN_DIR / "pulumi").exists():
        pytest.fail(f"{BIN_DIR / 'pulumi'} is missing: run scripts/setup to build the pulumi CLI")


@pytest.fixture(scope="session")
def admin():
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


@pytest.fixture(scope="session")
def local_shared() -> dict[str, Any]:
    """The shared instances of the checkout's local workspace (addresses, admin users, secret keys)."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return config["devstack:workspace"]["shared"]


def make_env(base: Path) -> dict[str, str]:
    """An offline environment whose file backend, passphrase and PULUMI_HOME live under `base`."""
    return scratch_env(base)


@dataclass
class Sandbox:
    """A stack's environment and work dir, plus the `devstack` command run against them."""

    env: dict[str, str]
    work: Path

    def open(self, name: str, create: bool = False) -> auto.Stack:
        return open_stack(name, work_dir=self.work, env=self.env, create=create)

    def cli(self, *args: str, stdin: str | None = None, timeout: float = 300,
            work: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        """`devstack ARGS --work-dir WORK` with this backend in the environment (the user's way), run in
        `cwd` (default: WORK)."""
        import os

        env = {**os.environ, **self.env}
        env.pop("PULUMI_CONFIG_PASSPHRASE", None)
        work = work or self.work
        return subprocess.run([str(DEVSTACK), *args, "--work-dir", str(work)], env=env, cwd=cwd or work,
                              input=stdin, capture_output=True, text=True, timeout=timeout)

    def cli_json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    work = tmp_path / "work"
    work.mkdir()
    (work / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    return Sandbox(env=make_env(tmp_path / "pulumi"), work=work)


# --- synthetic states ---------------------------------------------------------------


def secret(value: Any) -> dict[str, str]:
    """A secret value as `pulumi stack import` takes it (plaintext, encrypted on import)."""
    return {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "plaintext": json.dumps(value)}


def synthetic_resources(stack: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """State entries for tenant resources shaped as the components register them.

    Each row holds engine, instance, kind, name, owner and optionally params,
    attributes (outputs), secrets (secret outputs), purge, credentials.
    """
    prefix = f"urn:pulumi:{stack}::devstack::"
    provider = f"{prefix}pulumi:providers:pulumi-python::default"
    workspace = f"{prefix}devstack:index:Workspace::{stack}"
    owners = sorted({r["owner"] for r in rows})
    entries = [
        {"urn": f"{prefix}pulumi:pulumi:Stack::devstack-{stack}", "custom": False, "type": "pulumi:pulumi:Stack"},
        {"urn": provider, "custom": True, "id": "00000000-0000-0000-0000-000000000001",
         "type": "pulumi:providers:pulumi-python", "inputs": {}, "outputs": {}},
        {"urn": workspace, "custom": False, "type": "devstack:index:Workspace",
         "parent": f"{prefix}pulumi:pulumi:Stack::devstack-{stack}"},
    ]
    entries += [{"urn": f"{prefix}devstack:index:Workspace$devstack:index:Project::{o}", "custom": False,
                 "type": "devstack:index:Project", "parent": workspace} for o in owners]
    for i, r in enumerate(rows):
        entries.append(_tenant_entry(prefix, provider, stack, i, r))
    return entries


def _tenant_entry(prefix: str, provider: str, stack: str, i: int, r: dict[str, Any]) -> dict[str, Any]:
    engine, kind = r["engine"], r["kind"]
    inputs = {"engine": engine, "instance": r["instance"], "kind": kind, "name": r["name"], "owner": r["owner"],
              "params": r.get("params", {}), "credentials": r.get("credentials", "predictable"),
              "purge": r.get("purge", False), "stack": r.get("stack", stack)}
    outputs = {**inputs, **r.get("attributes", {}), **{k: secret(v) for k, v in r.get("secrets", {}).items()}}
    rtype = f"pulumi-python:dynamic/{engine}:{kind}"
    key = f"{r['instance']}/{kind}/{r['name']}"
    return {
        "urn": f"{prefix}devstack:index:Workspace$devstack:index:Project${rtype}::{r['owner']}/{key}",
        "custom": True, "id": f"{engine}/{key}@{r['owner']}", "type": rtype, "inputs": inputs, "outputs": outputs,
        "parent": f"{prefix}devstack:index:Workspace$devstack:index:Project::{r['owner']}",
        "provider": f"{provider}::00000000-0000-0000-0000-000000000001",
        "retainOnDelete": not r.get("purge", False),
        "created": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000000001Z",
        "modified": f"2026-02-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000000001Z",
        "dependencies": r.get("dependencies", []),
    }


def import_state(stack: auto.Stack, entries: list[dict[str, Any]]) -> None:
    """Replace the stack's state with `entries` (the stack keeps its own secrets provider)."""
    current = stack.export_stack()
    deployment = {**(current.deployment or {}), "resources": entries}
    stack.import_stack(auto.Deployment(version=current.version or 3, deployment=deployment))


def token() -> str:
    return secrets.token_hex(3)


# --- small ledgers shared by several modules' tests --------------------------------------------------


def box_ids(sandbox: Sandbox, workspace: str) -> set[str]:
    return {r["id"] for r in sandbox.cli_json("resource", "list", "-w", workspace)["items"]}


def tracking_alpha(tmp_path: Path, workspace: dict) -> Sandbox:
    """A sandbox whose stack `w` tracks project alpha's PostgreSQL database, with this `devstack:workspace`."""
    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("w", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": "alpha", "owner": "alpha"}]
    import_state(stack, synthetic_resources("w", rows))
    shared = {"pg": {"engine": "postgres", "host": "127.0.0.1", "port": PORTS["postgres"], "adminUser": "devstack_admin",
                     "adminSecret": "pgAdmin"}}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": "w", "shared": shared, **workspace})))
    stack.set_config("devstack:pgAdmin", auto.ConfigValue("x", secret=True))
    return sandbox


PROJECTS, PER_PROJECT = 10, 30


def synthetic_rows() -> list[dict]:
    """10 projects x 30 resources cycling through every (engine, kind); every 5th has a secret."""
    made = []
    for p in range(PROJECTS):
        for j in range(PER_PROJECT):
            engine, instance, kind = KINDS[(p + j) % len(KINDS)]
            made.append({
                "engine": engine, "instance": instance, "kind": kind, "name": f"n{j:02d}", "owner": f"p{p:02d}",
                "attributes": {"host": "127.0.0.1", "port": 1000 + j},
                "secrets": {"password": f"pw-{p}-{j}"} if j % 5 == 0 else {},
                "purge": j % 7 == 0,
            })
    # Two resources share the declaration name "twin" (different projects): "twin" alone is ambiguous.
    made += [{"engine": "postgres", "instance": "pg", "kind": "role", "name": "twin", "owner": o} for o in ("p00", "p01")]
    return made


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[Sandbox, object]:
    base = tmp_path_factory.mktemp("synthetic")
    work = base / "work"
    work.mkdir()
    box = Sandbox(env=make_env(base / "pulumi"), work=work)
    stack = box.open("syn", create=True)
    import_state(stack, synthetic_resources("syn", synthetic_rows()))
    return box, stack


@pytest.fixture
def names(admin, local_shared):
    """Two fresh project names; whatever a test leaves in the engines is removed afterwards."""
    suffix = token()
    projects = [f"la-{suffix}", f"lb-{suffix}"]
    yield projects
    with pg(admin) as conn:
        for project in projects:
            ident = sql.Identifier(project.replace("-", "_"))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
    with redis_client(admin, local_shared) as client:
        for project in projects:
            client.acl_deluser(project)
            client.hdel("devstack:acl-owners", project)

    accounts = configured(Account(), {"shared": {"events": local_shared["events"]}}, {"nats": admin["nats"].password})
    for project in projects:  # the account, its streams with it
        inputs = {"engine": "nats", "instance": "events", "kind": "account", "name": project, "owner": project,
                  "params": {}, "purge": True, "stack": ""}
        if not is_stale(accounts.read("id", inputs).outs):
            accounts.delete("id", inputs)


# --- a scratch workspace for the imperative verbs ------------------------------------------------

STACK = "imperative"
#: Instance name in the scratch workspace per engine (as in stacks/Pulumi.local.yaml).
INSTANCES = {"postgres": "pg", "redis": "cache", "minio": "objects", "localstack": "aws", "nats": "events", "kafka": "kafka"}


def project_text(name: str) -> str:
    """A devstack.yaml written by hand: comments, a blank line, a trailer after the list."""
    return f"""# A scratch project of the imperative-verb tests.
apiVersion: devstack/v1
kind: Project
name: {name}   # lowercase, prefixes every engine resource

resources:
  # Declared by hand and never applied: a targeted verb must leave it alone.
  - uses: aws
    kind: queue
    name: by-hand   # keep this comment
# Trailing comment: stays below the list.
"""


def shared_config(admin, ports: dict[str, int] | None = None) -> dict:
    """The six local engines as a workspace's `shared` block; `ports` overrides some ports."""
    from tools.engines import load

    ports = ports or {}
    return {
        instance: {"engine": engine, "host": "127.0.0.1", "port": ports.get(engine, load(engine).port),
                   "adminUser": admin[engine].user, "adminSecret": f"{instance}Admin"}
        for engine, instance in INSTANCES.items()
    }


@dataclass
class Scratch:
    work: Path
    stack: auto.Stack
    project: str
    file: Path
    capsys: pytest.CaptureFixture
    admin: dict

    def verb(self, *argv: str, yes: bool = True) -> tuple[int, str, str]:
        """Run `devstack <argv>` on this workspace; (exit code, stdout, stderr)."""
        self.capsys.readouterr()
        code = cli.main([*argv, "--workspace", STACK, "--work-dir", str(self.work)] + (["--yes"] if yes else []))
        out, err = self.capsys.readouterr()
        return code, out, err

    def instance(self, engine: str) -> SharedInstance:
        raw = shared_config(self.admin)[INSTANCES[engine]]
        return SharedInstance.model_validate({**raw, "name": INSTANCES[engine], "admin_password": self.admin[engine].password})

    def observe(self, engine: str, kind: str, name: str):
        """The live resource as its provider sees it (None when absent)."""
        provider = registry.provider_class(engine, kind)()
        ident = Identity(engine, INSTANCES[engine], kind, name, self.project, naming=CURRENT_NAMING)
        return provider.observe(self.instance(engine), ident)

    def state_keys(self) -> set[str]:
        """`<instance>/<kind>/<name>` of every tenant resource in the stack's state."""
        resources = (self.stack.export_stack().deployment or {}).get("resources") or []
        return {r["urn"].split("::")[-1].split("/", 1)[1] for r in resources if "dynamic/" in r["type"]}

    def set_workspace(self, shared: dict, projects: list[str] | None = None) -> None:
        self.stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
            "name": STACK, "shared": shared, "projects": projects or [f"{self.project}/devstack.yaml"]})))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch, capsys, admin) -> Scratch:
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("imperative-test-passphrase")
    (tmp_path / "state").mkdir()
    monkeypatch.setenv("PULUMI_BACKEND_URL", (tmp_path / "state").as_uri())
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(passphrase))
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "__main__.py", work / "__main__.py")
    project = f"imp-{secrets.token_hex(3)}"
    file = work / project / "devstack.yaml"
    file.parent.mkdir()
    file.write_text(project_text(project))
    stack = open_stack(STACK, work_dir=work, create=True)
    config = {f"devstack:{instance}Admin": auto.ConfigValue(admin[engine].password, secret=True)
              for engine, instance in INSTANCES.items()}
    stack.set_all_config(config)
    scratch = Scratch(work, stack, project, file, capsys, admin)
    scratch.set_workspace(shared_config(admin))
    yield scratch
    _purge_everything(scratch)


def _purge_everything(scratch: Scratch) -> None:
    """Drop whatever the state holds: mark its entries `purge: true`, drop the rest, up, destroy."""
    held = scratch.state_keys()
    if not held:
        return
    text = scratch.file.read_text()
    data = yaml.safe_load(text)
    for index in reversed(range(len(data.get("resources") or []))):
        entry = data["resources"][index]
        key = f"{instance_name(entry['uses'])}/{entry['kind']}/{entry.get('name') or scratch.project}"
        text = yamledit.set_entry_field(text, index, "purge", True) if key in held else yamledit.remove_entry(text, index)
    scratch.file.write_text(text)
    scratch.stack.up()
    scratch.stack.destroy()


def fresh_name() -> str:
    return f"r{secrets.token_hex(3)}"


def entry_text(name: str | None, instance: str, kind: str, params: dict | None = None) -> str:
    """The lines the verb appends, in the file's own indentation."""
    lines = f"  - uses: workspace.shared.{instance}\n    kind: {kind}\n" + (f"    name: {name}\n" if name else "")
    if params:
        lines += "    params: {" + ", ".join(f"{k}: {yaml.safe_dump(v).splitlines()[0]}" for k, v in params.items()) + "}\n"
    return lines


def instance(engine: str, port: int) -> dict:
    return {"engine": engine, "port": port, "adminUser": "a", "adminSecret": "s"}


def workspace(tmp_path: Path, shared: dict, projects: dict[str, str]) -> Workspace:
    """A Workspace over files in tmp_path; the stack is a stand-in that only knows its names and that
    every instance's admin secret (`s`) is set."""
    for relative, name in projects.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(f"apiVersion: devstack/v1\nkind: Project\nname: {name}\n")
    raw = {"name": "ws", "shared": shared, "projects": list(projects)}
    stack = SimpleNamespace(name="dev", workspace=SimpleNamespace(project_settings=lambda: SimpleNamespace(name="devstack")),
                            get_all_config=lambda: {"devstack:s": SimpleNamespace(value="set")})
    return Workspace(stack=stack, root=tmp_path, raw=raw, config=WorkspaceConfig.model_validate(raw))


@pytest.fixture
def ws(tmp_path):
    shared = {"pg": instance("postgres", 1), "objects": instance("minio", 2), "aws": instance("localstack", 3),
              "pg2": instance("postgres", 4)}
    return workspace(tmp_path, shared, {"shop/devstack.yaml": "shop", "blog/devstack.yaml": "blog"})
