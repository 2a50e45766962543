"""A workspace past a thousand declarations, through the real CLI: every one is registered and planned.

Up to the fix, the program died with a RecursionError after about 900 tenant
resources: the SDK pickles each resource's provider, and a provider that
pickled a state dict walked one more wrapper of the SDK's pickler per
resource before it. A preview needs no engine (check and diff are pure), so
nothing is created and nothing needs sweeping.
"""

from __future__ import annotations

import pytest

from tests.faults.conftest import PER_PROJECT, changes, configure, every_engine, new_stack, write_project

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(300)

PROJECTS = 170  # one declaration per engine each and the implied NATS account: 1,190 tenant resources


def test_a_workspace_of_over_a_thousand_resources_previews(project_dir, offline_env, pulumi_command, admin, shared):
    files = [write_project(project_dir, f"big{i:03d}", every_engine()) for i in range(PROJECTS)]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, shared, admin)
    tenants = PROJECTS * PER_PROJECT
    # The stack and the workspace, a component per project, and every tenant resource.
    assert changes(stack.preview()) == {"create": 2 + PROJECTS + tenants}
