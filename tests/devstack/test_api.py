"""devstack.api against the real engines, in a throwaway workspace of the pytest plugin's (one PostgreSQL
database, up once for the module), and the runnable example of docs/python-api.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import psycopg
import pytest

from devstack.api import Declaration, Event, open_workspace
from devstack.errors import InvalidQuery, NotFound
from tools.pulumi_env import ROOT

pytestmark = pytest.mark.devstack_project({"name": "api", "resources": [
    {"uses": "pg", "kind": "database", "credentials": "generated"}]})


@pytest.fixture(scope="module")
def ws(devstack_workspace):
    return devstack_workspace.workspace


def test_up_made_the_database_the_environment_reaches(devstack_workspace, devstack_env):
    assert devstack_workspace.setup.operation == "update" and devstack_workspace.setup.changes.get("create", 0) >= 1
    assert devstack_workspace.service == "test"  # none declared: one importing each resource's usual variables
    with psycopg.connect(devstack_env["DATABASE_URL"], connect_timeout=5) as conn:
        database = conn.execute("SELECT current_database()").fetchone()[0]
    assert database == devstack_workspace.project.replace("-", "_") == devstack_env["PGDATABASE"]


def test_no_secret_in_a_repr_or_json(ws, devstack_env):
    password = devstack_env["PGPASSWORD"]
    assert set(devstack_env.secrets) == {"DATABASE_URL", "PGPASSWORD"}
    for shown in (repr(devstack_env), str(devstack_env), devstack_env.model_dump_json(), repr(ws)):
        assert password not in shown
    assert devstack_env.environ()["PGPASSWORD"] == password
    assert devstack_env.service_env().env["PGPASSWORD"] == password


def test_preview_and_up_report_progress_events(ws, devstack_workspace):
    events: list[Event] = []
    run = ws.preview(on_event=events.append)
    assert (run.operation, run.changes) == ("preview", {})
    assert {"prelude", "summary"} <= {e.kind for e in events}
    events.clear()
    run = ws.up(on_event=events.append)
    assert run.changes == {}
    ours = [e for e in events if e.kind == "done" and e.name == f"{devstack_workspace.project}/pg/database/"
            f"{devstack_workspace.project}"]
    assert [(e.op, e.type) for e in ours] == [("same", "pulumi-python:dynamic/postgres:database")]
    assert [str(e) for e in events if e.kind == "summary"] == ["summary no changes"]
    assert events[-1].kind == "end"


def test_resources_pass_the_ledger_filters_through(ws, devstack_workspace):
    project = devstack_workspace.project
    page = ws.resources(engine="postgres")
    assert [row.id for row in page.items] == [f"postgres/pg/database/{project}@{project}"]
    assert ws.resources(kind="bucket").total == 0
    assert ws.resources(project=project, limit=1).next_cursor is None
    assert ws.resource(project).secret_attributes  # the detail, secrets masked
    with pytest.raises(InvalidQuery) as refused:
        ws.resources(engine="mysql")
    assert refused.value.exit_code == 2 and "no such engine" in str(refused.value)


def test_typed_errors_before_anything_changes(ws, devstack_workspace):
    with pytest.raises(NotFound) as missing:
        open_workspace("no-such-stack", work_dir=ws.work_dir, env=ws.env_vars)
    assert missing.value.exit_code == 3
    with pytest.raises(InvalidQuery, match="credentials"):
        ws.create(engine="postgres", kind="database", credentials="random")
    with pytest.raises(InvalidQuery, match="no such engine"):
        ws.create(Declaration(engine="mysql", kind="database", project=devstack_workspace.project))
    assert ws.resources().total == 1  # nothing was declared


def test_doctor_of_the_workspace(ws):
    health = ws.doctor()
    assert health.ok, [(i.name, i.problem) for i in health.instances if not i.ok] + health.problems
    assert {i.engine for i in health.instances} == {"postgres", "redis", "minio", "localstack", "nats", "kafka"}
    assert {i.name: i.declared_kinds for i in health.instances}["pg"] == ["database"]


def python_example() -> str:
    """The runnable example of docs/python-api.md: the block after 'is run by tests/devstack/test_api.py'."""
    text = (ROOT / "docs" / "python-api.md").read_text()
    after = text.split("is run by `tests/devstack/test_api.py`", 1)[1]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def test_the_docs_example_runs(tmp_path):
    env = {**os.environ, "DEVSTACK_EPHEMERAL_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", python_example()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    project = re.search(r"(notes-[0-9a-f]{8})/pg/database", done.stdout).group(1)
    assert lines["up"] == "{'create': 4}"
    assert re.search(rf"^done   create {project}/pg/database/{project} \(pulumi-python:dynamic/postgres:database\)$",
                     done.stdout, re.M)
    assert lines["ledger"] == f"['postgres/pg/database/{project}@{project}']"
    assert lines["env"] == "{'DATABASE_URL': SecretStr('**********')}"
    assert lines["database"] == project.replace("-", "_")
    assert lines["created"] == f"redis/cache/redis_index/{project}@{project} {{'create': 1}}"
    assert lines["removed"] == f"redis/cache/redis_index/{project}@{project} True"
    assert lines["doctor"] == "True"
    assert list(tmp_path.glob("eph-*")) == []  # the workspace is gone with the block
