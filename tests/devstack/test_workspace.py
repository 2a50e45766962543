"""The workspace behind a stack: picking the instance and the project, checking an edit as
preview would, and reading and editing its project files."""

from __future__ import annotations

import dataclasses

import pytest

from devstack import state
from devstack.errors import InvalidQuery, NotFound
from devstack.workspace import InvalidDeclaration, Workspace, read_text, without_declaration
from tests.devstack.conftest import entry_text, fresh_name, instance, workspace


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


def test_check_reports_preview_messages_and_writes_nothing(ws, tmp_path):
    path = tmp_path / "shop/devstack.yaml"
    before = path.read_bytes()
    bad = before.decode() + "resources:\n  - uses: pg\n    kind: table\n"
    with pytest.raises(InvalidDeclaration) as failed:
        ws.check("shop/devstack.yaml", bad, "postgres table")
    assert failed.value.problems == [
        "shop/devstack.yaml:6: resources[0].kind: 'table' is not a kind of engine postgres (kinds: database, role, user)"]
    assert path.read_bytes() == before
    ws.check("shop/devstack.yaml", before.decode() + "resources:\n  - uses: pg\n    kind: database\n", "ok")


def test_check_mirrors_projects_outside_the_work_dir(tmp_path):
    """A project listed as `../x/devstack.yaml` is checked too, and nothing is written beside it."""
    work = tmp_path / "work"
    work.mkdir()
    ws = workspace(work, {"pg": instance("postgres", 1)}, {"../outside/devstack.yaml": "outside", "in/devstack.yaml": "inside"})
    outside = tmp_path / "outside" / "devstack.yaml"
    before = outside.read_bytes()
    with pytest.raises(InvalidDeclaration) as failed:
        ws.check("in/devstack.yaml", "apiVersion: devstack/v1\nkind: Project\nname: outside\n", "rename")
    assert failed.value.problems == ["in/devstack.yaml:3: name: project 'outside' is already declared by "
                                     "../outside/devstack.yaml (project names are unique in a workspace)"]
    assert outside.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["outside", "work"]


def test_a_crlf_project_file_keeps_its_line_ends_through_an_edit(tmp_path):
    """Read as it is (not with Python's newline translation), so the rest of the file is not rewritten."""
    path = tmp_path / "devstack.yaml"
    text = ("apiVersion: devstack/v1\r\nkind: Project\r\nname: shop\r\nresources:\r\n"
            "  - uses: pg\r\n    kind: database\r\n  - uses: aws\r\n    kind: queue\r\n    name: jobs\r\n")
    path.write_bytes(text.encode())
    assert read_text(path) == text
    edited = without_declaration(path, "aws", "queue", "jobs")
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
        read_text(tmp_path / "pipe.yaml")
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


def test_check_validates_with_the_config_keys_the_workspace_was_read_with(scratch, monkeypatch):
    """A verb reads the stack config once (one CLI call); check judges admin secrets by those keys."""
    ws = Workspace.of(scratch.stack)
    monkeypatch.setattr(state, "stack_config", lambda stack: pytest.fail("the config was read again"))
    relative = str(scratch.file.relative_to(ws.root))
    text = scratch.file.read_text().replace("   # keep this comment\n",
                                            "   # keep this comment\n" + entry_text(fresh_name(), "pg", "database"))
    ws.check(relative, text, "a database")
    secret_key = f"devstack:{ws.config.shared['pg'].admin_secret}"
    without = dataclasses.replace(ws, config_keys=ws.config_keys - {secret_key})
    with pytest.raises(InvalidDeclaration) as refused:
        without.check(relative, text, "a database")
    assert any(f"{secret_key} is not set" in problem for problem in refused.value.problems)
