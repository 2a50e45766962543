"""The state and the providers configured from the stack config: a malformed instance is named,
not a traceback; a purge refuses what another workspace adopted.

A project moved to another workspace: the new one adopts only from the workspace it names, and the old
workspace's purge refuses what the new one adopted.

Workspace B lists a project workspace A still tracks. Without `adopt` naming A for it, every create of B
meets A's marker and is a Conflict that changes nothing. With it, B's up adopts every resource and
re-marks it for B. A then stops declaring the project with `purge: true` (or destroys with
`--purge-data`): each purge is a Conflict naming B, and the data stays with B. B's own purge still drops
it. A lifecycle rule has no marker of its own and is the exception.
"""

from __future__ import annotations

import json

import pytest

from devstack import state
from devstack.errors import IdentityConflict, InvalidQuery
from devstack.scan import scan
from providers import registry
from providers.markers import marker_workspace
from providers.errors import Conflict
from providers.identity import PREFIXED, Identity
from providers.instances import instances_from_config
from tests.devstack.conftest import Sandbox, box_ids, import_state, make_env, synthetic_resources, token
from tests.devstack.test_gc import drop_quietly, engine_name, orphan_plan, workspace_config


def test_a_malformed_instance_in_the_stack_config_is_named_not_a_traceback(tmp_path):
    """gc, destroy --purge-data and the imperative verbs build engine clients from the shared instances:
    a bad field there is bad input (exit 2) named by file, line and field, and nothing is dropped."""
    from pulumi import automation as auto

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("bad", create=True)
    rows = [{"engine": "redis", "instance": "cache", "kind": "acl_user", "name": "alpha", "owner": "alpha"}]
    import_state(stack, synthetic_resources("bad", rows))
    shared = {"cache": {"engine": "redis", "host": "127.0.0.1", "port": "abc", "adminUser": "default",
                        "adminSecret": "cacheAdmin"}}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": "bad", "shared": shared, "projects": []})))
    stack.set_config("devstack:cacheAdmin", auto.ConfigValue("x", secret=True))
    for verb in (["resource", "gc"], ["destroy", "--purge-data", "--yes"], ["db", "create", "d1", "-p", "alpha", "--yes"]):
        done = sandbox.cli(*verb, "-w", "bad")
        assert done.returncode == InvalidQuery.exit_code and "Traceback" not in done.stderr, done.stderr
        assert "Pulumi.bad.yaml:" in done.stderr and "config.devstack:workspace.shared.cache.port:" in done.stderr
    assert box_ids(sandbox, "bad") == {"redis/cache/acl_user/alpha@alpha"}


def marks_of(config, owner: str) -> dict[tuple[str, str, str], str | None]:
    """(engine, kind, engine name) -> the workspace its marker records, for everything `owner` has."""
    found = {}
    for instance in instances_from_config(config).values():
        for f in scan(instance, set(registry.kinds(instance.engine))):
            if f.owner == owner:
                found[(f.engine, f.kind, f.engine_name)] = f.stack
    return found


def test_a_purge_refuses_every_kind_another_workspace_adopted(admin, local_shared):
    p = f"mv{token()}"
    config = workspace_config(local_shared, admin, "moved", [])
    old, new = marker_workspace("old", "the old workspace's salt"), marker_workspace("new", "the new one's salt")
    moving = {**config, "devstack:workspace": {**config["devstack:workspace"], "adopt": {p: old}}}
    plan = orphan_plan(p)
    expected = {(e, k, engine_name(e, k, n, p)) for e, _, k, n, _ in plan}
    made, old_outs, new_outs = [], [], []

    def create(config: dict, engine: str, instance: str, kind: str, name: str, params: dict, marker: str) -> dict:
        return state.configured_provider(config, engine, kind).create(
            {"engine": engine, "instance": instance, "kind": kind, "name": name, "owner": p, "params": params,
             "credentials": "predictable", "purge": True, "stack": marker, "naming": PREFIXED}).outs

    try:
        for engine, instance, kind, name, params in plan:
            made.append((engine, instance, kind, name, p))
            old_outs.append(create(config, engine, instance, kind, name, params, old))
        for engine, instance, kind, name, params in plan:
            if kind == "lifecycle":
                continue  # no marker of its own (in an up, its bucket's Conflict comes first)
            with pytest.raises(Conflict, match=f"of workspace '{old}'.*nothing was changed.*adopt: {{{p}: {old}}}"):
                create(config, engine, instance, kind, name, params, new)  # a workspace that does not say it moves
        assert marks_of(config, p) == dict.fromkeys(expected, old)

        for engine, instance, kind, name, params in plan:
            new_outs.append(create(moving, engine, instance, kind, name, params, new))
        assert marks_of(config, p) == dict.fromkeys(expected, new)  # the new workspace's up re-marked each one

        for (engine, instance, kind, name, _p), outs in reversed(list(zip(plan, old_outs))):
            if kind == "lifecycle":
                continue  # no marker of its own: the old workspace's purge would drop it
            provider = state.configured_provider(config, engine, kind)
            with pytest.raises(Conflict, match=f"its marker names workspace '{new}'.*nothing was changed"):
                provider.update("id", outs, {**outs, "purge": False})  # the old workspace's update would re-mark it
            with pytest.raises(Conflict, match=f"its marker names workspace '{new}'"):
                state.configured_provider(config, engine, kind).delete("id", outs)  # the old workspace's purge
            with pytest.raises(IdentityConflict, match=f"workspace '{new}'"):  # its rm/destroy --purge-data
                state.drop_data(config, Identity(engine, instance, kind, name, p), outs)
        assert marks_of(config, p) == dict.fromkeys(expected, new)  # nothing dropped, still the new one's

        for (engine, _i, kind, _n, _p), outs in reversed(list(zip(plan, new_outs))):
            state.configured_provider(config, engine, kind).delete("id", outs)  # the new workspace's purge
        assert marks_of(config, p) == {}
    finally:
        for engine, instance, kind, name, owner in reversed(made):
            drop_quietly(config, engine, instance, kind, name, owner)


