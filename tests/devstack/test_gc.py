"""`resource gc` on planted orphans, stale and foreign resources in every engine.

The ledger is a synthetic stack on a temporary backend whose workspace uses
every shared instance of the local engines. Planted, under a fresh project
name and a fresh workspace name:

- an orphan of every kind (created by its provider, marked for this
  workspace, absent from the ledger), plus one owned by a project the
  workspace no longer lists (present in the ledger);
- a managed resource (in the engine and the ledger);
- a stale ledger entry in every engine (nothing in the engine);
- a foreign resource in every engine (no marker), which gc never touches;
- a resource marked for another workspace, which gc never touches either.

The shared engines hold other people's resources too: assertions only look
at what this test planted, except that orphans and pruned must be exactly
ours (orphans are only ever resources marked for this workspace).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import nats
import nkeys
import psycopg
import pytest
import redis as redis_py
from confluent_kafka.admin import AdminClient, NewTopic
from psycopg import sql

from devstack import gc, listing, models, state
from devstack.errors import Aborted, InvalidQuery
from devstack.scan import Found, declaration_name
from components.yamlfile import encryption_salt
from providers.markers import marker_workspace
from providers import registry
from providers.s3 import client as s3
from providers.nats import auth as nats_auth
from providers.errors import EngineUnavailable
from providers.identity import PREFIXED, Identity
from providers.instances import instances_from_config
from providers.nats.session import admin_credential
from tests.devstack.conftest import (
    Sandbox,
    box_ids,
    import_state,
    make_env,
    synthetic_resources,
    token,
    tracking_alpha,
)
from tests.devstack.stacks import acl_user_exists, configure_stack, write
from tools.engines.ports import PORTS


def workspace_config(shared: dict, admin, name: str, projects: list[str]) -> dict[str, Any]:
    config: dict[str, Any] = {"devstack:workspace": {"name": name, "shared": shared, "projects": projects}}
    for instance in shared.values():
        config[f"devstack:{instance['adminSecret']}"] = admin[instance["engine"]].password
    return config


def orphan_plan(p: str) -> list[tuple[str, str, str, str, dict]]:
    """(engine, instance, kind, name, params): one orphan of every kind, in creation order."""
    return [
        ("postgres", "pg", "database", p, {}),
        ("postgres", "pg", "role", "orole", {}),
        ("postgres", "pg", "user", "ouser", {}),
        ("redis", "cache", "redis_index", p, {}),
        ("redis", "cache", "acl_user", p, {}),
        ("minio", "objects", "bucket", "media", {}),
        ("minio", "objects", "lifecycle", "exp", {"bucket": "media", "expireDays": 3}),
        ("minio", "objects", "access_key", p, {}),
        ("localstack", "aws", "bucket", "lsb", {}),
        ("localstack", "aws", "queue", "q", {}),
        ("localstack", "aws", "topic", "t", {}),
        ("localstack", "aws", "stream", "s", {}),
        ("localstack", "aws", "table", "tb", {"hashKey": "id"}),
        ("nats", "events", "account", p, {}),
        ("nats", "events", "stream", p, {}),
        ("nats", "events", "consumer", "c", {"stream": p}),
        ("nats", "events", "kv", "kv", {}),
        ("kafka", "kafka", "topic", "tp", {}),
        ("kafka", "kafka", "acl", p, {}),
    ]


def engine_name(engine: str, kind: str, name: str, owner: str) -> str:
    from providers import registry

    return registry.provider_class(engine, kind).engine_name(name, owner, naming=PREFIXED)


def create(config, engine, instance, kind, name, owner, stack, params=None) -> None:
    provider = state.configured_provider(config, engine, kind)
    provider.create({"engine": engine, "instance": instance, "kind": kind, "name": name, "owner": owner,
                     "params": params or {}, "credentials": "predictable", "purge": False, "stack": stack,
                     "naming": PREFIXED})  # the names engine_name above gives


def drop_quietly(config, engine, instance, kind, name, owner) -> None:
    try:
        state.drop_data(config, Identity(engine, instance, kind, name, owner), {"params": {}})
    except Exception:  # cleanup: the test already reported what matters
        pass


# --- foreign resources: made with the engines' own clients, no marker --------------------


def plant_foreign(config, p: str) -> dict[str, tuple[str, str]]:
    """One unmarked resource per engine: engine -> (kind, engine name)."""
    instances = instances_from_config(config)
    pg, rd = instances["pg"], instances["cache"]
    with _pg(pg) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(f"{p}_foreign")))
    with _redis(rd) as client:
        client.acl_setuser(f"{p}-foreign", enabled=False)
    s3.aws_client(instances["objects"], "s3").create_bucket(Bucket=f"x{p}-foreign")
    s3.aws_client(instances["aws"], "sqs").create_queue(QueueName=f"{p}-foreign")
    # An account the operator signed without devstack's marker: gc lists it, never looks inside.
    _nats_system(instances["events"], lambda nc: nc.request("$SYS.REQ.CLAIMS.UPDATE", _foreign_account(
        instances["events"], p)[1].encode(), timeout=10))
    kafka = _kafka(instances["kafka"])
    kafka.create_topics([NewTopic(f"{p}.foreign", 1, 1)])[f"{p}.foreign"].result(timeout=30)
    return {"postgres": ("database", f"{p}_foreign"), "redis": ("acl_user", f"{p}-foreign"),
            "minio": ("bucket", f"x{p}-foreign"), "localstack": ("queue", f"{p}-foreign"),
            "nats": ("account", f"{p}_foreign"), "kafka": ("topic", f"{p}.foreign")}


def remove_foreign(config, p: str) -> None:
    instances = instances_from_config(config)
    for step in (
        lambda: _pg_exec(instances["pg"], sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(f"{p}_foreign"))),
        lambda: _redis(instances["cache"]).acl_deluser(f"{p}-foreign"),
        lambda: s3.aws_client(instances["objects"], "s3").delete_bucket(Bucket=f"x{p}-foreign"),
        lambda: s3.aws_client(instances["aws"], "sqs").delete_queue(
            QueueUrl=s3.aws_client(instances["aws"], "sqs").get_queue_url(QueueName=f"{p}-foreign")["QueueUrl"]),
        lambda: _nats_system(instances["events"], lambda nc: nc.request("$SYS.REQ.CLAIMS.DELETE", _operator(
            instances["events"]).deletion_jwt([_foreign_account(instances["events"], p)[0]]).encode(), timeout=10)),
        lambda: _delete_topic(instances["kafka"], f"{p}.foreign"),
    ):
        try:
            step()
        except Exception:
            pass


def _delete_topic(instance, topic: str) -> None:
    admin = _kafka(instance)  # held until the result: a collected client cancels its requests
    admin.delete_topics([topic])[topic].result(timeout=30)


def _pg(instance) -> psycopg.Connection:
    return psycopg.connect(host=instance.host, port=instance.port, user=instance.admin_user,
                           password=instance.password(), dbname="postgres", autocommit=True, connect_timeout=5)


def _pg_exec(instance, statement) -> None:
    with _pg(instance) as conn:
        conn.execute(statement)


def _redis(instance) -> redis_py.Redis:
    return redis_py.Redis(host=instance.host, port=instance.port, username=instance.admin_user,
                          password=instance.password(), decode_responses=True, socket_timeout=5)


def _nats(instance, owner: str, work):
    """Run `work` with devstack's admin JetStream context in project `owner`'s account."""
    async def main():
        nc = await nats.connect(f"nats://{instance.address}", **admin_credential(instance.password(), owner),
                                allow_reconnect=False, connect_timeout=5)
        try:
            return await work(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(main())


def _operator(instance) -> nats_auth.Operator:
    return nats_auth.Operator.from_secret(instance.password())


def _foreign_account(instance, p: str) -> tuple[str, str]:
    """(public key, JWT) of an account named `<p>_foreign` the operator signs without devstack's marker."""
    operator = _operator(instance)
    key = nats_auth.derived_key(operator.signing.seed, f"foreign:{p}", nkeys.PREFIX_BYTE_ACCOUNT)
    return nats_auth.public(key), operator.account_jwt(key, f"{p}_foreign", description="", jetstream=None)


