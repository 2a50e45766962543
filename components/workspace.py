"""The Workspace component: every project of a workspace, expanded from its devstack.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.models import ProjectFile, WorkspaceConfig
from components.project import Project
from providers.instances import WORKSPACE_KEY, parse_object


def load_workspace(config: pulumi.Config | None = None) -> WorkspaceConfig:
    """Read `devstack:workspace` from the current stack's config."""
    config = config or pulumi.Config("devstack")
    raw = parse_object(config.require_object("workspace"))
    return WorkspaceConfig.model_validate(raw)


def load_project(path: Path) -> ProjectFile:
    with path.open(encoding="utf-8") as handle:
        return ProjectFile.model_validate(yaml.safe_load(handle))


class Workspace(pulumi.ComponentResource):
    """One child Project per devstack.yaml; `outputs` maps project name to its outputs."""

    outputs: dict[str, Any]

    def __init__(self, workspace: WorkspaceConfig, root: Path, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("devstack:index:Workspace", workspace.name, None, opts)
        self.outputs = {}
        for relative in workspace.projects:
            project_file = load_project(root / relative)
            project = Project(project_file, workspace, stack=pulumi.get_stack(), opts=pulumi.ResourceOptions(parent=self))
            self.outputs[project_file.name] = project.outputs
        self.register_outputs({})


__all__ = ["WORKSPACE_KEY", "Workspace", "load_workspace", "load_project"]
