"""The pytest plugin and devstack.ephemeral: two pytest processes at once, each with its own throwaway
workspace on the real engines, purged at teardown; a killed process's workspace reaped by the next use."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devstack.ephemeral import DEFAULT_SERVICE, Owner, _declare, reap_dead
from tests.devstack.stacks import database_exists
from tools.pulumi_env import ROOT

SHARED = {"pg": {"engine": "postgres"}, "cache": {"engine": "redis"}}

INNER_TEST = '''
import json, os, psycopg, pytest

pytestmark = pytest.mark.devstack_project({"name": "par", "resources": [{"uses": "pg", "kind": "database"}]})


def test_own_database(devstack_env, devstack_workspace):
    with psycopg.connect(devstack_env["DATABASE_URL"], connect_timeout=5) as conn:
        conn.execute("CREATE TABLE mine (x int)")
    record = {"project": devstack_workspace.project, "stack": devstack_workspace.workspace.name,
              "pid": os.getpid()}
    with open(os.environ["RECORD"], "w") as handle:
        json.dump(record, handle)
'''


def test_two_pytest_processes_get_workspaces_of_their_own_and_leave_nothing(tmp_path, admin):
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    runs = []
    for i in range(2):
        env = {**os.environ, "DEVSTACK_EPHEMERAL_DIR": str(tmp_path / "eph"), "RECORD": str(tmp_path / f"run{i}.json")}
        runs.append(subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
                                     cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True))
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    records = [json.loads((tmp_path / f"run{i}.json").read_text()) for i in range(2)]
    assert records[0]["project"] != records[1]["project"] and records[0]["stack"] != records[1]["stack"]
    for record in records:
        assert record["stack"].startswith(f"eph-{record['pid']}-")
        assert not database_exists(admin, record["project"].replace("-", "_"))  # purged at teardown
    assert list((tmp_path / "eph").iterdir()) == []


KILLED = '''
import os, signal, sys
from devstack.ephemeral import Ephemeral

eph = Ephemeral({"name": "killed", "resources": [{"uses": "pg", "kind": "database"}]}).start()
print(eph.project, eph.directory, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''


def test_the_next_use_reaps_what_a_killed_process_left(tmp_path, admin):
    env = {**os.environ, "DEVSTACK_EPHEMERAL_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", KILLED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    project, directory = done.stdout.split()
    database = project.replace("-", "_")
    assert database_exists(admin, database) and Path(directory).is_dir()
    assert reap_dead(tmp_path) == [Path(directory).name]
    assert not database_exists(admin, database)
    assert not Path(directory).exists()


def test_a_live_or_foreign_owner_is_never_reaped(tmp_path):
    me = Owner.me()
    assert me.alive()
    assert Owner(pid=me.pid, host=me.host, started="1").alive() is False  # a reused pid is not its owner
    assert Owner(pid=me.pid, host=f"not-{socket.gethostname()}", started="1").alive()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert Owner(pid=gone.pid, host=me.host, started=None).alive() is False
    live = tmp_path / f"eph-{me.pid}-00000000"
    live.mkdir()
    (live / "owner.json").write_text(me.model_dump_json())
    assert reap_dead(tmp_path) == [] and live.is_dir()


@pytest.mark.parametrize("resources, imports", [
    pytest.param([{"uses": "pg", "kind": "database"}],
                 [{"from": "workspace.shared.pg/database/p-1", "vars": ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD",
                                                                        "PGDATABASE", "DATABASE_URL", "PGSSLMODE",
                                                                        "PGSSLROOTCERT"]}], id="one"),
    pytest.param([{"uses": "workspace.shared.pg", "kind": "database"},
                  {"uses": "pg", "kind": "user", "name": "ro"}, {"uses": "cache", "kind": "acl_user"}],
                 [{"from": "workspace.shared.pg/database/p-1", "vars": ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD",
                                                                        "PGDATABASE", "DATABASE_URL", "PGSSLMODE",
                                                                        "PGSSLROOTCERT"]},
                  {"from": "workspace.shared.cache/acl_user/p-1", "vars": ["REDIS_HOST", "REDIS_PORT", "REDIS_USERNAME",
                                                                           "REDIS_PASSWORD", "REDIS_URL",
                                                                           "REDIS_KEY_PREFIX", "REDIS_CA_CERT"]}],
                 id="first-resource-wins-a-variable"),
])
def test_a_project_without_services_gets_one_importing_each_resource(resources, imports):
    declared = _declare({"name": "p", "resources": resources}, "p-1", SHARED)
    assert declared["name"] == "p-1" and declared["apiVersion"] == "devstack/v1"
    assert declared["services"] == {DEFAULT_SERVICE: {"env": {"import": imports}}}


def test_declared_services_are_kept():
    services = {"api": {"env": {"LOG": "1"}}}
    assert _declare({"resources": [{"uses": "pg", "kind": "database"}], "services": services}, "x-1",
                    SHARED)["services"] == services


def test_the_module_needs_its_project_mark(tmp_path):
    (tmp_path / "test_unmarked.py").write_text("def test_x(devstack_env):\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_unmarked.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert textwrap.dedent("pytestmark = pytest.mark.devstack_project(PROJECT)") in done.stdout + done.stderr