def _nats_system(instance, work):
    """Run `work` with a connection of devstack's admin in the system account."""
    async def main():
        nc = await nats.connect(f"nats://{instance.address}", **admin_credential(instance.password()),
                                allow_reconnect=False, connect_timeout=5)
        try:
            return await work(nc)
        finally:
            await nc.close()

    return asyncio.run(main())


def _kafka(instance) -> AdminClient:
    from providers.kafka.client import client_settings

    return AdminClient(client_settings(instance))


# --- the test ----------------------------------------------------------------------------


@pytest.fixture
def planted(sandbox: Sandbox, admin, local_shared):
    """The ledger stack plus everything planted; all of it is removed afterwards, whatever happened."""
    p, gone = f"g{token()}", f"h{token()}"
    workspace = f"gc{token()}"
    project_file = sandbox.work / p / "devstack.yaml"
    project_file.parent.mkdir()
    project_file.write_text(f"apiVersion: devstack/v1\nkind: Project\nname: {p}\nresources: []\n")
    config = workspace_config(local_shared, admin, workspace, [f"{p}/devstack.yaml"])
    stack = configured(sandbox, workspace, config)
    made: list[tuple] = []
    try:
        yield _plant(sandbox, stack, config, workspace, p, gone, made)
    finally:
        for engine, instance, kind, name, owner in reversed(made):
            drop_quietly(config, engine, instance, kind, name, owner)
        remove_foreign(config, p)
        drop_quietly(config, "nats", "events", "account", p, p)  # the account its nats orphans made


def configured(sandbox: Sandbox, workspace: str, config: dict[str, Any]):
    """A new stack of the sandbox with `config` (workspace_config's) as its stack config."""
    from pulumi import automation as auto

    stack = sandbox.open(workspace, create=True)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(config["devstack:workspace"])))
    for key, value in config.items():
        if key != "devstack:workspace":
            stack.set_config(key, auto.ConfigValue(value, secret=True))
    return stack


