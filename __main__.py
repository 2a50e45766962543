"""devstack: validate this stack's workspace, then expand every project's `resources:`."""

import asyncio
from pathlib import Path

import pulumi

from components.dropped import held_with_purge
from components.workspace import build


async def main() -> pulumi.Inputs:
    """Register every resource, then return the stack outputs: one entry per project."""
    workspace = build(root=Path(__file__).resolve().parent)
    # Pulumi deletes what the program no longer declares only after the program, so the program
    # reads the last deployment itself (meanwhile) to warn of the purges among those deletes.
    held = asyncio.ensure_future(held_with_purge())
    for _ in workspace.declare_projects():
        # The SDK sends a resource's registration only when the program yields: yielding
        # after each project lets the engine and the provider work on the projects declared
        # so far while the rest are declared. It also means the SDK's final wait finds the
        # registration RPCs under way and awaits them one by one; a program that never
        # yields leaves it nothing to await but every pending Output, re-polled whenever
        # one resolves (quadratic in resources).
        await asyncio.sleep(0)
    workspace.warn_of_drops(await held)
    return workspace.outputs


pulumi.run(main)
