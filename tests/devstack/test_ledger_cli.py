"""Exit codes and messages of the `devstack` ledger commands on bad input.

A small synthetic ledger on a temporary backend; the console script runs as
a subprocess, so these are the codes and messages a shell sees.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack.errors import Aborted, Ambiguous, InvalidQuery, NotFound, ScopeMismatch
from tests.devstack.conftest import Sandbox, import_state, make_env, synthetic_resources


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> Sandbox:
    base = tmp_path_factory.mktemp("errors")
    work = base / "work"
    work.mkdir()
    sandbox = Sandbox(env=make_env(base / "pulumi"), work=work)
    stack = sandbox.open("err", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": n, "owner": o}
            for o in ("alpha", "beta") for n in ("main", o)]
    import_state(stack, synthetic_resources("err", rows))
    return sandbox


@pytest.mark.parametrize("args, code, message", [
    pytest.param(["resource", "list", "--colour"], 2, "unrecognized arguments: --colour", id="unknown-flag"),
    pytest.param(["resource", "list", "--limit", "ten"], 2, "invalid int value: 'ten'", id="limit-not-a-number"),
    pytest.param(["resource", "list", "--limit", "501"], InvalidQuery.exit_code, "--limit 501 is out of range (use 1 to 500)", id="limit-too-big"),
    pytest.param(["resource", "list", "--cursor", "not-a-cursor"], InvalidQuery.exit_code, "cannot page with --cursor: it is malformed", id="bad-cursor"),
    pytest.param(["resource", "list", "--engine", "oracle"], InvalidQuery.exit_code, "cannot filter by engine 'oracle': no such engine", id="unknown-engine"),
    pytest.param(["resource", "show", "missing"], NotFound.exit_code, "cannot show resource 'missing': the ledger has no such resource", id="unknown-resource"),
    pytest.param(["resource", "show", "main"], Ambiguous.exit_code, "2 resources match: postgres/pg/database/main@alpha, postgres/pg/database/main@beta", id="ambiguous"),
    pytest.param(["resource", "rm", "missing"], NotFound.exit_code, "cannot remove resource 'missing'", id="rm-unknown"),
    # No stack config here: nothing says which devstack.yaml declares it (confirming a purge: test_rm_destroy_env).
    pytest.param(["resource", "rm", "alpha", "--purge-data"], InvalidQuery.exit_code, "no devstack:workspace in its "
                 "config", id="rm-without-workspace"),
    pytest.param(["resource", "show"], 2, "the following arguments are required: name", id="missing-argument"),
    pytest.param(["resource", "gc", "-w", "err"], InvalidQuery.exit_code, "so there is nothing to scan", id="gc-no-config"),
    pytest.param(["resource", "list", "-w", "nosuch"], NotFound.exit_code, "cannot open stack 'nosuch'", id="unknown-workspace"),
    pytest.param(["resource", "list", "-w", ""], InvalidQuery.exit_code, "cannot open stack '': it is not a stack name", id="empty-workspace"),
    pytest.param(["destroy", "-w", "a b"], InvalidQuery.exit_code, "cannot open stack 'a b': it is not a stack name", id="bad-workspace"),
    pytest.param(["resource", "gc", "-w", "../x"], InvalidQuery.exit_code, "cannot open stack '../x': it is not a stack name", id="path-workspace"),
    pytest.param(["env", "alpha", "api"], NotFound.exit_code, "workspace 'err' has no project 'alpha'", id="env-no-outputs"),
    pytest.param(["exec", "alpha", "api", "-w", "err"], InvalidQuery.exit_code, "put `--` between the options and "
                 "the command", id="exec-options-without-dashes"),
])
def test_bad_input_exit_code_and_message(box, args, code, message):
    if "-w" not in args:
        args = [*args, "-w", "err"]
    done = box.cli(*args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_cursor_from_other_filters_is_a_scope_mismatch(box):
    first = box.cli_json("resource", "list", "-w", "err", "--project", "alpha", "--limit", "1")
    done = box.cli("resource", "list", "-w", "err", "--project", "beta", "--limit", "1", "--cursor", first["next_cursor"])
    assert done.returncode == ScopeMismatch.exit_code
    assert "made for other filters or another workspace" in done.stderr


def test_refused_purge_changes_nothing(box):
    before = box.cli_json("resource", "list", "-w", "err")
    assert box.cli("resource", "rm", "alpha", "--purge-data", "-w", "err").returncode == InvalidQuery.exit_code
    assert box.cli("resource", "rm", "alpha", "-w", "err").returncode == InvalidQuery.exit_code
    assert box.cli_json("resource", "list", "-w", "err") == before


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`devstack ... | head`: no BrokenPipeError traceback, and the shell's status for SIGPIPE (141)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "many_rows.py"
    script.write_text(textwrap.dedent("""
        import sys
        from types import SimpleNamespace

        from devstack import cli

        rows = SimpleNamespace(func=lambda args: [print("row " * 100) for _ in range(100_000)])
        cli.parser = lambda: SimpleNamespace(parse_args=lambda argv: rows)
        sys.exit(cli.main([]))
    """))
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} {script} | head -1"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.stdout.startswith("row") and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_a_destroy_that_stops_on_a_conflict_says_what_it_dropped_before(tmp_path, monkeypatch):
    """The second drop meets another project's resource: the error counts the drops before it,
    says the ledger is unchanged and what to run, and the ledger still holds everything."""
    from devstack import ledger
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

    monkeypatch.setattr(ledger, "drop_data", drop)
    monkeypatch.setattr(ledger, "stack_config", lambda stack: {})
    with pytest.raises(IdentityConflict) as stopped:
        ledger.destroy_stack(stack, purge_data=True, confirm=lambda text: True)
    assert "it was not dropped; 1 resource(s) before it were dropped, the ledger is unchanged" in str(stopped.value)
    assert "`pulumi refresh`, then destroy again" in str(stopped.value)
    assert len(ledger.tracked_resources(stack)) == 2


def test_the_question_goes_to_stderr_so_a_json_report_stays_json(box):
    """`destroy --purge-data --json > report.json` on a terminal: the user sees the question, and the
    report file holds nothing that is not JSON (declined here, so nothing at all). `rm` asks the same way;
    here, with no stack config, it is refused before it asks."""
    import os
    import pty
    import subprocess

    from tests.devstack.conftest import DEVSTACK

    before = box.cli_json("resource", "list", "-w", "err")
    primary, terminal = pty.openpty()
    os.write(primary, b"no\n")
    env = {k: v for k, v in {**os.environ, **box.env}.items() if k != "PULUMI_CONFIG_PASSPHRASE"}
    try:
        done = subprocess.run([str(DEVSTACK), "destroy", "--purge-data", "--json",
                               "-w", "err", "--work-dir", str(box.work)], stdin=terminal, capture_output=True,
                              text=True, env=env, cwd=box.work, timeout=300)
    finally:
        os.close(terminal)
        os.close(primary)
    assert done.returncode == Aborted.exit_code, done.stderr
    assert "Type 'yes' to go ahead" in done.stderr and "alpha" in done.stderr
    assert done.stdout.strip() == "" or json.loads(done.stdout)
    assert "Type 'yes'" not in done.stdout
    assert box.cli_json("resource", "list", "-w", "err") == before


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


def _tracking_alpha(tmp_path: Path, workspace: dict) -> Sandbox:
    """A sandbox whose stack `w` tracks project alpha's PostgreSQL database, with this `devstack:workspace`."""
    from pulumi import automation as auto

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("w", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": "alpha", "owner": "alpha"}]
    import_state(stack, synthetic_resources("w", rows))
    shared = {"pg": {"engine": "postgres", "host": "127.0.0.1", "port": 25432, "adminUser": "devstack_admin",
                     "adminSecret": "pgAdmin"}}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": "w", "shared": shared, **workspace})))
    stack.set_config("devstack:pgAdmin", auto.ConfigValue("x", secret=True))
    return sandbox


def test_gc_refuses_a_workspace_whose_projects_key_is_misspelt(tmp_path):
    """`project:` for `projects:` would make every project the workspace lists look unlisted, and
    `--prune` drop what the ledger tracks as orphans."""
    sandbox = _tracking_alpha(tmp_path, {"project": ["alpha/devstack.yaml"]})
    done = sandbox.cli("resource", "gc", "--prune", "--yes", "-w", "w")
    assert done.returncode == InvalidQuery.exit_code and "Traceback" not in done.stderr, done.stderr
    assert "Pulumi.w.yaml:" in done.stderr and "config.devstack:workspace.project: unknown field" in done.stderr
    assert box_ids(sandbox, "w") == {"postgres/pg/database/alpha@alpha"}


@pytest.mark.parametrize("text", [
    "name: alpha\nresources:\n  - {uses: pg, kind: database, name: alpha\n",  # unclosed flow mapping
    "name: alpha\nresources:\n\t- uses: pg\n",  # a tab
])
def test_rm_refuses_while_a_listed_project_file_cannot_be_read(tmp_path, text):
    """The unreadable file may declare the entry: un-tracked but still declared, the next `pulumi up`
    would make it again (empty, after a --purge-data)."""
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "devstack.yaml").write_text(text)
    sandbox = _tracking_alpha(tmp_path, {"projects": ["alpha/devstack.yaml"]})
    for verb in (["resource", "rm", "alpha", "--yes"], ["db", "rm", "alpha", "-p", "alpha/devstack.yaml", "--yes"]):
        done = sandbox.cli(*verb, "-w", "w")
        assert done.returncode == InvalidQuery.exit_code and "Traceback" not in done.stderr, (verb, done.stderr)
        assert "alpha/devstack.yaml cannot be read: not valid YAML at line" in done.stderr, done.stderr
    assert box_ids(sandbox, "w") == {"postgres/pg/database/alpha@alpha"}
    assert (tmp_path / "alpha" / "devstack.yaml").read_text() == text


