"""A scratch workspace for the imperative verbs: never the real examples/ or the local stack.

Each test gets a temporary directory with the program, one project whose
devstack.yaml carries comments and a declaration no test creates, a stack
on a temporary file backend whose workspace lists all six local engines,
and a `verb(...)` helper that runs the `devstack` command against it.
Whatever the state holds at the end is purged (dropped in the engines).
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pulumi import automation as auto

from components.models import instance_name
from devstack import cli, yamledit
from providers import registry
from providers.identity import CURRENT_NAMING, Identity
from providers.instances import SharedInstance
from tools.pulumi_env import ROOT

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


@pytest.fixture(scope="session")
def admin():
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


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
    from devstack.ledger import open_stack

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
