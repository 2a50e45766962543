"""devstack: validate this stack's workspace, then expand every project's `resources:`."""

import asyncio
from pathlib import Path

import pulumi

from components.workspace import build


async def main() -> pulumi.Inputs:
    """Register every resource, then return the stack outputs: one entry per project."""
    workspace = build(root=Path(__file__).resolve().parent)
    # Let the registrations start before the SDK begins its wait. It then awaits the
    # registration RPCs one by one; a program that never yields leaves it nothing to await
    # but every pending Output, re-polled whenever one resolves (quadratic in resources).
    await asyncio.sleep(0)
    return workspace.outputs


pulumi.run(main)