def test_rm_untracks_a_resource_whose_project_file_was_removed(tmp_path):
    """A listed file that is gone declares nothing: `rm` un-tracks the resource, data kept."""
    sandbox = _tracking_alpha(tmp_path, {"projects": ["alpha/devstack.yaml"]})
    done = sandbox.cli("resource", "rm", "alpha", "--yes", "-w", "w")
    assert done.returncode == 0 and "its data stays in the engine" in done.stdout, done.stderr
    assert box_ids(sandbox, "w") == set()


def box_ids(sandbox: Sandbox, workspace: str) -> set[str]:
    return {r["id"] for r in sandbox.cli_json("resource", "list", "-w", workspace)["items"]}


def test_a_work_dir_that_does_not_exist_is_bad_input(tmp_path, capsys):
    from devstack import cli

    missing = tmp_path / "no-such-checkout"
    assert cli.main(["resource", "list", "--work-dir", str(missing)]) == InvalidQuery.exit_code
    err = capsys.readouterr().err
    assert f"the work dir {missing} is not a directory" in err and "Traceback" not in err
    assert not missing.exists()  # nothing was made there
    import subprocess
    import sys

    as_module = subprocess.run([sys.executable, "-m", "devstack", "resource", "list", "--work-dir", str(missing)],
                               capture_output=True, text=True, timeout=60)
    assert as_module.returncode == InvalidQuery.exit_code and f"the work dir {missing}" in as_module.stderr


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
    shared = {"cache": {"engine": "redis", "host": "127.0.0.1", "port": 26379, "adminUser": "default",
                        "adminSecret": "cacheAdmin"}}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "broken", "shared": shared, "projects": ["p/devstack.yaml"]})))
    stack.set_config("devstack:cacheAdmin", auto.ConfigValue("x", secret=True))
    done = sandbox.cli("resource", "gc", "-w", "broken")
    assert done.returncode == InvalidQuery.exit_code and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"project file p/devstack.yaml cannot be read ({why}" in done.stderr


