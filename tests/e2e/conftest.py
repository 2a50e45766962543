"""Fixtures for end-to-end runs of the real pulumi CLI we built, on a temporary file backend."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from pulumi import automation as auto

from tools.pulumi_env import BIN_DIR, ROOT, STATE_DIR, scratch_env


@pytest.fixture(scope="session")
def pulumi_command() -> auto.PulumiCommand:
    """The pinned CLI from .devstack/bin; fails loudly when it was not built."""
    if not (BIN_DIR / "pulumi").exists():
        pytest.fail(f"{BIN_DIR / 'pulumi'} is missing: run scripts/setup to build the pulumi CLI")
    return auto.PulumiCommand(root=str(STATE_DIR))


@pytest.fixture(scope="session")
def admin():
    """Admin credentials of the local engines, as `tools.engines start` set them up."""
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


@pytest.fixture
def offline_env(tmp_path: Path) -> dict[str, str]:
    """An offline environment whose backend and passphrase live in tmp_path."""
    return scratch_env(tmp_path)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A copy of the program (not of the stacks) whose workspace files the test writes."""
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(ROOT / "__main__.py", work / "__main__.py")
    return work


def local_workspace(work: Path, env: dict[str, str], command: auto.PulumiCommand) -> auto.LocalWorkspace:
    settings = auto.ProjectSettings(
        name="devstack",
        runtime=auto.ProjectRuntimeInfo(name="python", options={"virtualenv": str(ROOT / ".venv")}),
    )
    return auto.LocalWorkspace(
        work_dir=str(work), project_settings=settings, env_vars=env, pulumi_command=command,
    )


def e2e_stack(work: Path, env: dict[str, str], command: auto.PulumiCommand, shared: dict[str, dict],
              projects: list[str], secrets: dict[str, str]) -> auto.Stack:
    """A new stack `e2e` of the program in `work`: workspace `e2e` of `shared` instances and `projects`,
    each admin secret (config key -> value) set as a secret."""
    stack = auto.Stack.create("e2e", local_workspace(work, env, command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": "e2e", "shared": shared,
                                                                         "projects": projects})))
    for key, value in secrets.items():
        stack.set_config(f"devstack:{key}", auto.ConfigValue(value, secret=True))
    return stack


def write_project(work: Path, name: str, resources: list[dict], services: dict | None = None) -> str:
    """(Re)write a project's devstack.yaml under `work`; returns its workspace-relative path."""
    path = work / name / "devstack.yaml"
    path.parent.mkdir(exist_ok=True)
    document = {"apiVersion": "devstack/v1", "kind": "Project", "name": name, "resources": resources}
    path.write_text(yaml.safe_dump({**document, "services": services} if services else document))
    return f"{name}/devstack.yaml"


def explicit_name(project: str, name: str) -> str:
    """`<name>-<token>`, a resource `name:` unique to the run of project `<...>-<token>`: an explicit name
    is the engine identifier itself, shared by every project on an instance (spec 27), so a fixed one
    would collide with other tests, their leftovers and parallel runs."""
    return f"{name}-{project.rsplit('-', 1)[1]}"


def changes(result) -> dict[str, int]:
    """Non-trivial operations of an up, refresh or preview result."""
    counts = result.change_summary if hasattr(result, "change_summary") else result.summary.resource_changes
    return {str(getattr(op, "value", op)): n for op, n in (counts or {}).items() if str(getattr(op, "value", op)) != "same"}


def stored_state(env: dict[str, str], stack: str) -> str:
    """The stack's checkpoint file exactly as the file backend keeps it on disk."""
    backend = Path(env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    return (backend / ".pulumi" / "stacks" / "devstack" / f"{stack}.json").read_text()