def _plant(sandbox, stack, config, workspace, p, gone, made) -> dict[str, Any]:
    mark = marker_workspace(workspace, encryption_salt(Path(stack.workspace.work_dir), workspace))  # what its up writes
    retained = set()  # marked for this workspace, outside its ledger, of a project it still lists
    for engine, instance, kind, name, params in orphan_plan(p):
        made.append((engine, instance, kind, name, p))
        create(config, engine, instance, kind, name, p, mark, params)
        retained.add((engine, kind, engine_name(engine, kind, name, p)))
    others = {
        "other": f"{workspace}-other",
        # A stack of the same name with a ledger of its own (another clone's): its live resource.
        "clone": marker_workspace(workspace, "the other clone's salt"),
    }
    for identity in (("postgres", "pg", "role", "managed", p), ("postgres", "pg", "role", "gone", gone),
                     ("postgres", "pg", "role", "held", gone),
                     *(("redis", "cache", "acl_user", name, p) for name in others)):
        made.append(identity)
        create(config, *identity, others.get(identity[3], mark))
    # Marked as markers were before they named the ledger (the stack's name alone), outside the ledger:
    # any clone's stack of that name may use it.
    made.append(("redis", "cache", "acl_user", "legacy", p))
    create(config, "redis", "cache", "acl_user", "legacy", p, workspace)
    others["legacy"] = workspace
    # Its project left the workspace and the ledger. `held`, of that project too, is still in the ledger
    # (a teammate's project this checkout has not pulled, say): never an orphan, the next up settles it.
    orphans = {("postgres", "role", f"{gone}_gone")}
    stale_rows = [("postgres", "pg", "database", f"{p}-stale"), ("redis", "cache", "acl_user", "stale"),
                  ("minio", "objects", "bucket", "stale"), ("localstack", "aws", "queue", "stale"),
                  ("nats", "events", "kv", "stale"), ("kafka", "kafka", "topic", "stale")]
    rows = [{"engine": e, "instance": i, "kind": k, "name": n, "owner": p} for e, i, k, n in stale_rows]
    rows += [{"engine": "postgres", "instance": "pg", "kind": "role", "name": "managed", "owner": p},
             {"engine": "postgres", "instance": "pg", "kind": "role", "name": "held", "owner": gone}]
    import_state(stack, synthetic_resources(workspace, rows))
    foreign = plant_foreign(config, p)
    return Planted({"stack": stack, "sandbox": sandbox, "config": config, "workspace": workspace, "project": p,
                    "gone": gone, "orphans": orphans, "retained": retained,
                    "stale": {(e, k, engine_name(e, k, n, p)) for e, _, k, n in stale_rows},
                    "foreign": {(e, k, n) for e, (k, n) in foreign.items()},
                    "others": {("redis", "acl_user", f"{p}-{name}") for name in others}})


class Planted(dict):
    """What a test planted; its repr leaves out the config (it holds admin passwords)."""

    def __repr__(self) -> str:
        return f"Planted(workspace={self['workspace']!r}, project={self['project']!r})"


def keys(items) -> set[tuple[str, str, str]]:
    return {(i["engine"], i["kind"], i["engine_name"]) for i in items}


