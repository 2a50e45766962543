"""Opening a stack: the work dir and backend it is given, where a file backend lies, and
the typed errors a failed pulumi run becomes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulumi import automation as auto

from devstack.errors import EngineError, IdentityConflict, InvalidQuery
from devstack.stack import cli_error, command_error, file_backend_root, open_stack, torn_metadata


def test_a_work_dir_holding_another_projects_settings_is_refused_untouched(synthetic, tmp_path):
    """The automation API writes its project settings into the work dir, over a Pulumi.yml or
    Pulumi.json already there: another project's file is refused instead, and left as it was."""
    box, _ = synthetic
    for name, text in (("Pulumi.yml", "name: myproj\nruntime: nodejs\n"), ("Pulumi.json", '{"name": "myproj"}')):
        work = tmp_path / name
        work.mkdir()
        (work / name).write_text(text)
        with pytest.raises(InvalidQuery, match=f"its {name} is not the devstack project's"):
            open_stack("syn", work_dir=work, env=box.env)
        assert sorted(p.name for p in work.iterdir()) == [name] and (work / name).read_text() == text


def test_an_environment_without_a_backend_is_an_invalid_query(synthetic):
    box, _ = synthetic
    with pytest.raises(InvalidQuery, match="names no backend"):
        open_stack("syn", work_dir=box.work, env={"PATH": "/usr/bin"})


def test_stacks_created_from_several_threads_at_once_all_open(synthetic):
    from concurrent.futures import ThreadPoolExecutor

    box, _ = synthetic
    with ThreadPoolExecutor(max_workers=4) as pool:
        stacks = list(pool.map(lambda _: box.open("raced", create=True), range(4)))
    assert {stack.name for stack in stacks} == {"raced"}


def test_a_file_backend_in_a_path_with_spaces_is_found_as_written(tmp_path):
    """The backend URL is made with Path.as_uri(), which escapes a space as %20: the lock check and
    the recovery must look where the files are, not under the escaped name."""
    backend = tmp_path / "my checkout é" / "state"
    attrs = backend / ".pulumi" / "stacks" / "devstack" / "local.json.attrs"
    attrs.parent.mkdir(parents=True)
    attrs.write_bytes(b"")
    assert file_backend_root(backend.as_uri() + "?metadata=skip", tmp_path) == backend
    assert torn_metadata(backend.as_uri(), "local", tmp_path) == [attrs]


def test_a_file_backend_is_found_where_the_cli_resolves_it(tmp_path, monkeypatch):
    """`file://~` (`pulumi login --local`) is the home directory and a relative path is taken from the
    work dir, as the CLI does: the lock check and the recovery must look there, not at `/` or `.`."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    assert file_backend_root("file://~", work) == tmp_path / "home"
    assert file_backend_root("file://~/state?no_tmp_dir=true", work) == tmp_path / "home" / "state"
    assert file_backend_root("file://./state", work) == work / "state"
    assert file_backend_root("file://../state", work) == tmp_path / "state"
    assert file_backend_root("file:///srv/state", work) == Path("/srv/state")
    assert file_backend_root("postgres://u@h/db", work) is None


class CliFailure(auto.errors.CommandError):
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
    err = command_error("update", "postgres database pg/database/x", CliFailure(TRACEBACK))
    assert isinstance(err, IdentityConflict) and err.exit_code == 5
    assert err.cause == "cannot create database postgres/pg/database/x@a: 'x' belongs to another project"
    engine = TRACEBACK.replace("providers.errors.Conflict", "providers.errors.EngineUnavailable")
    assert type(command_error("update", "x", CliFailure(engine))) is EngineError
    # A provider's own error arrives as one line (tools.provider_server): same classes, same cause.
    one_line = ("Diagnostics:\n  pulumi-python:dynamic/postgres:database (a/pg/database/x):\n"
                "    error: Conflict: cannot create database x: 'x' belongs to another project\n")
    err = command_error("update", "x", CliFailure(one_line))
    assert isinstance(err, IdentityConflict) and err.cause == "cannot create database x: 'x' belongs to another project"
    err = command_error("update", "x", CliFailure(one_line.replace("Conflict:", "Unsupported:")))
    assert type(err) is EngineError and err.cause.startswith("cannot create database x: ")
    plain = "Diagnostics:\n  pulumi:pulumi:Stack (devstack-dev):\n    error: shop/devstack.yaml:3: name: bad\n    error: preview failed\n"
    assert command_error("preview", "x", CliFailure(plain)).cause == "shop/devstack.yaml:3: name: bad"


def test_a_failed_refresh_keeps_every_reason_the_program_gave():
    """`devstack recover` used to show only the CLI's closing line (`python program failed: exit status 1`)
    of a refresh --run-program that validation stopped, not which file and field to fix."""
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
