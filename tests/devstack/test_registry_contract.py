"""CON-8's registry contract, run against every store of the ledger: the file backend, `postgres://`, `s3://`.

Each store gets one module-scoped backend (a temporary directory; a temporary database on the local
PostgreSQL; a temporary bucket on the local MinIO). Ledgers are synthetic deployments imported with `pulumi stack import`; no engine is
touched except by the failed-scan case, which points an instance at a closed port.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pulumi import automation as auto

from devstack import history, ledger, state
from devstack.errors import AlreadyExists, InvalidQuery, InvalidTransition, NotFound, ScopeMismatch, StaleObservation
from tests.devstack.conftest import Sandbox, import_state, make_env, synthetic_resources, token
from tests.devstack.test_ledger import postgres_backend
from tests.devstack.test_s3_backend import s3_backend

STORES = ("file", "postgres", "s3")


@pytest.fixture(scope="module", params=STORES)
def backend(request, tmp_path_factory, admin):
    """(sandbox, backend URL or None for the sandbox's file backend, store name)."""
    base = tmp_path_factory.mktemp(f"registry-{request.param}")
    work = base / "work"
    work.mkdir()
    box = Sandbox(env=make_env(base / "pulumi"), work=work)
    if request.param == "file":
        yield box, None, "file"
    elif request.param == "s3":
        with s3_backend(admin, "registry") as (url, aws, _client):
            box.env.update(aws)
            yield box, url, "s3"
    else:
        with postgres_backend(admin, "registry") as (url, _connect, _database):
            yield box, url, "postgres"


def open_new(backend, rows: list[dict]) -> auto.Stack:
    box, url, _ = backend
    name = f"s{token()}"
    stack = ledger.open_stack(name, url, box.work, env=box.env, create=True)
    import_state(stack, synthetic_resources(name, rows))
    return stack


def row(name: str, owner: str = "p0", engine: str = "redis", instance: str = "cache", kind: str = "acl_user",
        **outputs) -> dict:
    return {"engine": engine, "instance": instance, "kind": kind, "name": name, "owner": owner, "attributes": outputs}


def ident(r: dict) -> str:
    return f"{r['engine']}/{r['instance']}/{r['kind']}/{r['name']}@{r['owner']}"


def lifecycle_of(stack, rid: str) -> str:
    return next(e.lifecycle for e in history.read(stack).entries if e.id == rid)


# --- reads: ordering, limits, filters, cursors -------------------------------------------------------


BIG = [row(f"n{i:03d}", owner=f"p{i % 5}", instance=("cache", "cache2")[i % 2],
           kind=("acl_user", "redis_index")[i % 3 == 0]) for i in range(250)]


@pytest.fixture(scope="module")
def big(backend):
    return open_new(backend, BIG)


def pages(stack, limit: int | None = None, **filters) -> list:
    out, cursor = [], None
    while True:
        page = ledger.list_resources(stack, cursor=cursor, **({"limit": limit} if limit else {}), **filters)
        out.append(page)
        if (cursor := page.next_cursor) is None:
            return out


def test_pages_are_ordered_complete_and_bounded(big):
    walked = pages(big)
    assert [len(p.items) for p in walked] == [100, 100, 50]  # default limit 100
    keys = [(r.project, r.engine, r.instance, r.kind, r.name) for p in walked for r in p.items]
    assert keys == sorted(keys) and len(set(keys)) == 250
    assert [len(p.items) for p in pages(big, limit=200)] == [200, 50]  # the maximum
    for bad in (0, 201):
        with pytest.raises(InvalidQuery, match="out of range"):
            ledger.list_resources(big, limit=bad)
    # The limit may change between pages: the cursor binds the filters, not the page size.
    first = ledger.list_resources(big, limit=7)
    assert ledger.list_resources(big, limit=50, cursor=first.next_cursor).items[0].id == keys_id(keys[7])


def keys_id(key: tuple) -> str:
    project, engine, instance, kind, name = key
    return f"{engine}/{instance}/{kind}/{name}@{project}"


@pytest.mark.parametrize("filters, predicate", [
    pytest.param({"instance": "cache2"}, lambda r: r["instance"] == "cache2", id="instance"),
    pytest.param({"name": "n042"}, lambda r: r["name"] == "n042", id="name"),
    pytest.param({"project": "p3", "kind": "redis_index"}, lambda r: r["owner"] == "p3" and r["kind"] == "redis_index",
                 id="project+kind"),
    pytest.param({"instance": "cache", "lifecycle": "active"}, lambda r: r["instance"] == "cache", id="lifecycle"),
    pytest.param({"lifecycle": "stale"}, lambda r: False, id="no-stale"),
    pytest.param({"name": "n04"}, lambda r: False, id="exact-only"),
])
def test_filters_are_exact_matches(big, filters, predicate):
    got = [r.id for p in pages(big, limit=60, **filters) for r in p.items]
    assert got == sorted((ident(r) for r in BIG if predicate(r)), key=lambda i: _key(i))


def _key(rid: str) -> tuple:
    path, owner = rid.split("@")
    engine, instance, kind, name = path.split("/")
    return (owner, engine, instance, kind, name)


def test_a_cursor_is_bound_to_every_filter_and_the_workspace(big, backend):
    cursor = ledger.list_resources(big, instance="cache", limit=5).next_cursor
    assert ledger.list_resources(big, instance="cache", limit=5, cursor=cursor).items[0].instance == "cache"
    for other in ({}, {"instance": "cache2"}, {"instance": "cache", "lifecycle": "active"},
                  {"instance": "cache", "name": "n000"}, {"instance": "cache", "project": "p0"}):
        with pytest.raises(ScopeMismatch) as raised:
            ledger.list_resources(big, limit=5, cursor=cursor, **other)
        assert isinstance(raised.value, InvalidQuery) and raised.value.exit_code == 6
    elsewhere = open_new(backend, BIG[:3])
    with pytest.raises(ScopeMismatch):
        ledger.list_resources(elsewhere, instance="cache", limit=5, cursor=cursor)
    for garbage in ("x", cursor[:-3]):
        with pytest.raises(InvalidQuery, match="malformed"):
            ledger.list_resources(big, instance="cache", cursor=garbage)
    with pytest.raises(InvalidQuery, match="no such lifecycle"):
        ledger.list_resources(big, lifecycle="gone")


# --- lifecycle --------------------------------------------------------------------------------------


LIFECYCLE_ROWS = [
    row("old"), row("seen", lifecycle="active", firstSeen="2026-01-05T00:00:00Z", lastSeen="2026-03-01T10:00:00Z"),
    row("missed", lifecycle="stale", firstSeen="2026-01-05T00:00:00Z", lastSeen="2026-02-01T00:00:00Z"),
]


@pytest.fixture(scope="module")
def observed(backend):
    return open_new(backend, LIFECYCLE_ROWS)


def test_lifecycle_from_the_state_and_its_clocks(observed, validator):
    """The providers' outputs (lifecycle, firstSeen, lastSeen) are read as they are; an entry without
    them is active with the entry's created/modified as clocks."""
    page = ledger.list_resources(observed)
    got = {r.name: (r.lifecycle, r.first_seen, r.last_seen) for r in page.items}
    assert got["old"][0] == "active" and got["old"][1].isoformat().startswith("2026-01-01")
    assert got["seen"] == ("active", datetime(2026, 1, 5, tzinfo=timezone.utc), datetime(2026, 3, 1, 10, tzinfo=timezone.utc))
    assert got["missed"][0] == "stale"
    assert "lifecycle" not in page.items[0].attributes
    assert [r.name for r in ledger.list_resources(observed, lifecycle="stale").items] == ["missed"]
    validator("resource-list.schema.json", page.as_json())
    validator("resource-show.schema.json", ledger.show_resource(observed, "missed").as_json())


def test_a_failed_instance_scan_marks_nothing_stale(observed):
    """gc's scan of an instance it cannot reach reports the error and marks nothing (not even a stale)."""
    shared = {"cache": {"engine": "redis", "host": "127.0.0.1", "port": 1, "adminUser": "default",
                        "adminSecret": "cacheAdmin"}}
    observed.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": observed.name, "shared": shared, "projects": []})))
    observed.set_config("devstack:cacheAdmin", auto.ConfigValue("x", secret=True))
    report = ledger.collect_garbage(observed, engine="redis")
    assert report.errors and report.scanned == [] and report.stale == []
    assert {r.name: r.lifecycle for r in ledger.list_resources(observed).items} == {
        "old": "active", "seen": "active", "missed": "stale"}
    assert not [r for r in history.store_for(observed).load()["records"].values() if r["lifecycle"] == "stale"]


def test_transitions_active_stale_active_deleted(backend):
    r = row("t1")
    stack, rid = open_new(backend, [r]), ident(r)
    now = datetime.now(timezone.utc)
    ledger.mark_stale(stack, rid, now - timedelta(seconds=30))
    assert lifecycle_of(stack, rid) == "stale"
    with pytest.raises(StaleObservation):  # older than the stale decision
        ledger.observe(stack, rid, now - timedelta(seconds=40))
    assert ledger.observe(stack, rid, now - timedelta(seconds=20)).lifecycle == "active"
    ledger.record_removal(stack, [rid], "rm", at=now - timedelta(seconds=10))
    assert lifecycle_of(stack, rid) == "deleted"
    with pytest.raises(InvalidTransition, match="cannot become stale"):
        ledger.mark_stale(stack, rid, now)
    # A delayed observation from before the deletion does not resurrect it; a fresh one does.
    with pytest.raises(StaleObservation, match="before its deletion"):
        ledger.observe(stack, rid, now - timedelta(seconds=15))
    assert lifecycle_of(stack, rid) == "deleted"
    assert ledger.observe(stack, rid, now).lifecycle == "active"
    with pytest.raises(InvalidQuery, match="ahead of this clock"):
        ledger.observe(stack, rid, now + timedelta(minutes=5))
    with pytest.raises(NotFound):
        ledger.mark_stale(stack, "redis/cache/acl_user/nope@p0", now)


def test_an_older_state_imported_after_a_deletion_does_not_resurrect_it(backend):
    r = row("back")
    stack, rid = open_new(backend, [r]), ident(r)
    ledger.sync_history(stack)
    ledger.record_removal(stack, [rid], "rm")
    assert lifecycle_of(stack, rid) == "deleted"  # still in the state, observed before: a delayed observation
    fresh = synthetic_resources(stack.name, [r])
    stamp = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    fresh[-1]["created"] = fresh[-1]["modified"] = stamp  # what an `up` that makes it again writes
    import_state(stack, fresh)
    assert lifecycle_of(stack, rid) == "active"


# --- tombstones and events ------------------------------------------------------------------------


def test_what_leaves_the_state_stays_a_tombstone_with_its_events(backend, validator):
    rows = [row("keep"), row("gone", password_hint="x"), row("swap")]
    stack = open_new(backend, rows)
    ledger.sync_history(stack)
    swapped = synthetic_resources(stack.name, [rows[0], rows[2]])
    swapped[-1]["created"] = "2026-04-01T00:00:00.000000001Z"  # a replacement: a new object under the same id
    swapped[-1]["modified"] = "2026-04-01T00:00:00.000000001Z"
    import_state(stack, swapped)  # `gone` left the state with no record saying why
    deleted = ledger.list_resources(stack, lifecycle="deleted")
    assert [r.name for r in deleted.items] == ["gone"] and deleted.items[0].deleted_at is not None
    assert deleted.items[0].attributes == {"password_hint": "x"}
    assert ledger.list_resources(stack).total == 2  # tombstones only when asked for
    assert ledger.show_resource(stack, "gone").lifecycle == "deleted"
    gone = ledger.resource_history(stack, "gone")
    assert [(e.kind, e.cause) for e in gone.events] == [("provision", "state"), ("drop", "state")]
    swap = ledger.resource_history(stack, "swap")
    assert [(e.kind, e.cause) for e in swap.events] == [("provision", "state"), ("drop", "replace"),
                                                        ("provision", "replace")]
    validator("resource-history.schema.json", gone.as_json())
    # A verb's own record says why; a second one is refused, nothing duplicated.
    ledger.record_removal(stack, [ident(rows[0])], "rm")
    with pytest.raises(AlreadyExists):
        ledger.record_removal(stack, [ident(rows[0])], "rm")
    keep = ledger.resource_history(stack, "keep")
    assert [(e.kind, e.cause) for e in keep.events] == [("provision", "state"), ("drop", "rm")]
    # A prune drops an orphan the state never held: a gc.drop tombstone of its own.
    orphan = history.snapshot_row("redis", "cache", "acl_user", "orph", "p9", engineName="p9_orph")
    ledger.record_removal(stack, [], "prune", kind="gc.drop", rows=[orphan])
    assert [e.kind for e in ledger.resource_history(stack, "orph").events] == ["gc.drop"]


def test_cli_lists_tombstones_and_prints_history(backend, validator):
    box, url, _ = backend
    r = row("cli")
    stack = open_new(backend, [r])
    ledger.sync_history(stack)
    ledger.record_removal(stack, [ident(r)], "destroy")
    env = {**box.env, **({"PULUMI_BACKEND_URL": url} if url else {})}
    user = Sandbox(env=env, work=box.work)
    listed = user.cli_json("resource", "list", "-w", stack.name, "--lifecycle", "deleted", "--name", "cli")
    validator("resource-list.schema.json", listed)
    assert [i["lifecycle"] for i in listed["items"]] == ["deleted"]
    text = user.cli("resource", "history", "cli", "-w", stack.name)
    assert text.returncode == 0 and text.stdout.startswith(f"{ident(r)}: deleted since")
    assert [line.split()[2:4] for line in text.stdout.splitlines()[2:]] == [["provision", "state"], ["drop", "destroy"]]


# --- concurrency, delayed and failed scans --------------------------------------------------------


def test_concurrent_first_writes_make_one_record(backend):
    rows = [row(f"c{i}") for i in range(3)]
    stack = open_new(backend, rows)  # its history store has never been written (no file, no row)
    outcomes: list[object] = []
    barrier = threading.Barrier(4)

    def write(ids: list[str]) -> None:
        barrier.wait()
        try:
            outcomes.append(ledger.record_removal(stack, ids, "rm"))
        except AlreadyExists as err:
            outcomes.append(err)

    threads = [threading.Thread(target=write, args=(ids,)) for ids in
               ([ident(rows[0])], [ident(rows[0])], [ident(rows[1])], [ident(rows[2])])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(isinstance(o, AlreadyExists) for o in outcomes) == 1 and len(outcomes) == 4
    ledger_now = history.read(stack)
    assert sorted(e.id for e in ledger_now.entries if e.lifecycle == "deleted") == sorted(map(ident, rows))
    drops = [e for e in ledger_now.events if e["kind"] == "drop"]
    assert sorted(e["id"] for e in drops) == sorted(map(ident, rows))  # never a duplicate, none lost
    box, url, store = backend
    where = history.store_for(stack).where  # beside the state, on the backend itself
    if store == "file":
        assert Path(where).is_file() and Path(where).is_relative_to(Path(box.env["PULUMI_BACKEND_URL"][7:]))
    elif store == "s3":
        bucket = url.split("/")[2]
        assert where == f"s3://{bucket}/team/.devstack-ledger/devstack/{stack.name.split('/')[-1]}.json"
        assert history.store_for(stack).load()["records"]  # the object beside the state, read back
    else:
        assert where.startswith("table devstack_ledger of postgres://") and url.split(":")[2].split("@")[0] not in where


def test_a_complete_scan_marks_what_it_missed_stale_and_a_delayed_one_changes_nothing(backend):
    rows = [row("a"), row("b"), row("c", instance="cache2")]
    stack = open_new(backend, rows)
    now = datetime.now(timezone.utc)
    done = ledger.reconcile(stack, "redis", "cache", [ident(rows[0])], now - timedelta(seconds=10))
    assert done == {"active": [ident(rows[0])], "stale": [ident(rows[1])], "skipped": []}
    assert lifecycle_of(stack, ident(rows[2])) == "active"  # another instance's: untouched
    late = ledger.reconcile(stack, "redis", "cache", [ident(rows[0]), ident(rows[1])], now - timedelta(seconds=20))
    assert late["skipped"] == [ident(rows[0]), ident(rows[1])] and lifecycle_of(stack, ident(rows[1])) == "stale"
    with pytest.raises(InvalidQuery, match="outside the scan's scope"):
        ledger.reconcile(stack, "redis", "cache", [ident(rows[2])], now)
    assert lifecycle_of(stack, ident(rows[1])) == "stale"  # the refused one changed nothing
    # An empty complete scan makes the scope stale, never deleted.
    ledger.reconcile(stack, "redis", "cache", [], now)
    assert {lifecycle_of(stack, ident(r)) for r in rows[:2]} == {"stale"}
    ledger.record_removal(stack, [ident(rows[1])], "rm", at=now + timedelta(seconds=1))
    assert ledger.reconcile(stack, "redis", "cache", [], now + timedelta(seconds=2))["stale"] == []


def test_the_scans_of_several_instances_are_recorded_with_one_export_all_or_nothing(backend, monkeypatch):
    rows = [row("a"), row("b"), row("c", instance="cache2"), row("d", instance="cache2")]
    stack = open_new(backend, rows)
    exports = []
    export = state.export_deployment
    monkeypatch.setattr(state, "export_deployment", lambda *args: exports.append(args) or export(*args))
    now = datetime.now(timezone.utc)
    cache, cache2 = (history.Scan("redis", "cache", frozenset({ident(rows[0])})),
                     history.Scan("redis", "cache2", frozenset({ident(rows[3])})))
    with pytest.raises(InvalidQuery, match="cache2.*outside the scan's scope"):
        history.reconcile_scans(stack, [cache, history.Scan("redis", "cache2", frozenset({ident(rows[0])}))], now)
    assert {e.lifecycle for e in history.read(stack).entries} == {"active"}  # the valid scan was not applied either
    exports.clear()
    done = history.reconcile_scans(stack, [cache, cache2], now)
    assert len(exports) == 1
    assert done == [{"active": [ident(rows[0])], "stale": [ident(rows[1])], "skipped": []},
                    {"active": [ident(rows[3])], "stale": [ident(rows[2])], "skipped": []}]
    lifecycles = {e.id: e.lifecycle for e in history.read(stack).entries}
    assert [lifecycles[ident(r)] for r in rows] == ["active", "stale", "stale", "active"]


def test_the_history_is_bounded(backend, monkeypatch):
    monkeypatch.setattr(history, "MAX_EVENTS", 10)
    monkeypatch.setattr(history, "MAX_TOMBSTONES", 4)
    rows = [row(f"b{i:02d}") for i in range(8)]
    stack = open_new(backend, rows)
    for i, r in enumerate(rows):
        ledger.record_removal(stack, [ident(r)], "rm", at=datetime.now(timezone.utc) - timedelta(seconds=60 - i))
    read = history.read(stack)
    assert len(read.events) == 10
    assert [e.id for e in read.entries if e.lifecycle == "deleted"] == [ident(r) for r in rows[4:]]
