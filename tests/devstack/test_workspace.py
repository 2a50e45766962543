"""Picking the instance and project, parsing params, the URNs a verb targets, and columns_for."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from components.models import WorkspaceConfig
from devstack import imperative
from devstack.errors import DevstackError, InvalidQuery, NotFound


def instance(engine: str, port: int) -> dict:
    return {"engine": engine, "port": port, "adminUser": "a", "adminSecret": "s"}


def workspace(tmp_path: Path, shared: dict, projects: dict[str, str]) -> imperative.Workspace:
    """A Workspace over files in tmp_path; the stack is a stand-in that only knows its names and that
    every instance's admin secret (`s`) is set."""
    for relative, name in projects.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(f"apiVersion: devstack/v1\nkind: Project\nname: {name}\n")
    raw = {"name": "ws", "shared": shared, "projects": list(projects)}
    stack = SimpleNamespace(name="dev", workspace=SimpleNamespace(project_settings=lambda: SimpleNamespace(name="devstack")),
                            get_all_config=lambda: {"devstack:s": SimpleNamespace(value="set")})
    return imperative.Workspace(stack=stack, root=tmp_path, raw=raw, config=WorkspaceConfig.model_validate(raw))


@pytest.fixture
def ws(tmp_path):
    shared = {"pg": instance("postgres", 1), "objects": instance("minio", 2), "aws": instance("localstack", 3),
              "pg2": instance("postgres", 4)}
    return workspace(tmp_path, shared, {"shop/devstack.yaml": "shop", "blog/devstack.yaml": "blog"})


def test_instance_by_engine_and_by_name(ws):
    assert ws.instance_for(("minio",)).name == "objects"
    assert ws.instance_for(("postgres",), "pg2").name == "pg2"
    with pytest.raises(InvalidQuery, match=r"several instances provide it: pg \(postgres\), pg2 \(postgres\) \(--instance picks one\)"):
        ws.instance_for(("postgres",))
    with pytest.raises(InvalidQuery, match="--engine or --instance picks one"):
        ws.instance_for(("minio", "localstack"))
    with pytest.raises(NotFound, match="no kafka instance of that name"):
        ws.instance_for(("kafka",), "pg")
    with pytest.raises(NotFound, match="no shared instance of workspace 'ws' provides it"):
        ws.instance_for(("nats",))


def test_project_by_name_or_path(ws, tmp_path):
    assert ws.project("blog").relative == "blog/devstack.yaml"
    assert ws.project("shop/devstack.yaml").name == "shop"
    with pytest.raises(InvalidQuery, match="has 2 projects: shop, blog"):
        ws.project(None)
    with pytest.raises(NotFound, match="no such project"):
        ws.project("nope")
    single = workspace(tmp_path / "one", {"pg": instance("postgres", 1)}, {"a/devstack.yaml": "alpha"})
    assert single.project(None).name == "alpha"
    # A file that is not YAML may be the one named: say so, not "no such project".
    (tmp_path / "blog/devstack.yaml").write_text("apiVersion: devstack/v1\nname: blog\nresources: [{uses: pg\n")
    with pytest.raises(InvalidQuery, match=r"blog/devstack.yaml cannot be read: not valid YAML at line 4"):
        ws.project("blog")
    assert ws.project("shop").name == "shop"


def test_params_parse_as_yaml_values_with_keys_as_written():
    assert imperative.parse_params(["connectionLimit=20", "readOnly=true", "locale=C.UTF-8", "extensions=[a, b]",
                                    "rotation=", "displayName=a=b"]) == {
        "connectionLimit": 20, "readOnly": True, "locale": "C.UTF-8", "extensions": ["a", "b"],
        "rotation": "", "displayName": "a=b"}
    for bad in ("novalue", "=3"):
        with pytest.raises(InvalidQuery, match="expected KEY=VALUE"):
            imperative.parse_params([bad])


def test_targets_bring_missing_ancestors_and_drop_dependents(ws):
    target = imperative.resolve(ws, ("minio",), "bucket", "media", project="shop")
    resource, project, workspace_urn, stack = target.urns()
    assert resource == ("urn:pulumi:dev::devstack::devstack:index:Workspace$devstack:index:Project$"
                        "pulumi-python:dynamic/minio:bucket::shop/objects/bucket/media")
    assert project == "urn:pulumi:dev::devstack::devstack:index:Workspace$devstack:index:Project::shop"
    ws.state_urns = lambda: {stack, workspace_urn}
    assert target.targets() == ([resource, project], False)
    ws.state_urns = lambda: {stack, workspace_urn, project}
    assert target.targets() == ([resource], True)


