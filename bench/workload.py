"""The benchmark's workload: N tenant resources spread evenly over the six engines.

Each project declares one resource per engine (the engine's main kind), so
N resources are N/6 projects. Every name starts with a per-run prefix, which
is how the sweeper finds whatever a run leaves behind.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.pulumi_env import ROOT

#: instance (as in stacks/Pulumi.local.yaml) -> (engine, kind): one resource of each per project.
MIX: dict[str, tuple[str, str]] = {
    "pg": ("postgres", "database"),
    "cache": ("redis", "acl_user"),
    "objects": ("minio", "bucket"),
    "aws": ("localstack", "queue"),
    "events": ("nats", "stream"),
    "kafka": ("kafka", "topic"),
}


def new_prefix() -> str:
    """A fresh run prefix: lowercase, starts with a letter, valid in every engine's names."""
    return f"bn{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Workload:
    """N resources over `projects` projects named `<prefix>-<i>`."""

    prefix: str
    size: int

    @property
    def projects(self) -> list[str]:
        count = max(1, -(-self.size // len(MIX)))  # ceil: the last project may hold fewer
        return [f"{self.prefix}-{i:03d}" for i in range(count)]

    def resources(self) -> list[tuple[str, str, str, str]]:
        """(project, instance, engine, kind) of every resource, exactly `size` of them."""
        rows = [(p, inst, eng, kind) for p in self.projects for inst, (eng, kind) in MIX.items()]
        return rows[: self.size]

    def declarations(self, purge: bool = True) -> dict[str, list[dict[str, Any]]]:
        """project -> its `resources:` list; purge so a destroy drops everything it made."""
        decls: dict[str, list[dict[str, Any]]] = {p: [] for p in self.projects}
        for project, instance, _engine, kind in self.resources():
            decls[project].append({"uses": instance, "kind": kind, "purge": purge})
        return decls


def write_projects(work: Path, workload: Workload) -> list[str]:
    """Write one devstack.yaml per project under `work`; returns their workspace-relative paths."""
    files = []
    for project, resources in workload.declarations().items():
        path = work / project / "devstack.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"apiVersion": "devstack/v1", "kind": "Project", "name": project,
                                        "resources": resources}))
        files.append(f"{project}/devstack.yaml")
    return files


def local_shared() -> dict[str, dict[str, Any]]:
    """The shared instances of the local stack (addresses and admin secret keys, no secrets)."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return config["devstack:workspace"]["shared"]


def workspace_config(name: str, files: list[str], shared: dict[str, dict[str, Any]] | None = None) -> str:
    """The `devstack:workspace` value (JSON) of a benchmark stack."""
    return json.dumps({"name": name, "shared": shared or local_shared(), "projects": files})