def test_gc_reports_then_prunes_only_orphans(planted, validator):
    box, workspace, p = planted["sandbox"], planted["workspace"], planted["project"]
    report = box.cli_json("resource", "gc", "-w", workspace)
    validator("resource-gc.schema.json", report)
    assert report["errors"] == []
    assert sorted(report["scanned"]) == ["aws", "cache", "events", "kafka", "objects", "pg"]
    assert keys(report["orphans"]) == planted["orphans"]
    assert keys(report["retained"]) == planted["retained"]
    assert all("which the workspace still lists" in i["reason"] for i in report["retained"])
    assert keys(report["stale"]) == planted["stale"]
    assert planted["foreign"] <= keys(report["foreign"])
    assert planted["others"] <= keys(report["other_workspaces"])
    reasons = {i["engine_name"]: i["reason"] for i in report["other_workspaces"]}
    assert "another ledger's stack" in reasons[f"{p}-clone"] and "bare stack name" in reasons[f"{p}-legacy"]
    assert report["managed"] == 2  # `managed`, and `held` of a project the workspace no longer lists
    reasons = {(i["kind"], i["engine_name"]): i["reason"] for i in report["orphans"]}
    assert "no longer lists" in reasons[("role", next(n for e, k, n in planted["orphans"] if n.endswith("_gone")))]
    assert all(i["name"] for i in report["orphans"] + report["retained"])  # each maps back to a declaration name

    # Scope: --engine scans only that engine; --kind and --project narrow to what is marked for that project.
    only_kafka = gc.collect_garbage(planted["stack"], engine="kafka")
    assert only_kafka.scanned == ["kafka"]
    assert keys(only_kafka.as_json()["retained"]) == {o for o in planted["retained"] if o[0] == "kafka"}
    queues = gc.collect_garbage(planted["stack"], kind="queue", project=p)
    assert queues.scanned == ["aws"] and queues.foreign == []
    assert keys(queues.as_json()["retained"]) == {("localstack", "queue", f"{p}-q")}
    assert keys(queues.as_json()["stale"]) == {("localstack", "queue", f"{p}-stale")}

    # --prune asks first: without a terminal and --yes nothing is dropped.
    refused = box.cli("resource", "gc", "--prune", "-w", workspace)
    assert refused.returncode == Aborted.exit_code and "not confirmed" in refused.stderr

    # The refusal dropped nothing. --prune drops the orphans only; the retained stay, listed as such.
    pruned = box.cli_json("resource", "gc", "--prune", "--yes", "-w", workspace)
    assert pruned["errors"] == [] and keys(pruned["orphans"]) == planted["orphans"]
    assert pruned["pruned"] == [f"postgres/pg/role/gone@{planted['gone']}"]
    assert keys(gc.collect_garbage(planted["stack"]).as_json()["retained"]) == planted["retained"]
    # --include-retained drops them too, quietly: the exit code says it went well.
    quiet = box.cli("resource", "gc", "--prune", "--include-retained", "--yes", "--quiet", "-w", workspace)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")

    after = gc.collect_garbage(planted["stack"]).as_json()
    assert after["orphans"] == after["retained"] == [] and after["managed"] == 2
    assert keys(after["stale"]) == planted["stale"]
    assert planted["foreign"] <= keys(after["foreign"])  # foreign: never touched
    assert planted["others"] <= keys(after["other_workspaces"])  # other workspaces': never touched
    # The state is not changed by gc; its history is: the scans marked the entries they missed stale,
    # and the role pruned is a tombstone (as every retained object pruned, never in the ledger).
    stack, gone_id = planted["stack"], f"postgres/pg/role/gone@{planted['gone']}"
    assert len(state.tracked_resources(stack)) == 8
    assert {(r.engine, r.kind, engine_name(r.engine, r.kind, r.name, r.project))
            for r in listing.list_resources(stack, lifecycle="stale").items} == planted["stale"]
    deleted = {r.id for r in listing.list_resources(stack, lifecycle="deleted", limit=200).items}
    assert gone_id in deleted and len(deleted) == 1 + len(planted["retained"])
    events = listing.resource_history(stack, "gone", project=planted["gone"], kind="role").events
    assert [(e.kind, e.cause) for e in events if e.kind != "provision"] == [("gc.drop", "prune")]


@pytest.mark.parametrize("engine, kind, name, owner", [
    ("postgres", "database", "shop", "shop"), ("postgres", "database", "my-db", "shop"),
    ("postgres", "role", "readers", "my-app"), ("postgres", "user", "ro", "shop"),
    ("redis", "acl_user", "shop", "shop"), ("redis", "redis_index", "cache", "shop"),
    ("minio", "bucket", "media", "shop"), ("minio", "lifecycle", "tmp-expiry", "shop"),
    ("minio", "access_key", "shop", "shop"),
    ("localstack", "queue", "jobs.fifo", "shop"), ("localstack", "queue", "shop.fifo", "shop"),
    ("localstack", "topic", "events", "shop"), ("localstack", "table", "items", "shop"),
    ("nats", "stream", "orders", "shop"), ("nats", "consumer", "worker", "shop"), ("nats", "kv", "shop", "shop"),
    ("kafka", "topic", "clicks.v2", "shop"), ("kafka", "acl", "shop", "shop"),
])
def test_declaration_name_inverts_engine_names(engine, kind, name, owner):
    mapped = engine_name(engine, kind, name, owner)
    back = declaration_name(engine, kind, mapped, owner)
    assert back is not None and engine_name(engine, kind, back, owner) == mapped


def test_unmappable_engine_name_has_no_declaration_name():
    assert declaration_name("kafka", "topic", "a b", "shop") is None
    assert declaration_name("postgres", "role", "Bad Name", "shop") is None


def test_prune_reports_an_orphan_it_cannot_name(admin, local_shared):
    config = workspace_config(local_shared, admin, "unused", [])
    item = gc.GcItem(engine="kafka", instance="kafka", kind="topic", engine_name="x", project=None, stack=None,
                         name=None, reason="test")
    pruned, errors = gc.prune_orphans(config, [item])
    assert pruned == [] and "no declaration name maps to it" in errors[0].error


def test_a_minio_that_does_not_answer_is_named_in_the_scan_of_its_access_keys(admin, local_shared):
    """Its admin calls had failed as urllib3's MaxRetryError alone ("cannot scan: MaxRetryError ...")."""
    from devstack import scan

    shared = {"objects": {**local_shared["objects"], "port": 1}}
    instance = instances_from_config(workspace_config(shared, admin, "unused", []))["objects"]
    with pytest.raises(EngineUnavailable, match=r"minio instance 'objects' at 127\.0\.0\.1:1: .*start it with"):
        scan.scan(instance, {"access_key"})


