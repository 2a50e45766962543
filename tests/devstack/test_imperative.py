"""`devstack resource create`, the aliases and their `rm`: the real CLI on a scratch workspace.

Every engine goes through a round trip: create through the command (the
file gains exactly the entry, comments kept), the resource exists in the
engine, a second identical call changes nothing, removal with
--purge-data drops it and leaves the file byte-identical to the start.
PostgreSQL's round trip also removes without purge (retained) and adopts.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
import yaml

from devstack import declare, imperative, yamledit
from devstack.workspace import Workspace
from tests.devstack.conftest import INSTANCES, STACK, entry_text, fresh_name, shared_config
from tests.waiting import eventually


#: engine -> (kind, create argv, rm argv or None for the Python API, a param the create sets).
#: The localstack queue is the project's own (no name given, so the entry has no `name:`).
ROUND_TRIPS = {
    "redis": ("acl_user", ["resource", "create", "redis", "acl_user", "{name}"], None, ("readOnly", True)),
    "minio": ("bucket", ["s3", "mb", "s3://{name}", "--engine", "minio"], ["s3", "rb", "{name}", "--engine", "minio"],
              ("versioning", True)),
    "localstack": ("queue", ["queue", "add"], ["queue", "rm"], ("visibilityTimeout", 45)),
    "kafka": ("topic", ["topic", "add", "{name}"], ["topic", "rm", "{name}"], ("partitions", 2)),
    "nats": ("stream", ["stream", "add", "{name}"], ["stream", "rm", "{name}"], ("maxMsgs", 100)),
}


@pytest.mark.parametrize("engine", list(ROUND_TRIPS))
def test_create_then_purge_round_trip(scratch, engine):
    kind, create_argv, rm_argv, (param, value) = ROUND_TRIPS[engine]
    given = fresh_name() if "{name}" in " ".join(create_argv) else None
    name = given or scratch.project
    original = scratch.file.read_text()
    argv = [a.format(name=name) for a in create_argv] + ["--param", f"{param}={yaml.safe_dump(value).splitlines()[0]}"]

    code, out, err = scratch.verb(*argv)
    assert code == 0, err
    added = entry_text(given, INSTANCES[engine], kind, {param: value})
    edited = scratch.file.read_text()
    # Exactly one entry appended after the last one; every other byte (comments too) as it was.
    assert edited == original.replace("   # keep this comment\n", "   # keep this comment\n" + added)
    assert yaml.safe_load(edited)["resources"][-1]["params"] == {param: value}  # parsed as YAML scalars
    observed = scratch.observe(engine, kind, name)
    assert observed is not None and observed.owner == scratch.project
    # Targeted: the hand-written declaration was not applied along with it; a project's first NATS
    # declaration brings the project's account.
    implied = {f"events/account/{scratch.project}"} if engine == "nats" else set()
    assert scratch.state_keys() == {f"{INSTANCES[engine]}/{kind}/{name}"} | implied
    assert f"{engine} {kind} {INSTANCES[engine]}/{kind}/{name}" in out and "created" in out

    # The same call again: nothing to change, file byte-identical.
    code, out, err = scratch.verb(*argv)
    assert (code, scratch.file.read_text()) == (0, edited), err
    assert "nothing to change" in out

    if rm_argv is None:  # no alias: the function `devstack resource rm` builds on
        ws = Workspace.of(scratch.stack)
        target = declare.resolve(ws, (engine,), kind, name)
        outcome = declare.remove(target, purge_data=True, confirm=lambda _: True, out=lambda _: None)
        assert outcome.changes == {"update": 1, "delete": 1}
    else:
        code, out, err = scratch.verb(*[a.format(name=name) for a in rm_argv], "--purge-data")
        assert code == 0, err
        # The project's last NATS declaration takes its account along, purged as it is.
        assert ("dropped (2 delete, 2 update" if implied else "dropped (1 delete, 1 update") in out, out
    assert scratch.file.read_text() == original
    assert scratch.observe(engine, kind, name) is None
    assert scratch.state_keys() == set()


def test_postgres_round_trip_retains_adopts_and_purges(scratch):
    """db create twice (one change), rm keeps the database, create adopts it, rm --purge-data drops it."""
    name = fresh_name()
    original = scratch.file.read_text()
    code, out, err = scratch.verb("db", "create", name, "--param", "connectionLimit=5")
    assert code == 0, err
    edited = scratch.file.read_text()
    assert edited == original.replace("   # keep this comment\n", "   # keep this comment\n"
                                      + entry_text(name, "pg", "database", {"connectionLimit": 5}))
    assert scratch.observe("postgres", "database", name).params["connection_limit"] == 5
    assert "user: imp_" in out and "password: [secret]" in out  # attributes, secrets never printed
    code, out, _ = scratch.verb("db", "create", name, "--param", "connectionLimit=5")
    assert (code, "nothing to change" in out, scratch.file.read_text()) == (0, True, edited)

    code, out, err = scratch.verb("db", "rm", name)
    assert code == 0, err
    assert "retained" in out
    assert scratch.file.read_text() == original
    assert scratch.state_keys() == set()
    assert scratch.observe("postgres", "database", name).owner == scratch.project  # still there

    code, out, err = scratch.verb("db", "rm", name)  # gone from file and state: nothing to do
    assert (code, "nothing to change" in out) == (0, True), err

    assert scratch.verb("db", "create", name, "--param", "connectionLimit=5")[0] == 0  # adopts the retained one
    assert scratch.state_keys() == {f"pg/database/{name}"}
    assert scratch.verb("db", "rm", name, "--purge-data")[0] == 0
    assert scratch.observe("postgres", "database", name) is None
    assert scratch.file.read_text() == original


@pytest.mark.parametrize("argv, message", [
    (["resource", "create", "postgres", "table", "t1"], "resources[1].kind: 'table' is not a kind of engine postgres"),
    (["db", "create", "d1", "--param", "connectionLimit=abc"], "resources[1].params.connectionLimit:"),
    (["queue", "add", "q1", "--param", "nope=1"], "localstack queue does not accept param 'nope'"),
    (["topic", "add", "bad name"], "resources[1].name:"),
    (["db", "create", "d1", "--param", "rotation"], "cannot parse --param 'rotation': expected KEY=VALUE"),
    (["stream", "rm", "", "--purge-data"], "cannot resolve NAME '': it is empty"),
    (["s3", "mb", "s3://"], "cannot resolve NAME 's3://': it is empty"),
], ids=["unknown-kind", "bad-param-value", "unknown-param", "bad-name", "malformed-param", "empty-name", "empty-url"])
def test_invalid_input_leaves_the_file_byte_identical(scratch, argv, message):
    original = scratch.file.read_bytes()
    code, out, err = scratch.verb(*argv)
    assert code == 2
    assert message in err
    assert scratch.file.read_bytes() == original
    assert scratch.state_keys() == set()


def test_validation_messages_are_those_of_pulumi_preview(scratch):
    """The verb's problems are word for word what `pulumi preview` says about the same file."""
    original = scratch.file.read_text()
    code, _, err = scratch.verb("queue", "add", "q1", "--param", "visibilityTimeout=forever", "--param", "nope=1")
    assert code == 2
    problems = [line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error: ")]
    assert len(problems) == 2
    # The same declaration written by hand, previewed by the real CLI.
    entry = {"uses": "aws", "kind": "queue", "name": "q1", "params": {"visibilityTimeout": "forever", "nope": 1}}
    scratch.file.write_text(yamledit.add_entry(original, entry))
    try:
        with pytest.raises(Exception) as failed:
            scratch.stack.preview()
    finally:
        scratch.file.write_text(original)
    for problem in problems:
        assert problem in str(failed.value)


def test_choices_that_are_ambiguous_or_missing(scratch):
    original = scratch.file.read_bytes()
    code, _, err = scratch.verb("s3", "mb", "b1")
    assert code == 2 and "objects (minio), aws (localstack)" in err and "--engine" in err
    code, _, err = scratch.verb("db", "create", "d1", "--project", "nope")
    assert code == 3 and "no such project" in err
    code, _, err = scratch.verb("db", "create", "d1", "--instance", "aws")
    assert code == 3 and "no postgres instance of that name" in err
    assert scratch.file.read_bytes() == original


class Terminal(io.StringIO):
    """stdin as a terminal that types the given text."""

    def isatty(self) -> bool:
        return True


def test_a_create_asks_nothing_and_a_drop_asks_first(scratch, monkeypatch):
    """A create destroys nothing: no question, its attributes printed (secrets masked). A drop
    (--purge-data) shows its preview and asks; a 'no' (or no terminal) leaves file and ledger as they were."""
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = scratch.verb("queue", "add", "q1", yes=False)
    assert code == 0 and "[y/N]" not in err, err
    assert any(line.startswith("  queueUrl: http") and "q1" in line for line in out.splitlines()), out
    declared = scratch.file.read_bytes()

    code, out, err = scratch.verb("queue", "rm", "q1", "--purge-data", yes=False)
    assert code == 7 and "not confirmed" in err
    assert "aws/queue/q1" in out  # the preview of exactly that change
    assert "[y/N]" in err and "[y/N]" not in out  # the question on stderr: stdout may be redirected
    assert scratch.file.read_bytes() == declared
    assert scratch.state_keys() == {"aws/queue/q1"}

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal: never assume yes, never read
    ask = imperative._confirm(argparse.Namespace(yes=False))
    assert ask("drop it?") is False
    assert "pass --yes" in scratch.capsys.readouterr().err


def test_ctrl_c_before_the_update_restores_the_file(scratch, monkeypatch):
    """Interrupted at the question (or in the preview), nothing was applied: the file must not say otherwise."""
    original = scratch.file.read_bytes()

    class Interrupted(Terminal):
        def readline(self, *_args) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", Interrupted())
    # The hand-written entry, dropped with its data: `purge: true` set first, and the question asked.
    code, _out, err = scratch.verb("queue", "rm", "by-hand", "--purge-data", yes=False)
    assert code == 130 and "interrupted" in err and "Traceback" not in err
    assert scratch.file.read_bytes() == original
    assert scratch.state_keys() == set()


def test_existing_entry_with_other_params_is_refused(scratch):
    original = scratch.file.read_bytes()
    code, _, err = scratch.verb("queue", "add", "by-hand", "--param", "delaySeconds=3")
    assert code == 2 and "already declares it" in err
    assert scratch.file.read_bytes() == original


def test_engine_without_instance(scratch, admin):
    shared = shared_config(admin)
    del shared["kafka"]
    scratch.set_workspace(shared)
    code, _, err = scratch.verb("topic", "add", "t1")
    assert code == 3 and "no shared instance of workspace 'imperative' provides it" in err


def test_missing_admin_password_is_bad_input_and_the_file_is_kept(scratch):
    """As `pulumi preview` would say it: exit 2 before anything runs, the file as it was."""
    scratch.stack.remove_config("devstack:kafkaAdmin")
    original = scratch.file.read_bytes()
    code, _, err = scratch.verb("topic", "add", "t1")
    assert code == 2 and "config key devstack:kafkaAdmin is not set" in err
    assert scratch.file.read_bytes() == original


def test_failed_update_puts_the_file_back(scratch):
    """A database that exists without devstack's marker is foreign: the update fails, the file is as it was."""
    import psycopg
    from psycopg import sql

    name = fresh_name()
    pg = scratch.instance("postgres")
    original = scratch.file.read_bytes()
    with psycopg.connect(host=pg.host, port=pg.port, user=pg.admin_user, password=pg.password(),
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            code, _, err = scratch.verb("db", "create", name)
        finally:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    assert code == 5  # IdentityConflict: the provider's Conflict, its message as the cause
    assert err.startswith(f"cannot update postgres database pg/database/{name} of project {scratch.project}: "
                          f"cannot create database postgres/pg/database/{name}@{scratch.project}: ")
    assert "belongs to something devstack does not manage" in err and err.rstrip().endswith("is as it was)")
    assert scratch.file.read_bytes() == original
    assert f"pg/database/{name}" not in scratch.state_keys()


def test_a_fully_qualified_workspace_names_the_same_stack(scratch):
    """`-w organization/<stack>`, as `pulumi stack ls --all` prints it, targets what `-w <stack>` does."""
    from devstack import cli

    name = fresh_name()
    where = ["--workspace", f"organization/{STACK}", "--work-dir", str(scratch.work), "--yes"]
    assert cli.main(["stream", "add", name, *where]) == 0, scratch.capsys.readouterr().err
    assert scratch.observe("nats", "stream", name) is not None
    assert scratch.state_keys() == {f"events/stream/{name}", f"events/account/{scratch.project}"}
    assert cli.main(["stream", "rm", name, "--purge-data", *where]) == 0, scratch.capsys.readouterr().err
    assert scratch.observe("nats", "stream", name) is None and scratch.state_keys() == set()


def test_a_purge_whose_removal_step_fails_says_what_the_file_keeps(scratch, monkeypatch):
    """`rm --purge-data` sets `purge: true` first (an update), then removes the entry: cut between the two,
    the file keeps the first step's `purge: true`, as the ledger does. It had said "is as it was"."""
    from devstack import cli
    from devstack.errors import EngineError

    name = fresh_name()
    where = ["--workspace", STACK, "--work-dir", str(scratch.work), "--yes"]
    assert cli.main(["stream", "add", name, *where]) == 0, scratch.capsys.readouterr().err
    real, calls = declare.update, []

    def second_fails(target, plan):
        calls.append(target)
        if len(calls) == 2:  # the first rm's removal step only
            raise EngineError("update", target.what, "the engine went away", "start it")
        return real(target, plan)

    monkeypatch.setattr(declare, "update", second_fails)
    assert cli.main(["stream", "rm", name, "--purge-data", *where]) == 8
    err = scratch.capsys.readouterr().err
    assert "keeps `purge: true`, as the ledger now does (run the command again)" in err and "as it was" not in err
    assert "purge: true" in scratch.file.read_text()
    assert scratch.state_keys() == {f"events/stream/{name}", f"events/account/{scratch.project}"}
    assert cli.main(["stream", "rm", name, "--purge-data", *where]) == 0, scratch.capsys.readouterr().err
    assert scratch.observe("nats", "stream", name) is None and scratch.state_keys() == set()


@pytest.mark.parametrize("purge", [False, True], ids=["retained", "purged"])
def test_rm_of_a_topic_the_projects_acl_is_ordered_after(scratch, purge):
    """An acl is made after the project's topics (a dependency in the state, not a reference): the
    targeted removal of a topic must still remove it, not report success and leave it tracked."""
    name = fresh_name()
    assert scratch.verb("topic", "add", name)[0] == 0
    assert scratch.verb("resource", "create", "kafka", "acl")[0] == 0
    assert scratch.state_keys() == {f"kafka/topic/{name}", f"kafka/acl/{scratch.project}"}

    code, out, err = scratch.verb("topic", "rm", name, *(["--purge-data"] if purge else []))
    assert code == 0, err
    assert scratch.state_keys() == {f"kafka/acl/{scratch.project}"}
    assert (scratch.observe("kafka", "topic", name) is None) is purge
    assert scratch.observe("kafka", "acl", scratch.project).owner == scratch.project


def test_a_removal_pulumi_skips_is_an_error_and_the_file_is_kept(scratch, monkeypatch):
    """Should Pulumi skip the delete anyway (here: the acl left out of the targets, as before), the verb
    says so and puts the entry back instead of reporting a removal that did not happen."""
    name = fresh_name()
    assert scratch.verb("topic", "add", name)[0] == 0
    assert scratch.verb("resource", "create", "kafka", "acl")[0] == 0
    declared = scratch.file.read_text()
    monkeypatch.setattr(Workspace, "state_dependents", lambda self, urn: [])
    code, _, err = scratch.verb("topic", "rm", name)
    assert code != 0 and "Pulumi planned no delete of it" in err
    assert scratch.file.read_text() == declared
    assert f"kafka/topic/{name}" in scratch.state_keys()


def test_rm_without_purge_data_keeps_the_data_of_an_entry_declared_purge_true(scratch):
    """Pulumi deletes with the purge the state holds: the verb sets it off first, as it says it retains."""
    name = fresh_name()
    assert scratch.verb("queue", "add", name)[0] == 0
    text = scratch.file.read_text()
    index = next(i for i, e in enumerate(yaml.safe_load(text)["resources"]) if e.get("name") == name)
    scratch.file.write_text(yamledit.set_entry_field(text, index, "purge", True))
    assert scratch.verb("queue", "add", name)[0] == 0  # applied: the state holds purge: true
    code, out, err = scratch.verb("queue", "rm", name)
    assert code == 0, err
    assert "retained" in out and scratch.state_keys() == set()
    assert scratch.observe("localstack", "queue", name).owner == scratch.project  # the data stayed
    assert scratch.verb("queue", "add", name)[0] == 0  # adopted again, then dropped on purpose
    assert scratch.verb("queue", "rm", name, "--purge-data")[0] == 0
    assert scratch.observe("localstack", "queue", name) is None


def test_ctrl_c_during_the_update_lets_pulumi_cancel_and_release_the_stack(scratch):
    """Ctrl-C in a terminal reaches devstack and pulumi alike (one process group). The automation API
    used to close pulumi's pipes at once, and pulumi died on its next write with the stack locked and
    operations pending, for `devstack recover` to mend. Now devstack waits for pulumi's own cancel."""
    import os
    import signal
    import subprocess
    import time

    from tests.devstack.conftest import DEVSTACK
    from tests.faults.proxy import Proxy

    proxy = Proxy(shared_config(scratch.admin)["cache"]["port"]).start()
    scratch.set_workspace(shared_config(scratch.admin, {"redis": proxy.port}))
    proxy.stall()  # the create waits on Redis (10s at most), so the up is still running at the Ctrl-C
    locks = Path(os.environ["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks"
    verb = subprocess.Popen(
        [str(DEVSTACK), "resource", "create", "redis", "redis_index", "extra", "-p", scratch.project,
         "--workspace", STACK, "--work-dir", str(scratch.work), "--yes"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        eventually(lambda: any(p.is_file() for p in locks.rglob("*.json")), 60, "the up to take the stack's lock",
                   interval=0.2)
        time.sleep(2)
        os.killpg(verb.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
        _out, err = verb.communicate(timeout=90)
    finally:
        if verb.poll() is None:
            os.killpg(verb.pid, signal.SIGKILL)
        proxy.stop()
        proxy.start()  # forwarding again, for the purge at the end
    assert verb.returncode == 130 and "interrupted" in err, err
    assert "Traceback" not in err and "closed file" not in err, err
    assert not any(p.is_file() for p in locks.rglob("*.json")), "the stack is still locked"
    assert not (scratch.stack.export_stack().deployment or {}).get("pending_operations")
    scratch.stack.refresh()  # free: no ConcurrentUpdateError, nothing for `devstack recover` to do


def test_json_reports_and_quiet_runs(scratch, validator):
    """--json prints the report alone on stdout (its schema); --quiet prints nothing, the exit code says it."""
    name = fresh_name()
    code, out, err = scratch.verb("stream", "add", name, "--json")
    assert code == 0, err
    created = json.loads(out)
    validator("resource-create.schema.json", created)
    assert (created["action"], created["id"], created["file"], created["file_changed"]) == (
        "create", f"nats/events/stream/{name}@{scratch.project}", f"{scratch.project}/devstack.yaml", True)
    assert created["changes"].get("create", 0) >= 1 and created["attributes"]["host"] == "127.0.0.1"
    assert (scratch.verb("stream", "add", name, "--quiet")) == (0, "", "")  # nothing to change, nothing said
    code, out, err = scratch.verb("stream", "rm", name, "--purge-data", "--json")
    assert code == 0, err
    removed = json.loads(out)
    validator("alias-rm.schema.json", removed)
    # The stream and the project's account it was the last NATS declaration of.
    assert (removed["action"], removed["data_dropped"], removed["changes"]) == ("remove", True, {"delete": 2, "update": 2})
    assert scratch.observe("nats", "stream", name) is None
