"""Exit codes and messages of the `devstack` ledger commands on bad input, their
output options, the default project, and the columns of `resource list`.

A small synthetic ledger on a temporary backend; the console script runs as
a subprocess, so these are the codes and messages a shell sees.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from devstack import ledger_cli
from devstack.errors import Aborted, Ambiguous, DevstackError, InvalidQuery, NotFound, ScopeMismatch
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
    pytest.param(["resource", "list", "--limit", "201"], InvalidQuery.exit_code, "--limit 201 is out of range (use 1 to 200)", id="limit-too-big"),
    pytest.param(["resource", "list", "--lifecycle", "gone"], 2, "invalid choice: 'gone'", id="unknown-lifecycle"),
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


def test_quiet_prints_nothing_but_errors(box):
    done = box.cli("resource", "list", "-w", "err", "--quiet")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = box.cli("resource", "show", "alpha", "-w", "err", "-q")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = box.cli("resource", "show", "main", "-w", "err", "--quiet")
    assert (done.returncode, done.stdout) == (Ambiguous.exit_code, "")
    assert done.stderr.startswith("cannot show resource 'main': 2 resources match")


def test_without_project_list_show_and_rm_take_the_current_directorys(tmp_path, validator):
    """Spec 27: the default --project is the current project, the devstack.yaml found walking up from the
    current directory when the workspace lists it; elsewhere every project. A name that says its project
    itself keeps it."""
    import json

    from pulumi import automation as auto

    work = tmp_path / "work"
    (work / "p01" / "src").mkdir(parents=True)
    box = Sandbox(env=make_env(tmp_path / "pulumi"), work=work)
    stack = box.open("here", create=True)
    import_state(stack, synthetic_resources("here", [
        {"engine": "postgres", "instance": "pg", "kind": "role", "name": "same", "owner": owner} for owner in ("p01", "p02")]))
    (work / "p01" / "devstack.yaml").write_text("apiVersion: devstack/v1\nkind: Project\nname: p01\n")
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(
        {"name": "here", "shared": {}, "projects": ["p01/devstack.yaml", "p02/devstack.yaml"]})))
    inside = work / "p01" / "src"

    listed = box.cli("resource", "list", "-w", "here", "--json", cwd=inside)
    assert listed.returncode == 0, listed.stderr
    assert [r["project"] for r in json.loads(listed.stdout)["items"]] == ["p01"]
    assert "project 'p01', the current directory's" in listed.stderr
    validator("resource-list.schema.json", json.loads(listed.stdout))
    assert [r["project"] for r in box.cli_json("resource", "list", "-w", "here")["items"]] == ["p01", "p02"]
    # `same` is two resources; inside p01 it is p01's, and a declaration name picks p02's anywhere.
    assert box.cli("resource", "show", "same", "-w", "here").returncode == Ambiguous.exit_code
    shown = box.cli("resource", "show", "same", "-w", "here", "--json", cwd=inside)
    assert shown.returncode == 0 and json.loads(shown.stdout)["project"] == "p01", shown.stderr
    other = box.cli("resource", "show", "p02/pg/role/same", "-w", "here", "--json", cwd=inside)
    assert other.returncode == 0 and json.loads(other.stdout)["project"] == "p02", other.stderr
    # rm un-tracks p01's (its data stays; no engine is asked), and p02's is still there.
    removed = box.cli("resource", "rm", "same", "-w", "here", "--json", cwd=inside)
    assert removed.returncode == 0 and json.loads(removed.stdout)["resource"]["project"] == "p01", removed.stderr
    assert [r["project"] for r in box.cli_json("resource", "list", "-w", "here")["items"]] == ["p02"]


def test_default_columns_skip_the_address_and_secrets(tmp_path, monkeypatch):
    """A kind whose template declares no columns gets its non-secret, non-address attributes."""
    from components import templates

    for engine in ("postgres", "localstack", "minio"):
        source = yaml.safe_load((templates.TEMPLATES_DIR / f"{engine}.yaml").read_text())
        for kind in source["kinds"].values():
            kind.pop("columns", None)
        (tmp_path / f"{engine}.yaml").write_text(yaml.safe_dump(source))
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    ledger_cli._columns.cache_clear()
    try:
        assert ledger_cli.columns_for("postgres", "database") == [("USER", "user"), ("DATABASE", "database")]
        assert ledger_cli.columns_for("localstack", "queue") == [("QUEUE", "queue"), ("QUEUE URL", "queueUrl"),
                                                                 ("QUEUE ARN", "queueArn")]
        assert ledger_cli.columns_for("minio", "access_key") == [("ACCESS KEY", "accessKey"), ("POLICY", "policy")]
    finally:
        ledger_cli._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after


def test_the_shipped_templates_declare_readable_columns():
    assert ledger_cli.columns_for("postgres", "database") == [("DATABASE", "database"), ("OWNER", "user")]
    assert ledger_cli.columns_for("kafka", "topic") == [("TOPIC", "topic"), ("PARTITIONS", "partitions")]


def test_declared_columns_win_and_are_checked(tmp_path, monkeypatch):
    from components import templates

    source = yaml.safe_load((templates.TEMPLATES_DIR / "nats.yaml").read_text())
    source["kinds"]["stream"]["columns"] = [{"name": "STREAM", "path": "stream"}, {"name": "FIRST SUBJECT", "path": "subjects.0"}]
    (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
    source["kinds"]["consumer"]["columns"] = [{"name": "X", "path": "password"}]
    (tmp_path / "bad").mkdir()
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    ledger_cli._columns.cache_clear()
    try:
        assert ledger_cli.columns_for("nats", "stream") == [("STREAM", "stream"), ("FIRST SUBJECT", "subjects.0")]
        assert ledger_cli.column_value({"stream": "s", "subjects": ["a.>", "b.>"]}, "subjects.0") == "a.>"
        assert ledger_cli.column_value({"stream": "s"}, "subjects.0") is None
        (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
        ledger_cli._columns.cache_clear()
        with pytest.raises(ValueError, match=r"templates/nats.yaml: kinds.consumer.columns\[0\]: 'password' is not"):
            ledger_cli.columns_for("nats", "consumer")
    finally:
        ledger_cli._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after


def test_resource_list_fails_on_a_broken_column_and_indexes_lists(tmp_path, monkeypatch):
    """`devstack resource list` used to drop a template's broken columns without a word, and its
    cells followed dict keys only."""
    from components import templates

    source = yaml.safe_load((templates.TEMPLATES_DIR / "nats.yaml").read_text())
    source["kinds"]["consumer"]["columns"] = [{"name": "X", "path": "nope"}]
    (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    ledger_cli._columns.cache_clear()
    page = SimpleNamespace(items=[SimpleNamespace(engine="nats", kind="consumer")])
    try:
        with pytest.raises(DevstackError, match=r"cannot list nats consumer resources: templates/nats.yaml: "
                                                r"kinds.consumer.columns\[0\]: 'nope'"):
            ledger_cli._kind_columns(page)
    finally:
        ledger_cli._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after
    assert ledger_cli._cell({"member_of": ["a", "b"]}, "member_of.1") == "b"
    assert ledger_cli._cell({"member_of": ["a"]}, "member_of.1") == "-"