def test_a_resource_another_workspace_re_marked_is_never_this_ones_orphan(monkeypatch, admin, local_shared):
    """Both workspaces list project `shop`; the other one's up re-marked the bucket. This workspace
    has stopped listing `shop`: the bucket is the other's now, never an orphan to prune here."""
    ident = Identity(engine="minio", instance="objects", kind="bucket", name="logs", owner="shop")
    found = Found("minio", "objects", "bucket", "shop-logs", "shop", "other-workspace")
    monkeypatch.setattr(gc, "_scan_all", lambda instances, filters: ([found], ["objects"], []))
    tracked = [state.Tracked(urn="urn:shop/objects/bucket/logs", ident=ident, props={"stack": "this"},
                              secrets=frozenset(), entry={})]
    config = workspace_config(local_shared, admin, "this", [])
    report = gc.reconcile("this", "this@c0ffee", models.Filters(), config, set(), tracked)
    assert report.orphans == [] and report.stale == []
    assert [(o.engine_name, o.stack) for o in report.other_workspaces] == [("shop-logs", "other-workspace")]
    # Marked for this workspace (also as markers were before they named the ledger, or for none,
    # as older markers are), the ledger's entry makes it this workspace's: held by the ledger, never an
    # orphan, though the workspace no longer lists `shop` (the next up settles it).
    for stack in ("this@c0ffee", "this", None):
        monkeypatch.setattr(gc, "_scan_all", lambda instances, filters, stack=stack: (
            [Found("minio", "objects", "bucket", "shop-logs", "shop", stack)], ["objects"], []))
        report = gc.reconcile("this", "this@c0ffee", models.Filters(), config, set(), tracked)
        assert (report.orphans, report.other_workspaces, report.managed) == ([], [], 1)


def test_an_update_of_the_workspace_alone_re_marks_every_kind(admin, local_shared):
    """The first up after markers began to name their ledger changes only `stack`: every kind's
    update must write it into the engine, or gc would never count the resource as this workspace's."""
    from devstack.scan import scan

    p = f"m{token()}"
    config = workspace_config(local_shared, admin, "remark", [])
    instances = instances_from_config(config)
    made = []
    try:
        for engine, instance, kind, name, params in orphan_plan(p):
            provider = state.configured_provider(config, engine, kind)
            props = {"engine": engine, "instance": instance, "kind": kind, "name": name, "owner": p,
                     "params": params, "credentials": "predictable", "purge": False, "stack": "remark",
                     "naming": PREFIXED}
            made.append((engine, instance, kind, name, p))
            created = provider.create(props)
            provider.update(created.id, created.outs, {**props, "stack": "remark@c0ffee"})
        marks = {}
        for instance in instances.values():
            for f in scan(instance, set(registry.kinds(instance.engine))):
                if f.owner == p:
                    marks[(f.engine, f.kind, f.engine_name)] = f.stack
        expected = {(e, k, engine_name(e, k, n, p)) for e, _, k, n, _ in orphan_plan(p)}
        assert set(marks) == expected
        assert {key for key, stack in marks.items() if stack != "remark@c0ffee"} == set()
    finally:
        for engine, instance, kind, name, owner in reversed(made):
            drop_quietly(config, engine, instance, kind, name, owner)
        drop_quietly(config, "nats", "events", "account", p, p)  # the account its nats kinds made


def test_outside_the_ledger_only_this_ledgers_own_mark_is_an_orphan(monkeypatch, admin, local_shared):
    """Not in the ledger, nothing proves a bare-named or another ledger's marker is this workspace's."""
    config = workspace_config(local_shared, admin, "this", [])
    kinds = {("this@c0ffee", False): "orphans", ("this@c0ffee", True): "retained",
             ("this", True): "other_workspaces", ("this@beef00", True): "other_workspaces"}
    for (stack, listed), where in kinds.items():
        monkeypatch.setattr(gc, "_scan_all", lambda instances, filters, stack=stack: (
            [Found("minio", "objects", "bucket", "shop-logs", "shop", stack)], ["objects"], []))
        report = gc.reconcile("this", "this@c0ffee", models.Filters(), config, {"shop"} if listed else set(), [])
        assert [o.engine_name for o in getattr(report, where)] == ["shop-logs"], stack


def test_an_instance_alias_or_a_renamed_instance_never_makes_a_managed_resource_an_orphan(admin, local_shared):
    """The ledger's role lives on `pg`. A second instance name for that server (`localhost`), or `pg`
    renamed in the config before the up that follows: gc finds the role once, as managed, never as an
    orphan of its own workspace (prune would have dropped it)."""
    p = f"a{token()}"
    config = workspace_config(local_shared, admin, "alias", [])
    pg = local_shared["pg"]
    create(config, "postgres", "pg", "role", "readers", p, "alias@c0ffee")
    try:
        tracked = [state.Tracked(urn=f"urn:{p}/pg/role/readers", ident=Identity("postgres", "pg", "role", "readers", p),
                                  props={"stack": "alias@c0ffee", "host": pg["host"], "port": float(pg["port"])},
                                  secrets=frozenset(), entry={})]
        aliased = {"pg": pg, "pgalias": {**pg, "host": "localhost"}}
        renamed = {"pgnew": pg}
        for shared in (aliased, renamed):
            config = workspace_config(shared, admin, "alias", [])
            report = gc.reconcile("alias", "alias@c0ffee", models.validate_filters("postgres", None, p), config, {p},
                                  tracked)
            assert (report.managed, report.orphans, report.stale) == (1, [], []), sorted(shared)
    finally:
        drop_quietly(workspace_config(local_shared, admin, "alias", []), "postgres", "pg", "role", "readers", p)


