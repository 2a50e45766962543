"""Concurrent `pulumi up` runs: two workspaces on the same engines, and two runs on the same stack."""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pulumi import automation as auto

from bench.sweep import sweep
from tests.faults.conftest import (
    MIX,
    changes,
    checkpoint,
    configure,
    every_engine,
    local_workspace,
    new_stack,
    tenants,
    write_project,
)
from tests.waiting import eventually
from tools.pulumi_env import ROOT, pulumi_env

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(300)

ROUNDS = 5
#: What a round adds or removes beside the standing project: every engine plus a Redis index,
#: whose number is allocated by a script on the server and must never be handed out twice.
CHURN = every_engine() + [{"uses": "cache", "kind": "redis_index", "purge": True}]


def workspace(base: Path, command: auto.PulumiCommand, shared: dict, admin: dict, project: str):
    """A workspace of its own (directory, file backend, passphrase) with one standing project."""
    work, passphrase = base / "project", base / "passphrase"
    work.mkdir(parents=True)
    shutil.copy(ROOT / "__main__.py", work / "__main__.py")
    passphrase.write_text("faults-passphrase")
    env = {**pulumi_env(backend_dir=base / "state", passphrase_file=passphrase), "PULUMI_HOME": str(base / "home")}
    stack = new_stack(work, env, command)
    files = [write_project(work, project, every_engine())]
    configure(stack, files, shared, admin)
    return stack, work, files


def test_two_workspaces_in_parallel_five_rounds(tmp_path, pulumi_command, admin, shared, prefix):
    sides = [workspace(tmp_path / side, pulumi_command, shared, admin, f"{prefix}-{side}") for side in ("a", "b")]

    def run_round(index: int, stack: auto.Stack, work: Path, files: list[str], side: str) -> dict:
        """Even rounds declare the churn project, odd rounds empty it (purge drops what it held)."""
        churn = write_project(work, f"{prefix}-{side}-churn", CHURN if index % 2 == 0 else [])
        configure(stack, files + [churn], shared, admin)
        return changes(stack.up())

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for index in range(ROUNDS):
                running = [pool.submit(run_round, index, *sides[i], side) for i, side in enumerate("ab")]
                # The churn project's 7 tenants and its nats account (purged with them).
                expected = {"delete": 8} if index % 2 else {"create": 8}
                if index == 0:
                    expected = {"create": 2 + 2 + 6 + 7 + 2}  # stack, workspace, 2 projects, 6 + 7 tenants, 2 accounts
                assert [r.result() for r in running] == [expected, expected], f"round {index + 1}"
                indexes = [tenant.get("db") for stack, _work, _files in sides
                           for tenant in tenants(checkpoint(stack.workspace.env_vars, "faults")).values()
                           if tenant.get("kind") == "redis_index"]
                assert len(indexes) == (0 if index % 2 else 2) and len(set(indexes)) == len(indexes)
        for side in "ab":
            live = sweep(f"{prefix}-{side}", shared, admin, dry_run=True)
            # The standing project and the last round's churn: two of each, plus the churn's index (and
            # each MinIO bucket's own key: its user and policy).
            assert live == {"postgres": 4, "redis": 5, "minio": 6, "localstack": 2, "nats": 2, "kafka": 2}
    finally:
        for stack, _work, _files in sides:
            stack.destroy()


