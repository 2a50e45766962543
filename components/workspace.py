"""The Workspace component: every project of a workspace, expanded from its devstack.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pulumi

from components.dropped import Held, warn_of_drops
from components.project import Project
from components.validation import Validated, WorkspaceInvalid, validate
from components.yamlfile import encryption_salt, load_yaml_if_usable, stack_config_file
from providers.markers import marker_workspace
from providers.instances import parse_object


def load_workspace(root: Path, stack: str, config: pulumi.Config | None = None) -> Validated:
    """Read `devstack:workspace` from the stack's config and validate it with all its projects."""
    config = config or pulumi.Config("devstack")
    raw = parse_object(config.require_object("workspace"))
    display = stack_config_file(root, stack)
    return validate(raw, root, load_yaml_if_usable(root / display, display), display,
                    config_is_set=lambda key: config.get(key) is not None,
                    config_is_secret=lambda key: pulumi.runtime.is_config_secret(config.full_key(key)))


class Workspace(pulumi.ComponentResource):
    """One child Project per devstack.yaml, declared by `declare_projects`; `outputs` maps
    project name to its outputs."""

    outputs: dict[str, Any]

    def __init__(self, validated: Validated, stack: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("devstack:index:Workspace", validated.workspace.name, None, opts)
        self._validated, self._stack = validated, stack
        self.outputs = {}

    def declare_projects(self) -> Iterator[str]:
        """Declare the projects one at a time, yielding each name once its resources are declared.

        A generator so that the program can hand the event loop to the SDK between
        projects (see __main__.py); exhausting it also registers the component's outputs.
        """
        for project_file in self._validated.projects:
            project = Project(project_file, self._validated.workspace, stack=self._stack,
                              opts=pulumi.ResourceOptions(parent=self))
            self.outputs[project_file.name] = project.outputs
            yield project_file.name
        self.register_outputs({})

    def warn_of_drops(self, held: list[Held]) -> None:
        """Warn of each resource of `held` (the last deployment's, `purge: true`) that no project declares now."""
        warn_of_drops(held, self._validated, self)


def build(root: Path) -> Workspace:
    """Validate everything first and return the workspace to expand; on problems register nothing."""
    stack = pulumi.get_stack()
    try:
        validated = load_workspace(root, stack)
    except WorkspaceInvalid as invalid:
        for problem in invalid.problems:
            pulumi.log.error(str(problem))
        raise pulumi.RunError(f"{len(invalid.problems)} problem(s) in the workspace; nothing was created or changed") from None
    # Markers name the ledger too (see marker_workspace): the `local` stacks of two clones are two workspaces.
    return Workspace(validated, marker_workspace(stack, encryption_salt(root, stack)))
