"""Two people on one `postgres://` ledger at once: on one workspace, and on two (docs/team.md).

Each person is a checkout of their own (a work dir with the program, the stack config and the project
files, a PULUMI_HOME, a copy of the team's passphrase) on one `postgres://` backend and the local
PostgreSQL and Redis. On one stack, Pulumi's lock lets one run at a time: a plain `pulumi up` that meets
it fails at once, changing nothing; devstack's `up`, its verbs and `gc --prune` wait for it and go on.
Two stacks on one backend do not lock each other, and each one's markers keep its resources apart.
"""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pulumi import automation as auto

from devstack import gc, locks, state
from devstack.api import Workspace
from devstack.locks import LockWait
from devstack.removal import destroy_stack
from devstack.stack import stack_env
from tests.devstack.conftest import Sandbox
from tests.devstack.stacks import acl_user_exists, database_exists
from tests.devstack.test_ledger import postgres_backend
from tests.faults.conftest import changes, configure, write_project
from tests.waiting import eventually
from tools.pulumi_env import ROOT, scratch_env

# Bounded: a run that hangs on the other's lock fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(180)

#: The two engines the team's projects use (of the local workspace's instances).
INSTANCES = ("pg", "cache")
PROJECT = [{"uses": "pg", "kind": "database", "purge": True}, {"uses": "cache", "kind": "acl_user", "purge": True}]


def yes(_question: str) -> bool:
    return True


def person(base: Path, url: str, passphrase: str) -> Sandbox:
    """A checkout of one's own on the team's backend: the program, a PULUMI_HOME and a passphrase file
    (same passphrase, one's own copy); the backend's password in PGPASSWORD, as docs/team.md says."""
    work = base / "work"
    work.mkdir(parents=True)
    shutil.copy(ROOT / "__main__.py", work / "__main__.py")
    env = scratch_env(base)
    Path(env["PULUMI_CONFIG_PASSPHRASE_FILE"]).write_text(passphrase)
    return Sandbox(env=stack_env(url, env), work=work)


def clone(source: Sandbox, into: Sandbox, stack: str) -> None:
    """What a `git pull` of the team's repository gives: the stack config (its salt and admin secrets) and
    the project files."""
    shutil.copy(source.work / f"Pulumi.{stack}.yaml", into.work)
    for project in source.work.glob("*/devstack.yaml"):
        shutil.copytree(project.parent, into.work / project.parent.name, dirs_exist_ok=True)


def ids(stack: auto.Stack) -> list[str]:
    return sorted(str(t.ident) for t in state.tracked_resources(stack))


def database(name: str) -> str:
    """The PostgreSQL database of a declaration named `name` (or of project `name`'s own)."""
    return name.replace("-", "_")


