"""devstack: validate this stack's workspace, then expand every project's `resources:`."""

from pathlib import Path

import pulumi

from components.workspace import build

workspace = build(root=Path(__file__).resolve().parent)
for project_name, outputs in workspace.outputs.items():
    pulumi.export(project_name, outputs)
