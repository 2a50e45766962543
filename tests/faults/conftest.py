"""Fixtures of the fault suite: the e2e fixtures, fresh names per test, and a sweep afterwards.

Every test names its projects `<prefix>-<something>` with a fresh prefix;
whatever a test leaves in the engines (a killed run, a failed assertion) is
dropped afterwards by `bench.sweep`, through the admin clients.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from bench.sweep import sweep
from bench.workload import MIX  # instance -> (engine, kind): one resource per engine
from tests.e2e.conftest import admin, changes, local_workspace, offline_env, project_dir, pulumi_command  # noqa: F401
from tools.pulumi_env import ROOT



@pytest.fixture(scope="session")
def shared() -> dict[str, dict[str, Any]]:
    """The shared instances of the local stack: addresses and admin secret keys, no secrets."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return config["devstack:workspace"]["shared"]


@pytest.fixture
def prefix(admin, shared):  # noqa: F811 - the e2e fixture, imported above
    """A fresh name prefix; afterwards every engine is swept of what carries it."""
    value = f"ft{secrets.token_hex(3)}"
    yield value
    sweep(value, shared, admin)


def write_project(work: Path, name: str, resources: list[dict]) -> str:
    """(Re)write a project's devstack.yaml under `work`; returns its workspace-relative path."""
    path = work / name / "devstack.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "devstack/v1", "kind": "Project", "name": name,
                                    "resources": resources}))
    return f"{name}/devstack.yaml"


#: The tenant resources a project of `every_engine()` has: one per engine, and its NATS account (implied).
PER_PROJECT = len(MIX) + 1


def every_engine(purge: bool = True) -> list[dict]:
    """One declaration per engine, purged on removal so a destroy leaves nothing."""
    return [{"uses": instance, "kind": kind, "purge": purge} for instance, (_e, kind) in MIX.items()]


def configure(stack: auto.Stack, files: list[str], shared: dict, credentials: dict, name: str = "faults",
              adopt: dict[str, str] | None = None) -> None:
    """Set the workspace (these projects on these instances, `adopt` if given) and the admin secrets on `stack`."""
    workspace = {"name": name, "shared": shared, "projects": files, **({"adopt": adopt} if adopt else {})}
    values = {"devstack:workspace": auto.ConfigValue(json.dumps(workspace))}
    for instance in shared.values():
        values[f"devstack:{instance['adminSecret']}"] = auto.ConfigValue(credentials[instance["engine"]].password,
                                                                         secret=True)
    stack.set_all_config(values)


def new_stack(work: Path, env: dict[str, str], command: auto.PulumiCommand, name: str = "faults") -> auto.Stack:
    return auto.Stack.create(name, local_workspace(work, env, command))


def checkpoint(env: dict[str, str], stack: str, project: str = "devstack") -> dict[str, Any]:
    """The stack's latest checkpoint as the file backend keeps it."""
    backend = Path(env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    text = (backend / ".pulumi" / "stacks" / project / f"{stack}.json").read_text()
    return json.loads(text)["checkpoint"]["latest"]


#: How the state marks an encrypted value (Pulumi's secret signature).
SECRET_SIG = "4dabf18193072939515e22adb298388d"


def tenants(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Dynamic (tenant) resources of a checkpoint: urn -> their outputs, secrets as "<secret>".

    Every checkpoint write encrypts secrets afresh (a new nonce), so two
    checkpoints with the same values differ in ciphertext only.
    """
    return {r["urn"]: _mask(r.get("outputs", {})) for r in state.get("resources", [])
            if r["type"].startswith("pulumi-python:dynamic")}


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return "<secret>" if SECRET_SIG in value else {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value
