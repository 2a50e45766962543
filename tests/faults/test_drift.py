"""Resources deleted or changed behind Pulumi's back, on every engine: refresh reports it, up repairs it."""

from __future__ import annotations

import pytest

from bench.sweep import sweep
from tests.faults.behind import Engines
from tests.faults.conftest import MIX, changes, configure, every_engine, new_stack, write_project

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(240)

ENGINES = [engine for engine, _kind in MIX.values()]


def test_deleted_and_changed_behind_pulumis_back(project_dir, offline_env, pulumi_command, admin, shared, prefix):
    dropped, changed = f"{prefix}-gone", f"{prefix}-changed"
    files = [write_project(project_dir, name, every_engine()) for name in (dropped, changed)]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, shared, admin)
    engines = Engines(shared, admin)
    try:
        assert changes(stack.up()) == {"create": 2 + 2 + 12}  # stack, workspace, 2 projects, 12 tenants
        # Nothing changed yet: a refresh that runs the program (as scripts/up does) shows no difference anywhere.
        unchanged = stack.refresh(run_program=True)
        assert changes(unchanged) == {}
        assert "diff:" not in unchanged.stdout, unchanged.stdout
        for engine in ENGINES:
            engines.drop(engine, dropped)
            engines.change(engine, changed)

        # Refresh notices every one: the dropped leave the ledger, the changed are updated in it.
        assert changes(stack.refresh()) == {"delete": 6, "update": 6}
        assert not [engine for engine in ENGINES if engines.repaired(engine, changed)]

        # Up re-creates the dropped and puts the changed settings back, on every engine.
        assert changes(stack.up()) == {"create": 6, "update": 6}
        assert [engine for engine in ENGINES if engines.repaired(engine, changed)] == ENGINES
        live = sweep(dropped, shared, admin, dry_run=True)
        assert live == {"postgres": 2, "redis": 2, "minio": 1, "localstack": 1, "nats": 1, "kafka": 1}
        assert changes(stack.preview()) == {}
    finally:
        stack.destroy()
