"""rm, destroy, env and exec on small real stacks, through the `devstack` command.

A two-project workspace (PostgreSQL databases, a Redis ACL user, a NATS
stream with a consumer) goes up with the real CLI on a temporary backend;
then the ledger commands act on it and the engines are checked directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import nats
import psycopg
import pytest
import yaml
import redis as redis_py
from psycopg import sql

from devstack.errors import Aborted, EngineError, InvalidQuery
from providers.nats import Account, admin_credential
from tests.conftest import configured
from tests.devstack.conftest import PG_PORT, Sandbox, make_env, token

ENGINES = ("pg", "cache", "events")


def configure_stack(box: Sandbox, name: str, shared: dict, admin, projects: list[str]):
    stack = box.open(name, create=True)
    chosen = {k: v for k, v in shared.items() if k in ENGINES}
    stack.set_config("devstack:workspace", _json({"name": name, "shared": chosen, "projects": projects}))
    for instance in chosen.values():
        stack.set_config(f"devstack:{instance['adminSecret']}", _secret(admin[instance["engine"]].password))
    return stack


def _json(value):
    from pulumi import automation as auto

    return auto.ConfigValue(json.dumps(value))


def _secret(value: str):
    from pulumi import automation as auto

    return auto.ConfigValue(value, secret=True)


def write(box: Sandbox, name: str, resources: list[dict], services: dict | None = None) -> str:
    import yaml

    path = box.work / name / "devstack.yaml"
    path.parent.mkdir(exist_ok=True)
    document = {"apiVersion": "devstack/v1", "kind": "Project", "name": name, "resources": resources}
    if services:
        document["services"] = services
    path.write_text(yaml.safe_dump(document))
    return f"{name}/devstack.yaml"


# --- engine probes ---------------------------------------------------------------------


def pg(admin) -> psycopg.Connection:
    a = admin["postgres"]
    return psycopg.connect(host="127.0.0.1", port=PG_PORT, user=a.user, password=a.password, dbname="postgres",
                           autocommit=True, connect_timeout=5)


def database_exists(admin, name: str) -> bool:
    with pg(admin) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def redis_client(admin, shared) -> redis_py.Redis:
    a = admin["redis"]
    return redis_py.Redis(host="127.0.0.1", port=shared["cache"]["port"], username=a.user, password=a.password,
                          decode_responses=True, socket_timeout=5)


def acl_user_exists(admin, shared, name: str) -> bool:
    with redis_client(admin, shared) as client:
        return client.execute_command("ACL", "GETUSER", name) is not None


def nats_call(admin, shared, owner: str, work):
    """Run `work` with devstack's admin JetStream context in project `owner`'s account."""
    async def main():
        nc = await nats.connect(f"nats://127.0.0.1:{shared['events']['port']}",
                                **admin_credential(admin["nats"].password, owner), allow_reconnect=False,
                                max_reconnect_attempts=0, connect_timeout=5)
        try:
            return await work(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(main())


def stream_exists(admin, shared, name: str) -> bool:
    """Whether project `name`'s default stream exists: in its account, when the server still has that."""
    async def work(js):
        try:
            await js.stream_info(name)
            return True
        except nats.js.errors.NotFoundError:
            return False

    try:
        return nats_call(admin, shared, name, work)
    except nats.errors.Error as err:
        if "authorization violation" not in str(err).lower():
            raise
        return False  # the project's account is gone, and all in it


@pytest.fixture
def names(admin, local_shared):
    """Two fresh project names; whatever a test leaves in the engines is removed afterwards."""
    suffix = token()
    projects = [f"la-{suffix}", f"lb-{suffix}"]
    yield projects
    with pg(admin) as conn:
        for project in projects:
            ident = sql.Identifier(project.replace("-", "_"))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
    with redis_client(admin, local_shared) as client:
        for project in projects:
            client.acl_deluser(project)
            client.hdel("devstack:acl-owners", project)

    accounts = configured(Account(), {"shared": {"events": local_shared["events"]}}, {"nats": admin["nats"].password})
    for project in projects:  # the account, its streams with it
        inputs = {"engine": "nats", "instance": "events", "kind": "account", "name": project, "owner": project,
                  "params": {}, "purge": True, "stack": ""}
        if accounts.read("id", inputs).id:
            accounts.delete("id", inputs)


