"""Fixtures for the ledger command and API: temporary backends, synthetic and real stacks, the CLI.

Every stack lives on a temporary file backend (or a temporary PostgreSQL
database) with its own passphrase, so nothing here touches the checkout's
`local` stack. The `devstack` console script runs as a subprocess with that
backend in its environment, exactly as a user would run it.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from devstack.ledger import SECRET_SIG, open_stack
from tools.pulumi_env import BIN_DIR, ROOT, scratch_env

DEVSTACK = Path(sys.executable).parent / "devstack"
PG_PORT = 25432
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
