"""devstack: expand every project's `resources:` block of this stack's workspace."""

from pathlib import Path

import pulumi

from components.workspace import Workspace, load_workspace

workspace = Workspace(load_workspace(), root=Path(__file__).resolve().parent)
for project_name, outputs in workspace.outputs.items():
    pulumi.export(project_name, outputs)