def test_two_people_on_one_workspace_take_turns_and_lose_nothing(tmp_path, admin, shared, prefix):
    """Ann's `pulumi up` holds the stack's lock: Bob's plain `pulumi up` fails at once, changing nothing;
    his devstack `up`, `db create` and `resource gc --prune`, started at once, wait for it (saying whose
    lock) and then take turns. At the end the ledger holds every resource of both once, the engines
    hold each, and gc finds nothing to prune."""
    pa, pb, extra = f"{prefix}-ann", f"{prefix}-bob", f"{prefix}-extra"
    team = {k: shared[k] for k in INSTANCES}
    with postgres_backend(admin, "team") as (url, _connect, _database):
        ann, bob = (person(tmp_path / who, url, "team-passphrase") for who in ("ann", "bob"))
        files = [write_project(ann.work, pa, PROJECT), write_project(ann.work, pb, PROJECT[:1])]
        stack_a = ann.open("team", create=True)
        configure(stack_a, files, team, admin, name="team")
        clone(ann, bob, "team")
        stack_b = bob.open("team")
        said: list[str] = []
        bobs = Workspace(stack_b, LockWait(120, said.append))
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(max_workers=4) as pool:
                up_a = pool.submit(stack_a.up)
                held = eventually(lambda: locks.stack_locks(stack_a), 60, "ann's up to take the stack's lock",
                                  interval=0.05)
                with pytest.raises(auto.errors.ConcurrentUpdateError) as refused:
                    stack_b.up()  # a plain `pulumi up`: refused at once, nothing done
                waited_up = pool.submit(bobs.up)
                pruning = pool.submit(bob.cli, "resource", "gc", "--prune", "--yes", "--json", "-w", "team")
                creating = pool.submit(bob.cli, "db", "create", extra, "--project", pb, "--json", "-w", "team")
                assert changes(up_a.result()) == {"create": 2 + 2 + 3}  # stack, workspace, 2 projects, 3 tenants
                pruned, created, up_b = pruning.result(), creating.result(), waited_up.result()
            took = time.monotonic() - started
            assert "the stack is currently locked by 1 lock(s)" in str(refused.value)
            # Bob's up waited for Ann's, named hers, then found her work done and changed nothing of it.
            assert said and said[0].startswith(f"waiting for the lock on stack 'team' held by {held[0].holder}")
            assert set(up_b.changes) <= {"create"}, up_b.changes  # at most the extra database, if first
            assert pruned.returncode == 0, pruned.stderr
            assert json.loads(pruned.stdout)["orphans"] == [] and json.loads(pruned.stdout)["pruned"] == []
            assert created.returncode == 0, created.stderr
            waits = [line for run in (pruned, created) for line in run.stderr.splitlines()
                     if line.startswith("waiting for the lock on stack 'team'")]
            assert waits, (pruned.stderr, created.stderr)  # the verbs waited: for Ann's run, or each other
            print(f"ann's up, bob's refused up, his waiting up, gc --prune and db create in {took:.1f}s; "
                  f"bob's verbs said: {waits}")

            expected = sorted([f"postgres/pg/database/{pa}@{pa}", f"redis/cache/acl_user/{pa}@{pa}",
                               f"postgres/pg/database/{pb}@{pb}", f"postgres/pg/database/{extra}@{pb}"])
            assert ids(stack_a) == ids(stack_b) == expected  # each once: nothing lost, nothing twice
            assert locks.stack_locks(stack_a) == []
            assert all(database_exists(admin, d) for d in (database(pa), database(pb), database(extra)))
            assert acl_user_exists(admin, shared, pa)
            for side in (stack_a, stack_b):  # from either checkout, the engines and the ledger agree
                report = gc.collect_garbage(side)
                assert (report.orphans, report.retained, report.stale, report.errors) == ([], [], [], [])
            assert changes(stack_b.preview()) == {}  # Bob's checkout declares exactly what the ledger holds
            # Ann has not pulled Bob's new entry: an up of hers would take it out of the stack (retained).
            assert changes(stack_a.preview()) == {"delete": 1}
        finally:
            destroy_stack(stack_b, purge_data=True, confirm=yes, lock_wait=LockWait(60, lambda _: None))
        assert not database_exists(admin, database(extra)) and not acl_user_exists(admin, shared, pa)


def test_two_workspaces_on_one_backend_run_at_once_and_keep_apart(tmp_path, admin, shared, prefix):
    """Ann's and Bob's own stacks on one backend and the same engines: both ups run at once and succeed;
    each ledger holds its own; each resource's marker names its workspace; each one's gc --prune lists
    the other's under other workspaces and drops nothing of it."""
    team = {k: shared[k] for k in INSTANCES}
    with postgres_backend(admin, "team") as (url, _connect, _database):
        people = {who: person(tmp_path / who, url, f"{who}-passphrase") for who in ("ann", "bob")}
        stacks = {}
        for who, box in people.items():
            stacks[who] = box.open(who, create=True)
            configure(stacks[who], [write_project(box.work, f"{prefix}-{who}", PROJECT)], team, admin, name=who)
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                running = {who: pool.submit(stack.up) for who, stack in stacks.items()}
                results = {who: changes(run.result()) for who, run in running.items()}
            took = time.monotonic() - started
            assert results == {"ann": {"create": 5}, "bob": {"create": 5}}  # stack, workspace, project, 2 tenants
            print(f"two workspaces' ups at once on one backend: {took:.1f}s")
            for who, stack in stacks.items():
                p = f"{prefix}-{who}"
                assert ids(stack) == sorted([f"postgres/pg/database/{p}@{p}", f"redis/cache/acl_user/{p}@{p}"])
                marker = people[who].cli_json("resource", "show", p, "--kind", "database", "-w", who)["stack"]
                assert marker.startswith(f"{who}@"), marker

            for who, other in (("ann", "bob"), ("bob", "ann")):
                report = gc.collect_garbage(stacks[who], prune=True, confirm=yes,
                                            lock_wait=LockWait(60, lambda _: None))
                assert (report.orphans, report.pruned, report.errors) == ([], [], [])
                theirs = {(item.kind, (item.stack or "").split("@")[0]) for item in report.other_workspaces
                          if item.project == f"{prefix}-{other}"}
                assert theirs == {("database", other), ("acl_user", other)}
            for who in stacks:
                assert database_exists(admin, database(f"{prefix}-{who}"))
                assert acl_user_exists(admin, shared, f"{prefix}-{who}")
        finally:
            for stack in stacks.values():
                destroy_stack(stack, purge_data=True, confirm=yes, lock_wait=LockWait(60, lambda _: None))
        assert not any(database_exists(admin, database(f"{prefix}-{who}")) for who in stacks)