def test_an_orphan_adopted_while_the_question_is_open_is_left(planted):
    """Another workspace's up re-marks the orphan queue while `gc --prune` waits for its yes: the
    drop is checked against a fresh scan, so the queue stays and the report says why."""
    from devstack.scan import scan

    config, p = planted["config"], planted["project"]
    queue = f"{p}-q"

    def adopt_then_confirm(_text: str) -> bool:
        # A workspace the project moves to: its `adopt` names the one gc runs for.
        moving = {**config, "devstack:workspace": {**config["devstack:workspace"],
                                                   "adopt": {p: planted["stack"].name}}}
        provider = state.configured_provider(moving, "localstack", "queue")
        props = {"engine": "localstack", "instance": "aws", "kind": "queue", "name": "q", "owner": p,
                 "params": {}, "credentials": "predictable", "purge": False, "stack": "elsewhere@beef00",
                 "naming": PREFIXED}
        created = provider.create(props)
        provider.update(created.id, created.outs, props)
        return True

    report = gc.collect_garbage(planted["stack"], kind="queue", project=p, prune=True, include_retained=True,
                                    confirm=adopt_then_confirm)
    assert [o.engine_name for o in report.retained] == [queue] and report.pruned == []
    assert [e.error for e in report.errors] == [
        f"localstack/aws/queue/{queue}: no longer an orphan when confirmed (adopted or re-marked meanwhile); "
        "left as it is"]
    live = [f for f in scan(instances_from_config(config)["aws"], {"queue"}) if f.engine_name == queue]
    assert [f.stack for f in live] == ["elsewhere@beef00"]


@contextmanager
def database_cut_short(local_shared, admin, workspace: str, statement: str) -> Iterator[tuple[dict, Any, str]]:
    """(config, instance, project): a fresh project's database marked for `<workspace>@c0ffee`, then
    `statement` (`{}`: the database) run on it as a create or a purge cut short leaves it. The scan
    still finds it, for that project and workspace; whatever is left is dropped at the end."""
    from devstack.scan import scan

    p = f"c{token()}"
    config = workspace_config(local_shared, admin, workspace, [])
    instance = instances_from_config(config)["pg"]
    create(config, "postgres", "pg", "database", p, p, f"{workspace}@c0ffee")
    try:
        with _pg(instance) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(p)))
        found = [f for f in scan(instance, {"database"}) if f.engine_name == p]
        assert [(f.owner, f.stack) for f in found] == [(p, f"{workspace}@c0ffee")]
        yield config, instance, p
    finally:
        drop_quietly(config, "postgres", "pg", "database", p, p)


def test_a_database_left_without_its_comment_is_its_role_projects_as_the_provider_says(admin, local_shared):
    """CREATE DATABASE cannot share a transaction with its COMMENT: a create cut between them leaves the
    database bare, and the provider takes it for the project whose role owns it. So does gc: in the
    ledger it is managed, not foreign and stale at once (which no refresh or up would ever clear).
    Outside the ledger it is never an orphan to prune: one made by hand for that role looks the same."""
    with database_cut_short(local_shared, admin, "bare", "COMMENT ON DATABASE {} IS NULL") as (config, instance, p):
        ident = Identity("postgres", "pg", "database", p, p)
        assert state.configured_provider(config, "postgres", "database").observe(instance, ident).owner == p
        filters = models.validate_filters("postgres", "database", p)
        tracked = [state.Tracked(urn=f"urn:{p}", ident=ident, props={"stack": "bare@c0ffee"},
                                  secrets=frozenset(), entry={})]
        managed = gc.reconcile("bare", "bare@c0ffee", filters, config, {p}, tracked)
        assert (managed.managed, managed.stale, managed.foreign) == (1, [], [])
        outside = gc.reconcile("bare", "bare@c0ffee", filters, config, set(), [])
        assert outside.orphans == [] and [o.engine_name for o in outside.other_workspaces] == [p]


def test_an_entry_a_refresh_marked_stale_is_still_listed_stale(admin, local_shared):
    """A refresh keeps what it misses, stale: gc lists it as stale, saying when it was last seen, and once
    it is back in the engine (an up made it again) as managed."""
    p = f"st{token()}"
    config = workspace_config(local_shared, admin, "st", [])
    ident = Identity("postgres", "pg", "database", p, p)
    filters = models.validate_filters("postgres", "database", p)

    def tracked(lifecycle: str) -> list[state.Tracked]:
        props = {"stack": "st@c0ffee", "lifecycle": lifecycle, "lastSeen": "2026-01-02T03:04:05Z"}
        return [state.Tracked(urn=f"urn:{p}", ident=ident, props=props, secrets=frozenset(), entry={})]

    missing = gc.reconcile("st", "st@c0ffee", filters, config, {p}, tracked("stale"))
    assert [(s.engine_name, s.project, s.name) for s in missing.stale] == [(p, p, p)]
    assert "marked stale by a refresh, last seen 2026-01-02T03:04:05Z" in missing.stale[0].reason
    never_refreshed = gc.reconcile("st", "st@c0ffee", filters, config, {p}, tracked("active"))
    assert "`pulumi refresh` marks it stale, keeping it" in never_refreshed.stale[0].reason
    try:
        create(config, "postgres", "pg", "database", p, p, "st@c0ffee")
        back = gc.reconcile("st", "st@c0ffee", filters, config, {p}, tracked("stale"))
        assert (back.managed, back.stale, back.orphans) == (1, [], [])
    finally:
        drop_quietly(config, "postgres", "pg", "database", p, p)


