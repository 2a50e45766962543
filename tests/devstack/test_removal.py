"""`resource rm` and `destroy`: on small real stacks through the `devstack` command, and on
synthetic ledgers.

A two-project workspace (PostgreSQL databases, a Redis ACL user, a NATS
stream with a consumer) goes up with the real CLI on a temporary backend;
then the ledger commands act on it and the engines are checked directly.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pulumi import automation as auto

from devstack import listing, removal, state
from devstack.errors import Aborted, EngineError, InvalidQuery
from providers.identity import Identity
from tests.devstack.conftest import (
    Sandbox,
    box_ids,
    fresh_name,
    import_state,
    make_env,
    synthetic_resources,
    token,
    tracking_alpha,
)
from tests.devstack.stacks import (
    ENGINES,
    json_value,
    acl_user_exists,
    configure_stack,
    database_exists,
    pg,
    project_a,
    redis_client,
    stream_exists,
    write,
)


def test_rm_env_exec_and_destroy_keep_data(sandbox, admin, local_shared, names, validator):
    a, b = names
    db_a, db_b = a.replace("-", "_"), b.replace("-", "_")
    files = [project_a(sandbox, a), write(sandbox, b, [{"uses": "pg", "kind": "database", "purge": True}])]
    stack = configure_stack(sandbox, "rmd", local_shared, admin, files)
    stack.up()
    listed = sandbox.cli_json("resource", "list", "-w", "rmd")
    assert listed["total"] == 6  # A's four, A's nats account (implied) and B's database
    assert f"nats/events/account/{a}@{a}" in {r["id"] for r in listed["items"]}

    # env masks secrets; exec hands them to the process, no file involved.
    env = sandbox.cli("env", a, "api", "-w", "rmd")
    assert env.returncode == 0, env.stderr
    assert env.stdout.splitlines() == ["DATABASE_URL=[secret]", "PGHOST=127.0.0.1", f"PGUSER={db_a}"]
    assert "secrets masked: DATABASE_URL" in env.stderr
    quiet = sandbox.cli("env", a, "api", "-w", "rmd", "--quiet")  # nothing but the exit code
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert sandbox.cli("env", a, "nope", "-w", "rmd", "--quiet").stderr.startswith("cannot read the environment")
    shown = sandbox.cli_json("env", a, "api", "-w", "rmd", "--show-secrets")
    assert shown["env"]["DATABASE_URL"].startswith(f"postgresql://{db_a}:") and shown["secret_vars"] == ["DATABASE_URL"]
    validator("env.schema.json", shown)
    code = "import os, psycopg; print(psycopg.connect(os.environ['DATABASE_URL']).execute('select current_database()').fetchone()[0])"
    ran = sandbox.cli("exec", a, "api", "-w", "rmd", "--", "python", "-c", code)
    assert (ran.returncode, ran.stdout.strip()) == (0, db_a), ran.stderr
    failed = sandbox.cli("exec", a, "api", "-w", "rmd", "--", "python", "-c", "raise SystemExit(7)")
    assert failed.returncode == 7
    killed = sandbox.cli("exec", a, "api", "-w", "rmd", "--", "python", "-c",
                         "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.returncode == 128 + 15  # as a shell reports a command a signal ended

    # rm without --purge-data: out of the ledger, still in the engine.
    rm = sandbox.cli("resource", "rm", a, "--kind", "acl_user", "-w", "rmd")
    assert rm.returncode == 0, rm.stderr
    assert "its data stays in the engine" in rm.stdout
    assert acl_user_exists(admin, local_shared, a)
    # ... and out of the project's file, so the next up does not declare it again.
    assert f"removed its declaration from {files[0]}" in rm.stdout
    assert "acl_user" not in (sandbox.work / files[0]).read_text()
    assert "create" not in {str(getattr(op, "value", op)) for op in stack.preview().change_summary}
    # A resource others depend on is refused, and nothing changes.
    refused = sandbox.cli("resource", "rm", a, "--kind", "stream", "-w", "rmd")
    assert refused.returncode == InvalidQuery.exit_code
    assert f"other resources depend on it: nats/events/consumer/worker@{a}" in refused.stderr
    # From a directory without the stack's config nothing says which devstack.yaml declares it: refused,
    # where it was un-tracked and then made again by the next up (with a generated password, a new one).
    elsewhere = sandbox.work.parent / "elsewhere"
    elsewhere.mkdir()
    refused = sandbox.cli("resource", "rm", f"nats/events/consumer/worker@{a}", "-w", "rmd", work=elsewhere)
    assert refused.returncode == InvalidQuery.exit_code, refused.stdout
    assert "no devstack:workspace in its config" in refused.stderr and "nothing was changed" in refused.stderr
    assert sandbox.cli_json("resource", "list", "-w", "rmd")["total"] == 5
    # A removal that would leave the workspace invalid (the service imports the database) is refused
    # before anything changes: preview's message, exit 2, the file, the ledger and the data as they were.
    before = (sandbox.work / files[0]).read_text()
    refused = sandbox.cli("resource", "rm", a, "--kind", "database", "--purge-data", "--yes", "-w", "rmd")
    assert refused.returncode == InvalidQuery.exit_code, refused.stderr
    assert "services.api.env.import[0].from: 'pg/database' names no resource of this project" in refused.stderr
    assert (sandbox.work / files[0]).read_text() == before and database_exists(admin, db_a)
    assert f"postgres/pg/database/{a}@{a}" in {r["id"] for r in sandbox.cli_json("resource", "list", "-w", "rmd")["items"]}
    document = yaml.safe_load(before)
    del document["services"]  # the service no longer imports it
    (sandbox.work / files[0]).write_text(yaml.safe_dump(document))
    # --purge-data asks first; without a terminal and --yes it changes nothing.
    assert sandbox.cli("resource", "rm", a, "--kind", "database", "--purge-data", "-w", "rmd").returncode == Aborted.exit_code
    assert database_exists(admin, db_a)
    purged = sandbox.cli_json("resource", "rm", a, "--kind", "database", "--purge-data", "--yes", "-w", "rmd")
    assert purged["data_dropped"] and purged["untracked"] and not database_exists(admin, db_a)
    assert purged["edited"] == [files[0]]  # the entry left its devstack.yaml too
    validator("resource-rm.schema.json", purged)
    remaining = {r["id"] for r in sandbox.cli_json("resource", "list", "-w", "rmd")["items"]}
    assert remaining == {f"nats/events/account/{a}@{a}", f"nats/events/stream/{a}@{a}",
                         f"nats/events/consumer/worker@{a}", f"postgres/pg/database/{b}@{b}"}

    # A declaration the file editor cannot take out (a flow list) is refused naming the file; nothing changes.
    written = (sandbox.work / files[1]).read_text()
    flow = {**yaml.safe_load(written), "resources": []}
    flow_text = yaml.safe_dump(flow, sort_keys=False).replace("resources: []", "resources: [{uses: pg, kind: database, purge: true}]")
    (sandbox.work / files[1]).write_text(flow_text)
    refused = sandbox.cli("resource", "rm", b, "--kind", "database", "-w", "rmd")
    assert refused.returncode == InvalidQuery.exit_code and "Traceback" not in refused.stderr
    assert f"cannot take its entry out of {files[1]}" in refused.stderr and "flow list" in refused.stderr
    assert (sandbox.work / files[1]).read_text() == flow_text
    assert f"postgres/pg/database/{b}@{b}" in {r["id"] for r in sandbox.cli_json("resource", "list", "-w", "rmd")["items"]}
    (sandbox.work / files[1]).write_text(written)

    # workspace destroy --project: that project's resources alone leave the ledger, their data kept.
    one = sandbox.cli_json("workspace", "destroy", "--project", b, "-w", "rmd")
    validator("destroy.schema.json", one)
    assert (one["project"], one["untracked"], one["dropped"]) == (b, [f"postgres/pg/database/{b}@{b}"], [])
    remaining.remove(f"postgres/pg/database/{b}@{b}")
    assert {r["id"] for r in sandbox.cli_json("resource", "list", "-w", "rmd")["items"]} == remaining
    assert database_exists(admin, db_b)

    # destroy without --purge-data keeps every resource's data, even one declared with purge: true.
    destroyed = sandbox.cli_json("destroy", "-w", "rmd")
    assert sorted(destroyed["untracked"]) == sorted(remaining) and destroyed["dropped"] == []
    validator("destroy.schema.json", destroyed)
    assert database_exists(admin, db_b) and stream_exists(admin, local_shared, a)
    assert sandbox.cli_json("resource", "list", "-w", "rmd")["total"] == 0
    assert stack.export_stack().deployment.get("resources") in (None, [])


def test_destroy_purge_data_drops_everything_after_confirmation(sandbox, admin, local_shared, names):
    a, b = names
    stack = configure_stack(sandbox, "purge", local_shared, admin,
                            [project_a(sandbox, a), write(sandbox, b, [{"uses": "pg", "kind": "database"}])])
    stack.up()
    db_a, db_b = a.replace("-", "_"), b.replace("-", "_")
    # One project first: its data alone is dropped, the other's stays in the ledger and the engine.
    one = sandbox.cli_json("workspace", "destroy", "--project", b, "--purge-data", "--yes", "-w", "purge")
    assert (one["dropped"], one["untracked"]) == ([f"postgres/pg/database/{b}@{b}"],) * 2
    assert not database_exists(admin, db_b) and database_exists(admin, db_a)
    refused = sandbox.cli("destroy", "--purge-data", "-w", "purge")
    assert refused.returncode == Aborted.exit_code and "not confirmed" in refused.stderr
    assert sandbox.cli_json("resource", "list", "-w", "purge")["total"] == 5 and database_exists(admin, db_a)

    done = sandbox.cli_json("destroy", "--purge-data", "--yes", "-w", "purge")
    assert len(done["dropped"]) == 5 and done["already_gone"] == []
    assert f"nats/events/account/{a}@{a}" in done["dropped"]
    # The consumer went before its stream, the stream before its account (dependents first), so nothing
    # was "already gone".
    assert not database_exists(admin, db_a)
    assert not acl_user_exists(admin, local_shared, a)
    assert not stream_exists(admin, local_shared, a)
    with redis_client(admin, local_shared) as client:
        assert client.hget("devstack:acl-owners", a) is None
    with pg(admin) as conn:
        assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (db_a,)).fetchone() is None
    assert sandbox.cli_json("resource", "list", "-w", "purge")["total"] == 0


def test_a_purge_that_cannot_finish_drops_nothing_or_reports_what_it_dropped(sandbox, admin, local_shared, names,
                                                                             validator):
    """Another run holds the stack's lock: rm and destroy --purge-data wait for it, and once --lock-wait
    passes stop before any drop (the ledger edit after them would fail), naming the holder. An engine
    down half-way: the JSON report lists the drops before it."""
    from tools.engines.base import closed_port

    a, _ = names
    stack = configure_stack(sandbox, "half", local_shared, admin, [project_a(sandbox, a)])
    stack.up()
    db_a = a.replace("-", "_")
    locks = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks"
    lock = locks / "organization" / "devstack" / "half" / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)  # the backend keeps the directory between runs
    lock.write_text(json.dumps({"pid": 4242, "username": "u", "hostname": "h", "timestamp": "2026-11-30T10:00:00Z"}))
    # The backend as written, and as a path relative to the work dir (the CLI resolves it there).
    relative = replace(sandbox, env={**sandbox.env, "PULUMI_BACKEND_URL": "file://" + os.path.relpath(locks.parent.parent, sandbox.work)})
    for verb, spelled in ((("resource", "rm", a, "--kind", "acl_user"), sandbox), (("destroy",), sandbox),
                          (("destroy",), relative)):
        refused = spelled.cli(*verb, "--purge-data", "--yes", "--json", "--lock-wait", "1", "-w", "half")
        assert refused.returncode == EngineError.exit_code, refused.stderr
        assert "waiting for the lock on stack 'half' held by pid 4242 of u@h" in refused.stderr
        assert "stayed locked by pid 4242 of u@h, since 2026-11-30T10:00:00Z" in refused.stderr
        assert "nothing was changed by this run" in refused.stderr and refused.stdout == ""
        assert database_exists(admin, db_a) and acl_user_exists(admin, local_shared, a)
    # gc --prune too: the running up's resources not recorded yet would look like orphans.
    refused = sandbox.cli("resource", "gc", "--prune", "--yes", "--lock-wait", "0", "-w", "half")
    assert refused.returncode == EngineError.exit_code and "stayed locked by pid 4242" in refused.stderr
    assert sandbox.cli("resource", "gc", "-w", "half").returncode == 0  # a listing alone goes ahead
    lock.unlink()

    # Redis is down: the drops before it (the database's among them) are in the report; the ledger stayed.
    down = {k: v for k, v in local_shared.items() if k in ENGINES}
    down["cache"] = {**down["cache"], "port": closed_port()}
    stack.set_config("devstack:workspace", json_value({"name": "half", "shared": down, "projects": [f"{a}/devstack.yaml"]}))
    stopped = sandbox.cli("destroy", "--purge-data", "--yes", "--json", "-w", "half")
    assert stopped.returncode == EngineError.exit_code, stopped.stderr
    report = json.loads(stopped.stdout)
    validator("destroy.schema.json", report)
    assert f"postgres/pg/database/{a}@{a}" in report["dropped"] and report["untracked"] == []
    assert f"redis/cache/acl_user/{a}@{a}" not in report["dropped"] + report["already_gone"]
    assert f"127.0.0.1:{down['cache']['port']}" in report["error"] and report["error"] in stopped.stderr
    assert not database_exists(admin, db_a) and acl_user_exists(admin, local_shared, a)
    assert sandbox.cli_json("resource", "list", "-w", "half")["total"] == 5  # with the implied nats account


def test_a_destroy_that_stops_on_a_conflict_says_what_it_dropped_before(tmp_path, monkeypatch):
    """The second drop meets another project's resource: the error counts the drops before it,
    says the ledger is unchanged and what to run, and the ledger still holds everything."""
    from devstack.errors import IdentityConflict

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("dst", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": n, "owner": "alpha"} for n in ("a", "b")]
    import_state(stack, synthetic_resources("dst", rows))
    drops = []

    def drop(config, ident, props):
        drops.append(ident.name)
        if len(drops) == 2:
            raise IdentityConflict("drop", str(ident), "it belongs to project 'intruder'", "it was not dropped")
        return True

    monkeypatch.setattr(removal, "drop_data", drop)
    monkeypatch.setattr(state, "stack_config", lambda stack: {})
    with pytest.raises(IdentityConflict) as stopped:
        removal.destroy_stack(stack, purge_data=True, confirm=lambda text: True)
    assert "it was not dropped; 1 resource(s) before it were dropped, the ledger is unchanged" in str(stopped.value)
    assert "`pulumi refresh`, then destroy again" in str(stopped.value)
    assert len(state.tracked_resources(stack)) == 2


@pytest.mark.parametrize("text", [
    "name: alpha\nresources:\n  - {uses: pg, kind: database, name: alpha\n",  # unclosed flow mapping
    "name: alpha\nresources:\n\t- uses: pg\n",  # a tab
])
def test_rm_refuses_while_a_listed_project_file_cannot_be_read(tmp_path, text):
    """The unreadable file may declare the entry: un-tracked but still declared, the next `pulumi up`
    would make it again (empty, after a --purge-data)."""
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "devstack.yaml").write_text(text)
    sandbox = tracking_alpha(tmp_path, {"projects": ["alpha/devstack.yaml"]})
    for verb in (["resource", "rm", "alpha", "--yes"], ["db", "rm", "alpha", "-p", "alpha/devstack.yaml", "--yes"]):
        done = sandbox.cli(*verb, "-w", "w")
        assert done.returncode == InvalidQuery.exit_code and "Traceback" not in done.stderr, (verb, done.stderr)
        assert "alpha/devstack.yaml cannot be read: not valid YAML at line" in done.stderr, done.stderr
    assert box_ids(sandbox, "w") == {"postgres/pg/database/alpha@alpha"}
    assert (tmp_path / "alpha" / "devstack.yaml").read_text() == text


def test_rm_untracks_a_resource_whose_project_file_was_removed(tmp_path):
    """A listed file that is gone declares nothing: `rm` un-tracks the resource, data kept."""
    sandbox = tracking_alpha(tmp_path, {"projects": ["alpha/devstack.yaml"]})
    done = sandbox.cli("resource", "rm", "alpha", "--yes", "-w", "w")
    assert done.returncode == 0 and "its data stays in the engine" in done.stdout, done.stderr
    assert box_ids(sandbox, "w") == set()


def test_resource_rm_of_a_topic_an_acl_is_only_ordered_after_says_how_to_remove_it(scratch):
    name = fresh_name()
    assert scratch.verb("topic", "add", name)[0] == 0
    assert scratch.verb("resource", "create", "kafka", "acl")[0] == 0
    declared = scratch.file.read_text()
    code, _, err = scratch.verb("resource", "rm", f"{scratch.project}/kafka/topic/{name}")
    assert code == 2 and f"kafka/kafka/acl/{scratch.project}@{scratch.project}" in err
    assert "only made after it" in err and "devstack topic rm" in err
    assert scratch.file.read_text() == declared and f"kafka/topic/{name}" in scratch.state_keys()


def test_rm_and_destroy_from_python_leave_tombstones_with_their_cause(tmp_path, admin, local_shared):
    """remove_resource and destroy_stack, called as devstack.api calls them (no CLI): what each takes out
    of the state is a tombstone whose drop event names the verb, never the `state` a later read infers."""
    p = f"rh{token()}"
    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("hist", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": n, "owner": o}
            for n, o in (("kept", p), (p, p), ("beta", f"{p}b"), ("gamma", f"{p}g"))]
    entries = synthetic_resources("hist", rows)
    import_state(stack, entries)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "hist", "shared": {"pg": local_shared["pg"]}, "projects": []})))
    stack.set_config(f"devstack:{local_shared['pg']['adminSecret']}", auto.ConfigValue(admin["postgres"].password,
                                                                                       secret=True))
    config = state.instances_config(stack)
    real = next(e for e in entries if e.get("inputs", {}).get("name") == p)["inputs"]  # made as its up would
    state.configured_provider(config, "postgres", "database").create(real)
    ident = f"postgres/pg/database/{p}@{p}"
    try:
        assert database_exists(admin, p)
        removal.remove_resource(stack, "kept", project=p)
        dropped = removal.remove_resource(stack, p, project=p, purge_data=True, confirm=lambda text: True)
        assert dropped.data_dropped and not database_exists(admin, p)
        removal.destroy_stack(stack, project=f"{p}b")
        removal.destroy_stack(stack)
    finally:
        state.drop_data(config, Identity.from_props(real), real)  # gone already unless the test failed first

    def drops(name: str, project: str) -> list[tuple[str, str]]:
        found = listing.resource_history(stack, name, project=project)
        assert found.resource.lifecycle == "deleted" and found.resource.deleted_at is not None
        return [(e.kind, e.cause) for e in found.events if e.kind != "provision"]

    assert drops("kept", p) == [("drop", "rm")]
    assert drops(p, p) == [("drop", "rm --purge-data")]
    assert drops("beta", f"{p}b") == [("drop", "destroy")]
    assert drops("gamma", f"{p}g") == [("drop", "destroy")]
    deleted = listing.list_resources(stack, lifecycle="deleted")
    assert {r.id for r in deleted.items} == {f"postgres/pg/database/kept@{p}", ident, f"postgres/pg/database/beta@{p}b",
                                            f"postgres/pg/database/gamma@{p}g"}
    assert listing.list_resources(stack).total == 0