def test_sibling_databases_of_one_project_keep_their_own_workspaces(admin, local_shared):
    """One login role serves all of a project's databases, whichever workspaces declare them: a database's
    workspace is its own marker's, so neither a purge nor gc takes one for another's. A second workspace
    declares another database of the project only once it says it adopts the project from the first:
    before, the project's login role, which the first one's databases log in as, refuses it."""
    p = f"sb{token()}"
    config = workspace_config(local_shared, admin, "siblings", [])
    first, second = marker_workspace("first", "its salt"), marker_workspace("second", "its salt")
    moving = {**config, "devstack:workspace": {**config["devstack:workspace"], "adopt": {p: "first"}}}

    def create(config: dict, name: str, marker: str) -> dict:
        return state.configured_provider(config, "postgres", "database").create(
            {"engine": "postgres", "instance": "pg", "kind": "database", "name": name, "owner": p,
             "params": {}, "credentials": "predictable", "purge": True, "stack": marker, "naming": PREFIXED}).outs

    provider = state.configured_provider(config, "postgres", "database")
    made = [p]
    try:
        mine = create(config, p, first)
        made.append(f"{p}-legacy")
        legacy = engine_name("postgres", "database", f"{p}-legacy", p)
        with pytest.raises(Conflict, match=f"its project's login role '{p}', the login of database '{p}', already "
                                           f"exists .* workspace '{first}'"):
            create(config, f"{p}-legacy", second)
        assert marks_of(config, p) == {("postgres", "database", mine["database"]): first}
        create(moving, f"{p}-legacy", second)  # the other workspace's database, made last
        assert marks_of(config, p) == {("postgres", "database", mine["database"]): first,
                                       ("postgres", "database", legacy): second}
        provider.delete("id", mine)  # the first workspace's purge of its own database
        assert marks_of(config, p) == {("postgres", "database", legacy): second}
    finally:
        for name in reversed(made):
            drop_quietly(config, "postgres", "pg", "database", name, p)


@pytest.mark.parametrize("outputs, entry, expected", [
    pytest.param({}, {"created": "2026-01-01T00:00:00.000000001Z", "modified": "2026-02-01T00:00:00Z"},
                 ("active", "2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00"), id="older-state-no-fields"),
    pytest.param({"lifecycle": "stale", "firstSeen": "2026-01-05T00:00:00Z", "lastSeen": "2026-01-06T00:00:00Z"},
                 {"created": "2026-01-01T00:00:00Z", "modified": "2026-03-01T00:00:00Z"},
                 ("stale", "2026-01-05T00:00:00+00:00", "2026-01-06T00:00:00+00:00"), id="stale-keeps-last-seen"),
    pytest.param({"lifecycle": "active", "lastSeen": "garbage"}, {"created": "2026-01-01T00:00:00Z"},
                 ("active", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"), id="unreadable-clock"),
])
def test_an_entrys_lifecycle_and_clocks(outputs, entry, expected):
    props = {"engine": "redis", "instance": "cache", "kind": "acl_user", "name": "n", "owner": "p", **outputs}
    t = state.Tracked(urn="urn:pulumi:x", ident=Identity.from_props(props), props=props, secrets=frozenset(),
                      entry=entry)
    assert (t.lifecycle, t.first_seen.isoformat(), t.last_seen.isoformat()) == expected
    # A stale entry's decision is the write that marked it, never before it was last seen.
    assert t.observed >= t.last_seen