def test_second_up_on_the_same_stack_fails_on_the_lock(project_dir, offline_env, pulumi_command, admin, shared,
                                                       prefix, tmp_path):
    first = new_stack(project_dir, offline_env, pulumi_command)
    files = [write_project(project_dir, f"{prefix}-first", every_engine())]
    configure(first, files, shared, admin)
    # The same stack (same backend, same config file) from a second directory, declaring one more project.
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(project_dir / "__main__.py", other / "__main__.py")
    shutil.copy(project_dir / "Pulumi.faults.yaml", other / "Pulumi.faults.yaml")
    write_project(other, f"{prefix}-first", every_engine())
    second = auto.Stack.select("faults", local_workspace(other, offline_env, pulumi_command))
    configure(second, files + [write_project(other, f"{prefix}-second", every_engine())], shared, admin)

    locks = Path(offline_env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks"
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(first.up)
            eventually(lambda: any(locks.rglob("*.json")), 60, "the first up's lock on the stack", interval=0.02)
            with pytest.raises(auto.errors.ConcurrentUpdateError) as refused:
                second.up()
            assert changes(running.result()) == {"create": 10}  # stack, workspace, project, 6 tenants, account
        message = str(refused.value)
        assert "the stack is currently locked by 1 lock(s)" in message and "pulumi cancel" in message
        # The refused run changed nothing: neither the ledger nor any engine knows the second project.
        assert not [urn for urn in tenants(checkpoint(offline_env, "faults")) if f"{prefix}-second" in urn]
        assert sum(sweep(f"{prefix}-second", shared, admin, dry_run=True).values()) == 0
        assert len(tenants(checkpoint(offline_env, "faults"))) == len(MIX) + 1  # and the nats account
    finally:
        first.destroy()


def test_a_project_moved_to_another_workspace_keeps_its_data_when_the_old_one_purges(
        tmp_path, pulumi_command, admin, shared, prefix):
    """Workspace b lists a project workspace a holds with `purge: true`: b's up refuses to take over a's
    resources, changing nothing, until b's `adopt` names a for the project; then it adopts every resource.
    a then stops listing it: a's up refuses each purge naming b, drops nothing, and once a's ledger lets
    go of the project as docs/lifecycle.md's move procedure says, a's up goes through. b keeps the data."""
    from devstack.errors import IdentityConflict
    from devstack.ledger import destroy_stack, run_cli

    project = f"{prefix}-moved"
    (old, _w, files), (new, _nw, new_files) = (workspace(tmp_path / side, pulumi_command, shared, admin, project)
                                               for side in ("old", "new"))
    try:
        assert changes(old.up()) == {"create": 3 + len(MIX) + 1}  # and the project's nats account
        everything = sweep(project, shared, admin, dry_run=True)
        # A database is two objects, an acl user too, a MinIO bucket three (its own key: a user and a policy).
        assert sum(everything.values()) == len(MIX) + 4
        with pytest.raises(auto.errors.CommandError) as refused:
            new.up()  # a second workspace listing the project, which says nothing of a move
        held = set(re.findall(r"belongs to project '[^']+' of workspace '([^']+)', another ledger",
                              str(refused.value)))
        assert len(held) == 1 and f"adopt: {{{project}: {next(iter(held))}}}" in str(refused.value)
        assert sweep(project, shared, admin, dry_run=True) == everything
        assert changes(old.refresh()) == {}  # the old workspace's logins and markers are as they were

        configure(new, new_files, shared, admin, adopt={project: next(iter(held))})
        # Adopted, the nats account with the rest (the refused up made the components).
        assert changes(new.up()) == {"create": len(MIX) + 1}

        configure(old, [], shared, admin)  # the old workspace no longer lists it; its entries purge
        with pytest.raises(auto.errors.CommandError) as refused:
            # Every delete tried: Pulumi stops at the first failure otherwise, and the nats stream (which
            # its account waits for) now comes first.
            old.up(continue_on_error=True)
        refusals = set(re.findall(r"cannot drop (\S+ \S+): its marker names workspace", str(refused.value)))
        assert len(refusals) == len(MIX)  # every tenant; the nats account waits for its stream, still there
        assert sweep(project, shared, admin, dry_run=True) == everything
        with pytest.raises(IdentityConflict, match=f"{len(MIX) + 1} resource\\(s\\).*nothing was dropped"):
            destroy_stack(old, purge_data=True, confirm=lambda _question: True)  # refused before any drop
        assert sweep(project, shared, admin, dry_run=True) == everything
        urn = next(r["urn"] for r in checkpoint(old.workspace.env_vars, "faults")["resources"]
                   if r["type"] == "devstack:index:Project")
        run_cli(old, "state", "delete", "--target-dependents", urn, "--yes")  # docs/lifecycle.md's move procedure
        assert changes(old.up()) == {}
        assert tenants(checkpoint(old.workspace.env_vars, "faults")) == {}
        assert sweep(project, shared, admin, dry_run=True) == everything
        assert changes(new.refresh()) == {}  # nothing gone or changed under the new workspace

        new.destroy()  # the new workspace's own purge still drops them
        assert sum(sweep(project, shared, admin, dry_run=True).values()) == 0
    finally:
        for stack in (old, new):
            try:
                stack.destroy()
            except auto.errors.CommandError:  # refused by what the other still holds: the sweep removes it
                pass