def test_declaration_omits_defaults(ws):
    own = imperative.resolve(ws, ("minio",), "bucket", None, project="shop")
    assert (own.name, imperative.declaration(own, {}, None)) == ("shop", {"uses": "workspace.shared.objects", "kind": "bucket"})
    named = imperative.resolve(ws, ("minio",), "bucket", "media", project="shop")
    assert imperative.declaration(named, {"versioning": True}, "generated") == {
        "uses": "workspace.shared.objects", "kind": "bucket", "name": "media", "params": {"versioning": True}, "credentials": "generated"}


def test_check_reports_preview_messages_and_writes_nothing(ws, tmp_path):
    path = tmp_path / "shop/devstack.yaml"
    before = path.read_bytes()
    bad = before.decode() + "resources:\n  - uses: pg\n    kind: table\n"
    with pytest.raises(imperative.InvalidDeclaration) as failed:
        ws.check("shop/devstack.yaml", bad, "postgres table")
    assert failed.value.problems == [
        "shop/devstack.yaml:6: resources[0].kind: 'table' is not a kind of engine postgres (kinds: database, role, user)"]
    assert path.read_bytes() == before
    ws.check("shop/devstack.yaml", before.decode() + "resources:\n  - uses: pg\n    kind: database\n", "ok")


def test_default_columns_skip_the_address_and_secrets(tmp_path, monkeypatch):
    """A kind whose template declares no columns gets its non-secret, non-address attributes."""
    from components import templates

    for engine in ("postgres", "localstack", "minio"):
        source = yaml.safe_load((templates.TEMPLATES_DIR / f"{engine}.yaml").read_text())
        for kind in source["kinds"].values():
            kind.pop("columns", None)
        (tmp_path / f"{engine}.yaml").write_text(yaml.safe_dump(source))
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    imperative._columns.cache_clear()
    try:
        assert imperative.columns_for("postgres", "database") == [("USER", "user"), ("DATABASE", "database")]
        assert imperative.columns_for("localstack", "queue") == [("QUEUE", "queue"), ("QUEUE URL", "queueUrl"),
                                                                 ("QUEUE ARN", "queueArn")]
        assert imperative.columns_for("minio", "access_key") == [("ACCESS KEY", "accessKey"), ("POLICY", "policy")]
    finally:
        imperative._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after


def test_the_shipped_templates_declare_readable_columns():
    assert imperative.columns_for("postgres", "database") == [("DATABASE", "database"), ("OWNER", "user")]
    assert imperative.columns_for("kafka", "topic") == [("TOPIC", "topic"), ("PARTITIONS", "partitions")]