def test_a_login_role_a_cut_purge_left_without_its_database_is_an_orphan_that_prune_drops(admin, local_shared):
    """A purge cut between DROP DATABASE and DROP ROLE leaves the project's LOGIN role, password and all;
    the refresh `devstack recover` runs then marks the database stale. gc lists what is left as that
    database, and --prune finishes the drop."""
    with database_cut_short(local_shared, admin, "cut", "DROP DATABASE {}") as (config, instance, p):  # the purge
        # Its project no longer in the workspace: an orphan (still listed, it would be retained).
        report = gc.reconcile("cut", "cut@c0ffee", models.validate_filters("postgres", "database", p), config, set(), [])
        assert [o.engine_name for o in report.orphans] == [p]
        assert gc.prune_orphans(config, report.orphans) == ([f"postgres/pg/database/{p}@{p}"], [])
        with _pg(instance) as conn:
            assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (p,)).fetchone() is None


def test_a_user_made_anew_by_hand_under_a_stale_registry_marker_is_never_an_orphan(admin, local_shared):
    """Redis and MinIO keep a user's marker apart from it. The user deleted out of band and one of that
    name made again by hand (other rules, no devstack policy): the marker no longer fits, so the user
    is not provably this workspace's and gc never lists it as an orphan to prune."""
    from providers.minio import client as minio

    p = f"u{token()}"
    config = workspace_config(local_shared, admin, "anew", [])
    instances = instances_from_config(config)
    filters = models.validate_filters(None, None, p)
    made = [("redis", "cache", "acl_user", p, p), ("minio", "objects", "access_key", p, p)]
    try:
        for identity in made:
            create(config, *identity, "anew@c0ffee")
        report = gc.reconcile("anew", "anew@c0ffee", filters, config, set(), [])
        assert sorted((o.engine, o.engine_name) for o in report.orphans) == [("minio", p), ("redis", p)]
        with _redis(instances["cache"]) as client:
            client.acl_deluser(p)
            client.acl_setuser(p, enabled=True, nopass=True, keys=["*"], commands=["+@all"])
        admin_client = minio.admin_client(instances["objects"])
        admin_client.user_remove(p)
        admin_client.user_add(p, "hand-made-secret-1")
        report = gc.reconcile("anew", "anew@c0ffee", filters, config, set(), [])
        assert report.orphans == []
        assert {(o.engine, o.engine_name) for o in report.other_workspaces} == {("minio", p), ("redis", p)}
        assert all("made anew by hand" in o.reason and "not provably this workspace's" in o.reason
                   for o in report.other_workspaces)
    finally:
        for engine, instance, kind, name, owner in made:
            drop_quietly(config, engine, instance, kind, name, owner)
        with _redis(instances["cache"]) as client:
            client.acl_deluser(p)
        try:
            minio.admin_client(instances["objects"]).user_remove(p)
        except Exception:  # already gone
            pass


def test_gc_refuses_a_workspace_whose_projects_key_is_misspelt(tmp_path):
    """`project:` for `projects:` would make every project the workspace lists look unlisted, and
    `--prune` drop what the ledger tracks as orphans."""
    sandbox = tracking_alpha(tmp_path, {"project": ["alpha/devstack.yaml"]})
    done = sandbox.cli("resource", "gc", "--prune", "--yes", "-w", "w")
    assert done.returncode == InvalidQuery.exit_code and "Traceback" not in done.stderr, done.stderr
    assert "Pulumi.w.yaml:" in done.stderr and "config.devstack:workspace.project: unknown field" in done.stderr
    assert box_ids(sandbox, "w") == {"postgres/pg/database/alpha@alpha"}


@pytest.mark.parametrize("text, why", [
    ("name: p\nresources: [\n", "not valid YAML at line 3: "),
    ("resources: []\n", "it has no top-level name"),
])
def test_gc_names_a_project_file_it_cannot_read_on_one_line(tmp_path, text, why):
    from pulumi import automation as auto

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("broken", create=True)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "devstack.yaml").write_text(text)
    shared = {"cache": {"engine": "redis", "host": "127.0.0.1", "port": PORTS["redis"], "adminUser": "default",
                        "adminSecret": "cacheAdmin"}}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "broken", "shared": shared, "projects": ["p/devstack.yaml"]})))
    stack.set_config("devstack:cacheAdmin", auto.ConfigValue("x", secret=True))
    done = sandbox.cli("resource", "gc", "-w", "broken")
    assert done.returncode == InvalidQuery.exit_code and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"project file p/devstack.yaml cannot be read ({why}" in done.stderr