def test_a_checkout_that_has_not_pulled_a_new_project_finds_no_orphan_of_it(tmp_path, admin, shared, prefix):
    """Bob adds a project and brings it up; Ann's checkout, not pulled since, runs gc. The ledger holds
    the new project's resources: they are Bob's, not orphans (docs/team.md says to pull before a prune)."""
    pa, pc = f"{prefix}-ann", f"{prefix}-new"
    team = {k: shared[k] for k in INSTANCES}
    with postgres_backend(admin, "team") as (url, _connect, _database):
        ann, bob = (person(tmp_path / who, url, "team-passphrase") for who in ("ann", "bob"))
        stack_a = ann.open("team", create=True)
        configure(stack_a, [write_project(ann.work, pa, PROJECT[:1])], team, admin, name="team")
        clone(ann, bob, "team")
        stack_b = bob.open("team")
        try:
            files = [f"{pa}/devstack.yaml", write_project(bob.work, pc, PROJECT[:1])]
            configure(stack_b, files, team, admin, name="team")
            assert changes(stack_b.up()) == {"create": 2 + 2 + 2}  # stack, workspace, 2 projects, 2 databases
            report = gc.collect_garbage(stack_a)  # Ann's files list pa alone
            assert report.orphans == [], [item.reason for item in report.orphans]
        finally:
            destroy_stack(stack_b, purge_data=True, confirm=yes, lock_wait=LockWait(60, lambda _: None))


def test_a_prune_confirmed_while_a_teammate_runs_waits_for_that_run(tmp_path, admin, shared, prefix):
    """While gc --prune asks its question, a teammate's up takes the stack's lock. An up records what it
    makes at its end: what it has made so far looks like orphans. The confirmed prune must wait for it
    (here: refuse past --lock-wait), dropping nothing."""
    from devstack.errors import EngineError
    from devstack.listing import list_resources
    from devstack.removal import remove_resource
    from tests.devstack.test_locks import held_up

    pa, pb = f"{prefix}-ann", f"{prefix}-gone"
    team = {k: shared[k] for k in INSTANCES}
    with postgres_backend(admin, "team") as (url, _connect, _database):
        ann = person(tmp_path / "ann", url, "team-passphrase")
        stack = ann.open("team", create=True)
        files = [write_project(ann.work, p, PROJECT[:1]) for p in (pa, pb)]
        configure(stack, files, team, admin, name="team")
        stack.up()
        configure(stack, files[:1], team, admin, name="team")  # pb no longer listed
        for item in list_resources(stack, project=pb).items:  # and out of the ledger, data kept: orphans
            remove_resource(stack, item.id, confirm=yes, lock_wait=LockWait(60, lambda _: None))
        running = []

        def teammate_starts_an_up(_question: str) -> bool:
            running.append(held_up(stack, ann.work, tmp_path))
            eventually(lambda: locks.stack_locks(stack), 60, "the teammate's up to take the lock", interval=0.05)
            return True

        try:
            with pytest.raises(EngineError, match="stayed locked"):
                gc.collect_garbage(stack, prune=True, confirm=teammate_starts_an_up,
                                   lock_wait=LockWait(1, lambda _: None))
            assert database_exists(admin, database(pb))
        finally:
            for proc, flag in running:
                flag.unlink(missing_ok=True)
                proc.wait(timeout=60)
            destroy_stack(stack, purge_data=True, confirm=yes, lock_wait=LockWait(60, lambda _: None))