def test_declared_columns_win_and_are_checked(tmp_path, monkeypatch):
    from components import templates

    source = yaml.safe_load((templates.TEMPLATES_DIR / "nats.yaml").read_text())
    source["kinds"]["stream"]["columns"] = [{"name": "STREAM", "path": "stream"}, {"name": "FIRST SUBJECT", "path": "subjects.0"}]
    (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
    source["kinds"]["consumer"]["columns"] = [{"name": "X", "path": "password"}]
    (tmp_path / "bad").mkdir()
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    imperative._columns.cache_clear()
    try:
        assert imperative.columns_for("nats", "stream") == [("STREAM", "stream"), ("FIRST SUBJECT", "subjects.0")]
        assert imperative.column_value({"stream": "s", "subjects": ["a.>", "b.>"]}, "subjects.0") == "a.>"
        assert imperative.column_value({"stream": "s"}, "subjects.0") is None
        (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
        imperative._columns.cache_clear()
        with pytest.raises(ValueError, match=r"templates/nats.yaml: kinds.consumer.columns\[0\]: 'password' is not"):
            imperative.columns_for("nats", "consumer")
    finally:
        imperative._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after


def test_resource_list_fails_on_a_broken_column_and_indexes_lists(tmp_path, monkeypatch):
    """`devstack resource list` used to drop a template's broken columns without a word, and its
    cells followed dict keys only."""
    from components import templates
    from devstack import ledger_cli

    source = yaml.safe_load((templates.TEMPLATES_DIR / "nats.yaml").read_text())
    source["kinds"]["consumer"]["columns"] = [{"name": "X", "path": "nope"}]
    (tmp_path / "nats.yaml").write_text(yaml.safe_dump(source))
    monkeypatch.setattr(templates, "TEMPLATES_DIR", tmp_path)
    imperative._columns.cache_clear()
    page = SimpleNamespace(items=[SimpleNamespace(engine="nats", kind="consumer")])
    try:
        with pytest.raises(DevstackError, match=r"cannot list nats consumer resources: templates/nats.yaml: "
                                                r"kinds.consumer.columns\[0\]: 'nope'"):
            ledger_cli._kind_columns(page)
    finally:
        imperative._columns.cache_clear()
        templates.engine_template.cache_clear()  # loaded from tmp_path: not for the tests after
    assert ledger_cli._cell({"member_of": ["a", "b"]}, "member_of.1") == "b"
    assert ledger_cli._cell({"member_of": ["a"]}, "member_of.1") == "-"


def test_check_mirrors_projects_outside_the_work_dir(tmp_path):
    """A project listed as `../x/devstack.yaml` is checked too, and nothing is written beside it."""
    work = tmp_path / "work"
    work.mkdir()
    ws = workspace(work, {"pg": instance("postgres", 1)}, {"../outside/devstack.yaml": "outside", "in/devstack.yaml": "inside"})
    outside = tmp_path / "outside" / "devstack.yaml"
    before = outside.read_bytes()
    with pytest.raises(imperative.InvalidDeclaration) as failed:
        ws.check("in/devstack.yaml", "apiVersion: devstack/v1\nkind: Project\nname: outside\n", "rename")
    assert failed.value.problems == ["in/devstack.yaml:3: name: project 'outside' is already declared by "
                                     "../outside/devstack.yaml (project names are unique in a workspace)"]
    assert outside.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["outside", "work"]


class CliFailure(imperative.auto.errors.CommandError):
    """A CommandError carrying canned CLI output."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)


TRACEBACK = """ stdout: Updating (dev):
 +  pulumi-python:dynamic/postgres:database a/pg/database/x creating (0s) error: Traceback (most recent call last):
Diagnostics:
  pulumi-python:dynamic/postgres:database (a/pg/database/x):
    error: Traceback (most recent call last):
      File "/x/providers/base.py", line 181, in create
        raise self._conflict("create", ident, observed)
    providers.errors.Conflict: cannot create database postgres/pg/database/x@a: 'x' belongs to another project

  pulumi:pulumi:Stack (devstack-dev):
    error: update failed
"""


def test_cli_failures_become_typed_errors_with_the_provider_message():
    from devstack.errors import EngineError, IdentityConflict

    err = imperative._cli_error("update", "postgres database pg/database/x", CliFailure(TRACEBACK))
    assert isinstance(err, IdentityConflict) and err.exit_code == 5
    assert err.cause == "cannot create database postgres/pg/database/x@a: 'x' belongs to another project"
    engine = TRACEBACK.replace("providers.errors.Conflict", "providers.errors.EngineUnavailable")
    assert type(imperative._cli_error("update", "x", CliFailure(engine))) is EngineError
    # A provider's own error arrives as one line (tools.provider_server): same classes, same cause.
    one_line = ("Diagnostics:\n  pulumi-python:dynamic/postgres:database (a/pg/database/x):\n"
                "    error: Conflict: cannot create database x: 'x' belongs to another project\n")
    err = imperative._cli_error("update", "x", CliFailure(one_line))
    assert isinstance(err, IdentityConflict) and err.cause == "cannot create database x: 'x' belongs to another project"
    err = imperative._cli_error("update", "x", CliFailure(one_line.replace("Conflict:", "Unsupported:")))
    assert type(err) is EngineError and err.cause.startswith("cannot create database x: ")
    plain = "Diagnostics:\n  pulumi:pulumi:Stack (devstack-dev):\n    error: shop/devstack.yaml:3: name: bad\n    error: preview failed\n"
    assert imperative._cli_error("preview", "x", CliFailure(plain)).cause == "shop/devstack.yaml:3: name: bad"


def test_a_failed_refresh_keeps_every_reason_the_program_gave():
    """`devstack recover` used to show only the CLI's closing line (`python program failed: exit status 1`)
    of a refresh --run-program that validation stopped, not which file and field to fix."""
    from devstack.ledger import cli_error

    out = (" stdout: Refreshing (e2e):\n"
           "    pulumi:pulumi:Stack devstack-e2e  error: a/devstack.yaml:7: resources[0].params.readOnly: bad\n"
           "Diagnostics:\n  pulumi:pulumi:Stack (devstack-e2e):\n"
           "    error: a/devstack.yaml:7: resources[0].params.readOnly: bad\n"
           "    error: b/devstack.yaml:3: name: bad\n"
           "    error: 2 problem(s) in the workspace; nothing was created or changed\n"
           "    error: an unhandled error occurred: python program failed: exit status 1\n\n stderr: \n")
    assert cli_error(CliFailure(out)).splitlines() == [
        "error: a/devstack.yaml:7: resources[0].params.readOnly: bad", "error: b/devstack.yaml:3: name: bad",
        "error: 2 problem(s) in the workspace; nothing was created or changed"]
    closing_only = "Diagnostics:\n    error: update failed\n"
    assert cli_error(CliFailure(closing_only)) == "error: update failed"
    # A provider's unexpected exception: its own last line, not `Traceback (most recent call last):`.
    assert cli_error(CliFailure(TRACEBACK)) == ("error: providers.errors.Conflict: cannot create database "
                                                "postgres/pg/database/x@a: 'x' belongs to another project")


def test_a_crlf_project_file_keeps_its_line_ends_through_an_edit(tmp_path):
    """Read as it is (not with Python's newline translation), so the rest of the file is not rewritten."""
    path = tmp_path / "devstack.yaml"
    text = ("apiVersion: devstack/v1\r\nkind: Project\r\nname: shop\r\nresources:\r\n"
            "  - uses: pg\r\n    kind: database\r\n  - uses: aws\r\n    kind: queue\r\n    name: jobs\r\n")
    path.write_bytes(text.encode())
    assert imperative.read_text(path) == text
    edited = imperative.without_declaration(path, "aws", "queue", "jobs")
    assert edited == "apiVersion: devstack/v1\r\nkind: Project\r\nname: shop\r\nresources:\r\n  - uses: pg\r\n    kind: database\r\n"


def test_a_project_path_that_is_a_fifo_is_unreadable_not_waited_on(tmp_path):
    """The ledger and imperative verbs read every project file: a FIFO among them had hung them for ever."""
    import os

    ws = workspace(tmp_path, {"pg": instance("postgres", 1)}, {"shop/devstack.yaml": "shop"})
    os.mkfifo(tmp_path / "pipe.yaml")
    ws.config.projects.append("pipe.yaml")
    by_file = {ref.relative: ref for ref in ws.projects()}
    assert by_file["shop/devstack.yaml"].unreadable is None
    assert "not a regular file" in by_file["pipe.yaml"].unreadable
    with pytest.raises(NotFound) as refused:
        imperative.read_text(tmp_path / "pipe.yaml")
    assert "not a regular file" in str(refused.value)


def test_the_current_directorys_project_is_the_default(ws, tmp_path, monkeypatch):
    """Without --project, the devstack.yaml found walking up from the current directory picks the
    project when the workspace lists it; otherwise the workspace must have one project, as before."""
    (tmp_path / "blog" / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "blog" / "src" / "deep")
    assert ws.project(None).name == "blog"
    monkeypatch.chdir(tmp_path / "shop")
    assert ws.project(None).name == "shop"
    assert ws.project("blog").name == "blog"  # --project still decides
    # The nearest devstack.yaml is one the workspace does not list: no default, the usual error.
    (tmp_path / "other" / "sub").mkdir(parents=True)
    (tmp_path / "other" / "devstack.yaml").write_text("apiVersion: devstack/v1\nkind: Project\nname: other\n")
    monkeypatch.chdir(tmp_path / "other" / "sub")
    with pytest.raises(InvalidQuery, match=r"has 2 projects: shop, blog \(name one with --project, or run the "
                                           r"command in its directory\)"):
        ws.project(None)
    monkeypatch.chdir(tmp_path)  # above every project: none found
    with pytest.raises(InvalidQuery, match="has 2 projects"):
        ws.project(None)