def project_a(box: Sandbox, a: str) -> str:
    return write(box, a, [
        {"uses": "pg", "kind": "database"},
        {"uses": "cache", "kind": "acl_user", "credentials": "generated"},
        {"uses": "events", "kind": "stream"},
        {"uses": "events", "kind": "consumer", "name": "worker", "params": {"stream": a}},
    ], services={"api": {"uses": ["pg"], "env": {
        "import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn", "PGUSER": "user"}}],
        "PGHOST": "${ref:workspace.shared.pg.host}",
    }}})


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
    stack.set_config("devstack:workspace", _json({"name": "half", "shared": down, "projects": [f"{a}/devstack.yaml"]}))
    stopped = sandbox.cli("destroy", "--purge-data", "--yes", "--json", "-w", "half")
    assert stopped.returncode == EngineError.exit_code, stopped.stderr
    report = json.loads(stopped.stdout)
    validator("destroy.schema.json", report)
    assert f"postgres/pg/database/{a}@{a}" in report["dropped"] and report["untracked"] == []
    assert f"redis/cache/acl_user/{a}@{a}" not in report["dropped"] + report["already_gone"]
    assert f"127.0.0.1:{down['cache']['port']}" in report["error"] and report["error"] in stopped.stderr
    assert not database_exists(admin, db_a) and acl_user_exists(admin, local_shared, a)
    assert sandbox.cli_json("resource", "list", "-w", "half")["total"] == 5  # with the implied nats account


def test_env_warns_while_the_last_up_failed(sandbox, admin, local_shared, names):
    """Pulumi keeps the outputs of the last up that finished: after a failed one (which may have rotated
    a password already) the environment may be stale, and `env` must say so."""
    from pulumi import automation as auto

    a, _ = names
    service = {"api": {"uses": ["pg"], "env": {"import": [{"from": "pg/database", "vars": {"PGUSER": "user"}}]}}}
    files = [write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)]
    stack = configure_stack(sandbox, "stale", local_shared, admin, files)
    stack.up()
    fine = sandbox.cli("env", a, "api", "-w", "stale")
    assert fine.returncode == 0 and "warning" not in fine.stderr
    write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True},
                       {"uses": "pg", "kind": "database", "name": "other", "params": {"locale": "xx_YY.UTF-8"}}],
          services=service)
    with pytest.raises(auto.errors.CommandError):
        stack.up()
    stale = sandbox.cli("env", a, "api", "-w", "stale")
    assert stale.returncode == 0 and "warning: the last `pulumi up` failed" in stale.stderr
    write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)
    stack.up()
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "stale").stderr
    stack.destroy()


def test_env_warns_while_a_refresh_found_a_password_changed_behind_pulumis_back(sandbox, admin, local_shared, names):
    """The outputs keep the password the resource set; once it is changed in the engine, a refresh marks
    the resource (passwordInSync false) and `env` had handed out the old one without a word."""
    a, _ = names
    service = {"api": {"uses": ["pg"], "env": {"import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}}]}}}
    files = [write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)]
    stack = configure_stack(sandbox, "drift", local_shared, admin, files)
    stack.up()
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "drift").stderr
    with pg(admin) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD 'changed-by-hand'").format(sql.Identifier(a.replace("-", "_"))))
    stack.refresh()
    stale = sandbox.cli("env", a, "api", "-w", "drift")
    assert stale.returncode == 0
    assert f"the password of postgres/pg/database/{a}@{a} no longer works" in stale.stderr, stale.stderr
    stack.up()  # sets it again
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "drift").stderr
    stack.destroy()


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
