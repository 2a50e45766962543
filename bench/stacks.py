"""Pulumi stacks for the benchmark: the real CLI, the automation API, a temporary file backend."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pulumi import automation as auto

from bench import workload as wl
from tools.pulumi_env import BIN_DIR, ROOT, STATE_DIR, scratch_env

STACK = "bench"
#: The checkout's packages the program imports, linked beside it.
PROGRAM_PACKAGES = ("components", "providers")
#: Extra environment for every pulumi run of the benchmark (`--env KEY=VALUE`), ours and the floor alike.
EXTRA_ENV: dict[str, str] = {}


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary directory for backends and programs, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="devstack-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def offline_env(base: Path) -> dict[str, str]:
    """The offline environment with its file backend, passphrase and PULUMI_HOME inside `base`."""
    return {**scratch_env(base), **EXTRA_ENV}


def command() -> auto.PulumiCommand:
    if not (BIN_DIR / "pulumi").exists():
        raise SystemExit(f"{BIN_DIR / 'pulumi'} is missing: run scripts/setup to build the pulumi CLI")
    return auto.PulumiCommand(root=str(STATE_DIR))


def local_stack(work: Path, env: dict[str, str], project: str = "devstack") -> auto.Stack:
    """A fresh stack `bench` of the program in `work` (run with the checkout's virtualenv)."""
    settings = auto.ProjectSettings(
        name=project,
        runtime=auto.ProjectRuntimeInfo(name="python", options={"virtualenv": str(ROOT / ".venv")}),
    )
    ws = auto.LocalWorkspace(work_dir=str(work), project_settings=settings, env_vars=env, pulumi_command=command())
    return auto.Stack.create(STACK, ws)


def devstack_stack(base: Path, files_for: "wl.Workload", admin: dict, providers_from: Path | None = None) -> auto.Stack:
    """A stack of our program over `files_for`'s projects, configured like the local stack.

    `providers_from`: a directory put first on PYTHONPATH, so the program and
    the provider process import a prototype's `providers` (or `components`)
    package from it instead of the checkout's.
    """
    work = base / "program"
    work.mkdir()
    shutil.copy(ROOT / "__main__.py", work / "__main__.py")
    # Laid out as the checkout, packages beside the program: the engine stores each resource's
    # stack trace relative to the program, so this keeps the state the size a real run writes.
    # A prototype's package is left unlinked: the link would shadow it on the import path.
    for package in PROGRAM_PACKAGES:
        if not (providers_from and (providers_from / package).is_dir()):
            (work / package).symlink_to(ROOT / package, target_is_directory=True)
    files = wl.write_projects(work, files_for)
    env = offline_env(base)
    if providers_from:
        env["PYTHONPATH"] = str(providers_from)
    stack = local_stack(work, env)
    configure(stack, files, admin)
    return stack


def configure(stack: auto.Stack, files: list[str], admin: dict, shared: dict | None = None) -> None:
    """Set the workspace and the admin secrets (as secrets) on `stack`."""
    shared = shared or wl.local_shared()
    values = {"devstack:workspace": auto.ConfigValue(wl.workspace_config(STACK, files, shared))}
    for instance in shared.values():
        values[f"devstack:{instance['adminSecret']}"] = auto.ConfigValue(admin[instance["engine"]].password, secret=True)
    stack.set_all_config(values)


def noop_stack(base: Path, workload: "wl.Workload") -> auto.Stack:
    """A stack of bench/noop_program.py registering `workload.size` no-op resources."""
    work = base / "noop"
    work.mkdir()
    shutil.copy(Path(__file__).with_name("noop_program.py"), work / "__main__.py")
    shutil.copy(Path(__file__).with_name("noop_provider.py"), work / "noop_provider.py")
    stack = local_stack(work, offline_env(base), project="benchnoop")
    stack.set_all_config({"bench:prefix": auto.ConfigValue(workload.prefix),
                          "bench:size": auto.ConfigValue(str(workload.size))})
    return stack