def test_a_file_backend_in_a_path_with_spaces_is_found_as_written(tmp_path):
    """The backend URL is made with Path.as_uri(), which escapes a space as %20: the lock check and
    the recovery must look where the files are, not under the escaped name."""
    from devstack import ledger

    backend = tmp_path / "my checkout é" / "state"
    attrs = backend / ".pulumi" / "stacks" / "devstack" / "local.json.attrs"
    attrs.parent.mkdir(parents=True)
    attrs.write_bytes(b"")
    assert ledger.file_backend_root(backend.as_uri() + "?metadata=skip", tmp_path) == backend
    assert ledger.torn_metadata(backend.as_uri(), "local", tmp_path) == [attrs]


def test_a_file_backend_is_found_where_the_cli_resolves_it(tmp_path, monkeypatch):
    """`file://~` (`pulumi login --local`) is the home directory and a relative path is taken from the
    work dir, as the CLI does: the lock check and the recovery must look there, not at `/` or `.`."""
    from devstack import ledger

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    assert ledger.file_backend_root("file://~", work) == tmp_path / "home"
    assert ledger.file_backend_root("file://~/state?no_tmp_dir=true", work) == tmp_path / "home" / "state"
    assert ledger.file_backend_root("file://./state", work) == work / "state"
    assert ledger.file_backend_root("file://../state", work) == tmp_path / "state"
    assert ledger.file_backend_root("file:///srv/state", work) == Path("/srv/state")
    assert ledger.file_backend_root("postgres://u@h/db", work) is None


