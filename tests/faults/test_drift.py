"""Resources deleted or changed behind Pulumi's back, on every engine: refresh reports it, up repairs it."""

from __future__ import annotations

import json

import pytest
from psycopg import sql
from pulumi import automation as auto

from bench.sweep import sweep
from tests.faults.behind import Engines
from tests.faults.conftest import (MIX, changes, checkpoint, configure, every_engine, new_stack, tenants,
                                  write_project)

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
        # stack, workspace, 2 projects, 12 tenants, and each project's nats account (implied)
        assert changes(stack.up()) == {"create": 2 + 2 + 12 + 2}
        # Nothing changed yet: a refresh that runs the program (as scripts/up does) shows no difference anywhere.
        unchanged = stack.refresh(run_program=True)
        assert changes(unchanged) == {}
        assert "diff:" not in unchanged.stdout, unchanged.stdout
        for engine in ENGINES:
            engines.drop(engine, dropped)
            engines.change(engine, changed)

        # Refresh notices every one: the dropped stay in the ledger, stale; the changed are updated in it.
        assert changes(stack.refresh()) == {"update": 12}
        lifecycles = {urn.rsplit("::", 1)[-1]: outputs["lifecycle"]
                      for urn, outputs in tenants(checkpoint(offline_env, "faults")).items()}
        stale = {name for name, lifecycle in lifecycles.items() if lifecycle == "stale"}
        assert len(stale) == 6 and all(name.startswith(f"{dropped}/") for name in stale), lifecycles
        assert not [engine for engine in ENGINES if engines.repaired(engine, changed)]

        # Up re-creates the dropped (their updates) and puts the changed settings back, on every engine.
        assert changes(stack.up()) == {"update": 12}
        assert {o["lifecycle"] for o in tenants(checkpoint(offline_env, "faults")).values()} == {"active"}
        assert [engine for engine in ENGINES if engines.repaired(engine, changed)] == ENGINES
        live = sweep(dropped, shared, admin, dry_run=True)
        # A MinIO bucket comes with its own key: the user and its policy.
        assert live == {"postgres": 2, "redis": 2, "minio": 3, "localstack": 1, "nats": 1, "kafka": 1}
        assert changes(stack.preview()) == {}
    finally:
        stack.destroy()


def test_a_name_another_project_took_over_is_never_touched(project_dir, offline_env, pulumi_command, admin, shared, prefix):
    """A's database is dropped behind Pulumi's back and B (another workspace) creates one of the same
    name. A's refresh marks its own stale, and A's next up refuses B's: even with `purge: true`, nothing
    of B's is changed or dropped."""
    name, a, b = f"{prefix}-app", f"{prefix}-a", f"{prefix}-b"
    declaration = [{"uses": "pg", "kind": "database", "name": name, "purge": True}]
    stack_a = new_stack(project_dir, offline_env, pulumi_command, name="faults-a")
    configure(stack_a, [write_project(project_dir, a, declaration)], {"pg": shared["pg"]}, admin, name="faults-a")
    stack_b = new_stack(project_dir, offline_env, pulumi_command, name="faults-b")
    configure(stack_b, [write_project(project_dir, b, declaration)], {"pg": shared["pg"]}, admin, name="faults-b")
    database = name.replace("-", "_")
    try:
        assert changes(stack_a.up()) == {"create": 4}  # stack, workspace, project, database
        with Engines(shared, admin).pg() as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
        assert changes(stack_b.up()) == {"create": 4}

        assert changes(stack_a.refresh()) == {"update": 1}  # not ours any more: stale in A's ledger
        with pytest.raises(auto.errors.CommandError) as refused:
            stack_a.up()
        assert f"Conflict: cannot create database postgres/pg/database/{name}@{a}" in str(refused.value)
        assert f"belongs to project '{b}'" in str(refused.value)
        with Engines(shared, admin).pg() as conn:
            marker = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                                  (database,)).fetchone()
        assert marker is not None and json.loads(marker[0])["owner"] == b
        assert changes(stack_b.preview(refresh=True)) == {}
    finally:
        stack_b.destroy()
        stack_a.destroy()


def test_a_nats_account_deleted_or_changed_behind_pulumis_back(project_dir, offline_env, pulumi_command, admin,
                                                              shared, prefix):
    """The implied account: limits set by hand are drift the next up puts back; an account deleted by hand
    (its stream out of reach with it) is stale at refresh, and the next up makes both again."""
    from providers.nats import auth as nats_auth
    from providers.nats.claims import AccountSpec, account_claims, account_description, account_params

    changed, dropped = f"{prefix}-limits", f"{prefix}-acct"
    files = [write_project(project_dir, name, [{"uses": "events", "kind": "stream", "purge": True}])
             for name in (changed, dropped)]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, shared, admin)
    engines = Engines(shared, admin)
    operator = nats_auth.Operator.from_secret(admin["nats"].password)

    def claims(project: str) -> dict | None:
        key = nats_auth.public(operator.account_key(project))
        return engines.system(lambda nc: account_claims(nc, key))

    try:
        assert changes(stack.up()) == {"create": 2 + 2 + 2 + 2}  # stack, workspace, 2 projects, 2 streams, 2 accounts
        by_hand = operator.account_jwt(operator.account_key(changed), changed, description=account_description(
            claims(changed)), jetstream={"mem_storage": -1, "disk_storage": -1, "streams": 1})
        engines.system(lambda nc: nc.request("$SYS.REQ.CLAIMS.UPDATE", by_hand.encode(), timeout=10))
        engines.system(lambda nc: nc.request("$SYS.REQ.CLAIMS.DELETE", operator.deletion_jwt(
            [nats_auth.public(operator.account_key(dropped))]).encode(), timeout=10))

        # Refresh: the changed limits are recorded; the deleted account and the stream in it are stale.
        assert changes(stack.refresh()) == {"update": 3}
        assert changes(stack.up()) == {"update": 3}
        assert account_params(claims(changed)) == AccountSpec().model_dump()
        assert account_params(claims(dropped)) == AccountSpec().model_dump()
        assert engines.jetstream(dropped, lambda js: js.stream_info(dropped)).config.name == dropped
        assert changes(stack.preview()) == {}
    finally:
        stack.destroy()