def test_gc_in_another_checkout_with_the_same_stack_name_leaves_this_ones_resources(
    sandbox, tmp_path, admin, local_shared, names
):
    """Two clones (or worktrees), each with its own ledger and the default stack name, on the same
    engines: the second's gc must not take the first's resources for its orphans."""
    a, b = names
    clone = Sandbox(env=make_env(tmp_path / "clone-pulumi"), work=tmp_path / "clone")
    clone.work.mkdir()
    (clone.work / "__main__.py").write_text((sandbox.work / "__main__.py").read_text())
    user = [{"uses": "cache", "kind": "acl_user"}]
    first = configure_stack(sandbox, "twin", local_shared, admin, [write(sandbox, a, user)])
    first.up()
    # The marker names the ledger, not the path: the same stack run from elsewhere (a teammate on a shared
    # backend, a moved checkout) re-marks nothing.
    shutil.copytree(sandbox.work, tmp_path / "moved")
    moved = Sandbox(env=sandbox.env, work=tmp_path / "moved").open("twin").preview().change_summary
    assert set(moved) == {"same"}, moved
    configure_stack(clone, "twin", local_shared, admin, [write(clone, b, user)]).up()

    swept = clone.cli_json("resource", "gc", "--prune", "--yes", "--engine", "redis", "-w", "twin")
    assert swept["orphans"] == [] and swept["pruned"] == []
    theirs = next(o for o in swept["other_workspaces"] if o["engine_name"] == a)
    assert "another ledger's stack 'twin'" in theirs["reason"] and acl_user_exists(admin, local_shared, a)

    # In its own checkout, once no longer declared (retained by the up, its project still listed), it is
    # retained there: --prune leaves it, --include-retained drops it.
    write(sandbox, a, [])
    first.up()
    assert acl_user_exists(admin, local_shared, a)
    kept = sandbox.cli_json("resource", "gc", "--prune", "--yes", "--engine", "redis", "-w", "twin")
    assert [o["engine_name"] for o in kept["retained"]] == [a] and kept["orphans"] == kept["pruned"] == []
    assert acl_user_exists(admin, local_shared, a)
    mine = sandbox.cli_json("resource", "gc", "--prune", "--include-retained", "--yes", "--engine", "redis",
                            "-w", "twin")
    assert [o["engine_name"] for o in mine["retained"]] == [a] and len(mine["pruned"]) == 1
    assert not acl_user_exists(admin, local_shared, a) and acl_user_exists(admin, local_shared, b)


def test_a_prune_from_python_records_its_drops_and_leaves_an_unreachable_instance_as_it_was(sandbox, admin,
                                                                                          local_shared):
    """collect_garbage(prune=True), as devstack.api calls it: the orphan pruned is a tombstone (gc.drop,
    cause prune); on the instance scanned, the entry found is active and seen now, the one missing
    stale, its last seen kept; on the instance that did not answer, an entry it may not hold stays active."""
    from tools.engines.base import closed_port

    p, gone, workspace = f"r{token()}", f"s{token()}", f"gh{token()}"
    (sandbox.work / p).mkdir()
    (sandbox.work / p / "devstack.yaml").write_text(f"apiVersion: devstack/v1\nkind: Project\nname: {p}\n"
                                                    "resources: []\n")
    shared = {"pg": local_shared["pg"], "cache": {**local_shared["cache"], "port": closed_port()}}
    config = workspace_config(shared, admin, workspace, [f"{p}/devstack.yaml"])
    stack = configured(sandbox, workspace, config)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": f"{p}-missing", "owner": p},
            {"engine": "postgres", "instance": "pg", "kind": "role", "name": "managed", "owner": p},
            {"engine": "redis", "instance": "cache", "kind": "acl_user", "name": p, "owner": p}]
    import_state(stack, synthetic_resources(workspace, rows))
    mark = marker_workspace(workspace, encryption_salt(Path(stack.workspace.work_dir), workspace))
    made = [("postgres", "pg", "role", "managed", p), ("postgres", "pg", "role", "orphan", gone)]
    try:
        for identity in made:
            create(config, *identity, mark)
        started = datetime.now(timezone.utc)
        report = gc.collect_garbage(stack, prune=True, confirm=lambda text: True)
    finally:
        for identity in made:
            drop_quietly(config, *identity)
    assert report.pruned == [f"postgres/pg/role/orphan@{gone}"] and report.managed == 1
    assert report.scanned == ["pg"] and [e.instance for e in report.errors] == ["cache"]

    def rows_of(lifecycle: str) -> dict[str, models.Resource]:
        return {r.id: r for r in listing.list_resources(stack, lifecycle=lifecycle).items}

    missing, managed, unreached = (f"postgres/pg/database/{p}-missing@{p}", f"postgres/pg/role/managed@{p}",
                                   f"redis/cache/acl_user/{p}@{p}")
    stale, active = rows_of("stale"), rows_of("active")
    assert set(stale) == {missing} and set(active) == {managed, unreached}
    assert stale[missing].last_seen < started and active[unreached].last_seen < started  # the state's, kept
    assert active[managed].last_seen >= started  # seen by this scan
    assert set(rows_of("deleted")) == {f"postgres/pg/role/orphan@{gone}"}
    events = listing.resource_history(stack, "orphan", project=gone, kind="role").events
    assert [(e.kind, e.cause) for e in events] == [("gc.drop", "prune")]