def test_recover_refuses_while_the_run_holding_the_lock_is_still_running(tmp_path):
    """Recover breaks the lock and clears pending operations: run beside a live `pulumi up`, the up's
    later records were lost (resources made but no longer in the ledger, which gc would then prune)."""
    import json
    import socket
    import subprocess
    import sys
    import time

    from devstack import ledger
    from devstack.errors import EngineError

    backend = tmp_path / "state"
    lock = backend / ".pulumi" / "locks" / "organization" / "devstack" / "local" / "held.json"
    lock.parent.mkdir(parents=True)
    attrs = backend / ".pulumi" / "stacks" / "devstack" / "local.json.attrs"
    attrs.parent.mkdir(parents=True)
    attrs.write_bytes(b"")  # what recover would repair: it must stay, as must the lock
    # A process whose command line names pulumi, as the lock's holder would.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "pulumi", "up"])
    command = Path(f"/proc/{holder.pid}/cmdline")
    for _ in range(100):  # Popen may return before the new program's command line shows in /proc
        if b"pulumi" in command.read_bytes():
            break
        time.sleep(0.05)
    try:
        held = {"pid": holder.pid, "username": "u", "hostname": socket.gethostname(), "timestamp": "now"}
        lock.write_text(json.dumps(held))
        with pytest.raises(EngineError, match=rf"still running on this machine \(pid {holder.pid}.*nothing was changed"):
            ledger.recover("local", backend.as_uri(), tmp_path)
        assert lock.exists() and attrs.exists()
    finally:
        holder.kill()
        holder.wait()
    # Killed, its lock is what recover is for: it goes past the check (to the repair).
    assert ledger._running_holder(lock) is None


def test_recover_breaks_only_the_killed_runs_lock_not_one_taken_since(tmp_path, monkeypatch):
    """A run that takes the stack's lock after recover looked at the locks keeps it: `pulumi cancel` had
    removed it too, and then gc, rm and destroy --purge-data ran beside that run unrefused."""
    import json
    import socket

    from devstack import ledger
    from devstack.errors import EngineError

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    sandbox.open("local", create=True)
    backend = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    locks = backend / ".pulumi" / "locks" / "organization" / "devstack" / "local"
    locks.mkdir(parents=True, exist_ok=True)
    killed = {"pid": 2 ** 22 + 1, "username": "u", "hostname": socket.gethostname(), "timestamp": "then"}
    (locks / "killed.json").write_text(json.dumps(killed))
    started_since = locks / "started-since.json"
    opened = ledger.open_stack

    def a_run_takes_the_lock_meanwhile(*args, **kwargs):
        started_since.write_text(json.dumps({**killed, "pid": 1, "timestamp": "now"}))
        return opened(*args, **kwargs)

    monkeypatch.setattr(ledger, "open_stack", a_run_takes_the_lock_meanwhile)
    with pytest.raises(EngineError, match="locked"):  # its refresh meets the new run's lock
        ledger.recover("local", sandbox.env["PULUMI_BACKEND_URL"], tmp_path, env=sandbox.env)
    assert started_since.exists() and not (locks / "killed.json").exists()


#: Every verb, with the arguments it requires.
VERBS = [
    ["resource", "create", "postgres", "database"], ["resource", "list"], ["resource", "show", "x"],
    ["resource", "rm", "x"], ["resource", "gc"], ["db", "create"], ["db", "rm"], ["db", "gc"], ["s3", "mb"],
    ["s3", "rb"], ["queue", "add"], ["queue", "rm"], ["topic", "add"], ["topic", "rm"], ["stream", "add"],
    ["stream", "rm"], ["workspace", "destroy"], ["destroy"], ["env", "p", "s"], ["doctor"], ["recover"],
]


