"""`kill -9` of pulumi at points spread over its runs, with the state written once at the end of each run.

That is the default (tools.pulumi_env): a killed run leaves no record of itself, the state is the one
before it, and the engines hold what it did. The documented recovery (docs/recovery.md) is `devstack
recover`, then `pulumi up`: create adopts what carries the project's marker. After every kill and
recovery the ledger matches the engines: gc finds no orphan and nothing stale, no object is there
twice, nothing retained is dropped, and every login the outputs hold works (a refresh finds none out
of sync; a generated one that died with the run was set anew when its object was adopted).

Points, each a run killed after its n-th step of a kind has begun: creates early, in the middle and
late; updates; credential rotations; replacements (between the drop and the create, and after);
deletes; removals that retain; re-adoption of what was retained; a refresh; `pulumi destroy` of
purged resources; and creates, updates and deletes on the postgres:// backend, where the state is one
row the run rewrites.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pulumi import automation as auto

from bench.memory import descendants
from bench.sweep import sweep
from devstack import gc, ledger
from tests.faults.conftest import configure, new_stack, write_project
from tests.waiting import eventually
from tools.engines.ports import PORTS
from tools.pulumi_env import BIN_DIR

pytestmark = pytest.mark.timeout(900)

STACK = "faults"
#: Per project: every engine, and a generated login on each engine that has one.
KINDS = (("pg", "database", True), ("cache", "acl_user", True), ("objects", "bucket", False),
         ("aws", "queue", False), ("events", "stream", False), ("events", "user", True),
         ("kafka", "topic", False), ("kafka", "acl", True))
#: Tenant resources per project: its declarations and its NATS account (implied).
PER_PROJECT = len(KINDS) + 1
#: What gc lists of a project's retained resources (a NATS user is a credential no server lists).
RETAINED = frozenset({"database", "acl_user", "bucket", "stream", "account", "topic", "acl"})


def declarations(purge: bool = True, rotation: int = 0, only: tuple[str, ...] | None = None) -> list[dict]:
    chosen = [k for k in KINDS if only is None or k[1] in only]
    return [{"uses": uses, "kind": kind, "purge": purge,
             **({"credentials": "generated"} if login else {}),
             **({"params": {"rotation": rotation}} if login and rotation and kind != "acl" else {})}
            for uses, kind, login in chosen]


def tenant_steps(events: Path, ops: frozenset[str]) -> int:
    """The steps of `ops` on tenant resources the run has begun, as its event log says so far."""
    try:
        lines = events.read_text().splitlines()
    except FileNotFoundError:
        return 0
    begun = 0
    for line in lines:
        try:
            pre = json.loads(line).get("resourcePreEvent")
        except ValueError:
            continue  # the line being written
        meta = (pre or {}).get("metadata") or {}
        begun += meta.get("type", "").startswith("pulumi-python:dynamic") and meta.get("op") in ops
    return begun


def provider_processes(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if b"provider_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def kill_at(work: Path, env: dict[str, str], args: list[str], ops: set[str], at: int, log: Path) -> None:
    """Run `pulumi ARGS`; SIGKILL it once it has begun its `at`-th step of `ops`. The provider it leaves
    finishes the calls under way and exits on its own, as for a user; the language host is ended."""
    events = log.with_suffix(".events")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN_DIR / "pulumi"), *args, "--yes", "--non-interactive", "--stack", STACK, "--event-log", str(events)],
            # `--event-log` is one of the CLI's debug commands, as the automation API uses it.
            cwd=work, env={**os.environ, **env, "PULUMI_DEBUG_COMMANDS": "true"}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    what = f"`pulumi {' '.join(args)}` to begin its step {at} of {'/'.join(sorted(ops))}"
    try:
        eventually(lambda: proc.poll() is not None or tenant_steps(events, frozenset(ops)) >= at, 180, what,
                   interval=0.01)
    finally:
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        providers = provider_processes(children)
        eventually(lambda: not [p for p in providers if Path(f"/proc/{p}").exists()
                                and b"zombie" not in _state(p)], 30, "the orphaned provider to exit by itself")
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == -signal.SIGKILL, f"{what}: it finished first\n{log.read_text()[-3000:]}"


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/status").read_bytes().lower()
    except OSError:
        return b"zombie"


def resources(stack: auto.Stack) -> list[dict[str, Any]]:
    deployment = stack.export_stack().deployment or {}
    assert not deployment.get("pending_operations"), deployment.get("pending_operations")
    return [r for r in deployment.get("resources") or [] if r["type"].startswith("pulumi-python:dynamic")]


class Crashes:
    """One stack of projects `<prefix>-<letter>` and the checks every kill is followed by."""

    def __init__(self, work: Path, env: dict[str, str], stack: auto.Stack, shared: dict, admin: dict, prefix: str,
                 backend_url: str | None = None) -> None:
        self.work, self.env, self.stack, self.shared, self.admin = work, env, stack, shared, admin
        self.prefix, self.backend_url, self.projects, self.whole = prefix, backend_url, {}, set()
        self.per_project: Counter | None = None
        self.points = 0

    def declare(self, name: str, resources: list[dict] | None) -> None:
        """Set project `name`'s declarations (None: take the project out of the workspace)."""
        project = f"{self.prefix}-{name}"
        self.projects.pop(project, None)
        self.whole.discard(project)
        if resources is not None:
            self.projects[project] = write_project(self.work, project, resources)
            if len(resources) == len(KINDS):
                self.whole.add(project)
        configure(self.stack, list(self.projects.values()), self.shared, self.admin, name=STACK)

    def kill(self, args: list[str], ops: set[str], at: int, tmp: Path) -> None:
        self.points += 1
        before = sorted(r["urn"] for r in resources(self.stack))
        kill_at(self.work, self.env, args, ops, at, tmp / f"point-{self.points}.log")
        # State at the end of each run: the killed one left no record, pending operations included.
        assert sorted(r["urn"] for r in resources(self.stack)) == before
        report = ledger.recover(STACK, self.backend_url, work_dir=self.work, env=self.env)
        assert report.error is None, report.error

    def converged(self, tenants: int, retained: frozenset[str] = frozenset(), refresh: bool = True) -> None:
        """After the recovery: `pulumi up`, then the ledger against the engines."""
        self.stack.up()
        recorded = resources(self.stack)
        assert len(recorded) == tenants
        ids = [r["id"] for r in recorded]
        assert len(set(ids)) == len(ids), "a resource is recorded twice"
        report = gc.collect_garbage(self.stack)
        assert report.errors == []
        assert [item.id for item in report.orphans] == [] and [item.id for item in report.stale] == []
        assert {item.kind for item in report.retained} == retained
        # Engine objects per whole project, as the first whole workspace has them: then always as many.
        counted, projects = Counter(sweep(self.prefix, self.shared, self.admin, dry_run=True)), len(self.projects)
        if projects and set(self.projects) == self.whole and not retained:
            if self.per_project is None:
                assert all(n % projects == 0 for n in counted.values()), counted
                self.per_project = Counter({e: n // projects for e, n in counted.items()})
            expected = Counter({e: n * projects for e, n in self.per_project.items()})
            assert +counted == +expected, "an engine object is there twice, or missing"
        if refresh:
            self.stack.refresh()
            out_of_sync = {r["urn"].rsplit("::", 1)[-1]: key for r in resources(self.stack)
                           for key, value in (r.get("outputs") or {}).items() if key.endswith("InSync") and not value}
            assert out_of_sync == {}, "a login or setting the outputs record does not work"


@pytest.fixture
def crashes(project_dir, offline_env, pulumi_command, admin, shared, prefix):
    stack = new_stack(project_dir, offline_env, pulumi_command, name=STACK)
    yield Crashes(project_dir, offline_env, stack, shared, admin, prefix)
    _tear_down(stack)


def _tear_down(stack: auto.Stack) -> None:
    try:
        stack.cancel()
    except auto.errors.CommandError:
        pass
    stack.destroy()


def test_kills_on_the_file_backend_converge_after_recovery(crashes: Crashes, tmp_path):
    up = ["up", "--skip-preview"]
    # Creates: early, in the middle, late.
    crashes.declare("a", declarations())
    crashes.declare("b", declarations())
    crashes.kill(up, {"create"}, 1, tmp_path)
    crashes.converged(2 * PER_PROJECT)
    crashes.declare("c", declarations())
    crashes.kill(up, {"create"}, PER_PROJECT // 2, tmp_path)
    crashes.converged(3 * PER_PROJECT)
    crashes.declare("d", declarations())
    crashes.kill(up, {"create"}, PER_PROJECT - 1, tmp_path)
    crashes.converged(4 * PER_PROJECT)
    # Updates: a policy change every resource of a project applies.
    crashes.declare("a", declarations(purge=False))
    crashes.kill(up, {"update"}, 1, tmp_path)
    crashes.converged(4 * PER_PROJECT)
    crashes.declare("b", declarations(purge=False))
    crashes.kill(up, {"update"}, PER_PROJECT - 2, tmp_path)
    crashes.converged(4 * PER_PROJECT)
    # Rotations: the new generated passwords are set in the engine, the run that knew them dies.
    # Three logins rotate per project (a Kafka ACL's password has no rotation param).
    crashes.declare("c", declarations(rotation=1))
    crashes.kill(up, {"update"}, 1, tmp_path)
    crashes.converged(4 * PER_PROJECT)
    crashes.declare("d", declarations(rotation=1))
    crashes.kill(up, {"update"}, 2, tmp_path)
    crashes.converged(4 * PER_PROJECT)
    # Deletes of purged resources: early and late.
    crashes.declare("c", declarations(only=("queue",)))
    crashes.kill(up, {"delete"}, 1, tmp_path)
    crashes.converged(3 * PER_PROJECT + 1, refresh=False)
    crashes.declare("c", None)
    crashes.kill(up, {"delete"}, 1, tmp_path)
    crashes.converged(3 * PER_PROJECT)
    crashes.declare("d", None)
    crashes.kill(up, {"delete"}, PER_PROJECT - 2, tmp_path)
    crashes.converged(2 * PER_PROJECT)
    # Removals that retain (purge: false): nothing dropped, the objects listed as retained.
    crashes.declare("a", declarations(purge=False, only=("queue",)))
    crashes.kill(up, {"delete"}, 2, tmp_path)
    crashes.converged(PER_PROJECT + 1, retained=RETAINED, refresh=False)
    # Re-declared: created by adoption, generated logins set anew.
    crashes.declare("a", declarations())
    crashes.kill(up, {"create"}, 3, tmp_path)
    crashes.converged(2 * PER_PROJECT)
    assert crashes.points == 12


def replaced(locale: str, storage: str) -> list[dict]:
    """A project whose database and stream a change of `locale` and `storage` replaces."""
    return [{"uses": "pg", "kind": "database", "purge": True, "credentials": "generated",
             "params": {"locale": locale}},
            {"uses": "events", "kind": "stream", "purge": True, "params": {"storage": storage}},
            *declarations(only=("acl_user",))]


def test_kills_of_replacements_refreshes_and_destroys_converge(crashes: Crashes, tmp_path):
    up, tenants = ["up", "--skip-preview"], 4  # and the NATS account
    crashes.declare("r", replaced("C.UTF-8", "file"))
    crashes.stack.up()
    # Replacements (the old one dropped before the new one is made): killed between the two, and after.
    crashes.declare("r", replaced("C", "memory"))
    crashes.kill(up, {"delete-replaced"}, 1, tmp_path)
    crashes.converged(tenants)
    crashes.declare("r", replaced("C.UTF-8", "file"))
    crashes.kill(up, {"create-replacement"}, 2, tmp_path)
    crashes.converged(tenants)
    # A refresh, early and late.
    crashes.kill(["refresh", "--skip-preview"], {"refresh"}, 1, tmp_path)
    crashes.converged(tenants)
    crashes.kill(["refresh", "--skip-preview"], {"refresh"}, tenants, tmp_path)
    crashes.converged(tenants)
    # Destroy of purged resources: killed part-way, finished by the next destroy.
    crashes.kill(["destroy", "--skip-preview"], {"delete"}, 2, tmp_path)
    crashes.stack.destroy()
    assert resources(crashes.stack) == []
    assert not any(sweep(crashes.prefix, crashes.shared, crashes.admin, dry_run=True).values())
    assert crashes.points == 5


@pytest.fixture
def postgres_backend(admin):
    """A database of the local PostgreSQL holding Pulumi's state (the postgres:// backend); dropped after."""
    a = admin["postgres"]
    database = f"crash_{os.urandom(3).hex()}"

    def connect() -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=PORTS["postgres"], user=a.user, password=a.password,
                               dbname="postgres", autocommit=True, connect_timeout=5)

    with connect() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        yield f"postgres://{a.user}:{a.password}@127.0.0.1:{PORTS['postgres']}/{database}?sslmode=disable"
    finally:
        with connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def test_kills_on_the_postgres_backend_converge_after_recovery(project_dir, offline_env, pulumi_command, admin,
                                                               shared, prefix, postgres_backend, tmp_path):
    env = {**offline_env, "PULUMI_BACKEND_URL": postgres_backend}
    stack = new_stack(project_dir, env, pulumi_command, name=STACK)
    crashes = Crashes(project_dir, env, stack, shared, admin, prefix, backend_url=postgres_backend)
    up = ["up", "--skip-preview"]
    try:
        crashes.declare("a", declarations())
        crashes.kill(up, {"create"}, PER_PROJECT // 2, tmp_path)
        crashes.converged(PER_PROJECT)
        crashes.declare("a", declarations(rotation=1))
        crashes.kill(up, {"update"}, 2, tmp_path)
        crashes.converged(PER_PROJECT)
        crashes.declare("a", declarations(only=("queue",)))
        crashes.kill(up, {"delete"}, 3, tmp_path)
        crashes.converged(1, refresh=False)
        assert crashes.points == 3
    finally:
        _tear_down(stack)