@pytest.mark.parametrize("argv", VERBS, ids=" ".join)
def test_every_verb_takes_json_or_quiet(argv):
    from devstack import cli

    parser = cli.parser()
    for flag in ("--json", "--quiet"):
        assert getattr(parser.parse_args([*argv, flag]), flag[2:]) is True
    with pytest.raises(SystemExit):  # one or the other
        parser.parse_args([*argv, "--json", "--quiet"])


def test_db_gc_is_resource_gc_of_postgres():
    from devstack import cli, ledger_cli

    args = cli.parser().parse_args(["db", "gc", "--prune", "--include-retained", "-p", "shop"])
    assert (args.func, args.engine, args.project, args.prune, args.include_retained) == (
        ledger_cli.run_gc, "postgres", "shop", True, True)


def test_quiet_prints_nothing_but_errors(box):
    done = box.cli("resource", "list", "-w", "err", "--quiet")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = box.cli("resource", "show", "alpha", "-w", "err", "-q")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = box.cli("resource", "show", "main", "-w", "err", "--quiet")
    assert (done.returncode, done.stdout) == (Ambiguous.exit_code, "")
    assert done.stderr.startswith("cannot show resource 'main': 2 resources match")


def test_workspace_destroy_of_one_project_waits_for_the_lock_then_takes_that_project_out(tmp_path):
    """`workspace destroy --project alpha` un-tracks alpha's resources only (the stack and beta's stay).
    Another run's lock: it waits, naming the holder, and past --lock-wait fails with nothing changed."""
    from devstack import ledger

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("one", create=True)
    rows = [{"engine": "postgres", "instance": "pg", "kind": "database", "name": o, "owner": o}
            for o in ("alpha", "beta")]
    import_state(stack, synthetic_resources("one", rows))
    lock = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks" / "organization" \
        / "devstack" / "one" / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)  # the backend keeps the directory between runs
    lock.write_text(json.dumps({"pid": 4242, "username": "u", "hostname": "h", "timestamp": "2026-11-30T10:00:00Z"}))
    held = sandbox.cli("workspace", "destroy", "--project", "alpha", "--lock-wait", "1", "-w", "one")
    assert held.returncode == 8, held.stderr
    assert "waiting for the lock on stack 'one' held by pid 4242 of u@h" in held.stderr
    assert "stayed locked by pid 4242 of u@h" in held.stderr
    assert len(ledger.tracked_resources(stack)) == 2
    lock.unlink()
    done = sandbox.cli_json("workspace", "destroy", "--project", "alpha", "-w", "one")
    assert (done["project"], done["untracked"]) == ("alpha", ["postgres/pg/database/alpha@alpha"])
    assert [str(t.ident) for t in ledger.tracked_resources(stack)] == ["postgres/pg/database/beta@beta"]


def test_a_killed_runs_lock_is_named_at_once_not_waited_for(tmp_path):
    """A lock of this machine whose pid runs no pulumi (the run was killed) never goes away by itself:
    the verb says so at once and points at `devstack recover`, where it would have waited in vain."""
    import socket
    import subprocess

    from devstack import ledger

    sandbox = Sandbox(env=make_env(tmp_path / "pulumi"), work=tmp_path)
    stack = sandbox.open("dead", create=True)
    import_state(stack, synthetic_resources("dead", [
        {"engine": "postgres", "instance": "pg", "kind": "database", "name": "alpha", "owner": "alpha"}]))
    gone = subprocess.Popen(["true"])  # a pid that has finished
    gone.wait()
    lock = Path(sandbox.env["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "locks" / "organization" \
        / "devstack" / "dead" / "held.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": gone.pid, "username": "u", "hostname": socket.gethostname(),
                                "timestamp": "2026-11-30T10:00:00Z"}))
    done = sandbox.cli("workspace", "destroy", "--project", "alpha", "--lock-wait", "600", "-w", "dead")
    assert done.returncode == 8, done.stderr
    assert f"locked by pid {gone.pid} of this machine" in done.stderr and "which no longer runs" in done.stderr
    assert "`devstack recover -w dead`" in done.stderr and "waiting for the lock" not in done.stderr
    assert len(ledger.tracked_resources(stack)) == 1
