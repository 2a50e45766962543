"""NATS JetStream end to end: the real CLI, a two-project workspace, a real nats-server.

Project A declares a stream, a durable consumer bound to it and a KV bucket;
project B a stream. The run goes through up, preview (no changes), a second
up (nothing changes), a refresh after an out-of-band change, removal of A's
declarations (retained: stream, messages, consumer and bucket stay) and a
purged removal of B's stream (dropped).
"""

from __future__ import annotations

import json
import secrets

import nats
import pytest
from nats.js.errors import NotFoundError
from pulumi import automation as auto

from providers.lifecycle import is_stale
from providers.nats.account import Account
from providers.nats.session import admin_credential, run_private
from tests.conftest import configured
from tests.e2e.conftest import changes, e2e_stack, explicit_name, local_workspace, write_project
from tools.engines.ports import PORTS

NATS_PORT = PORTS["nats"]




def events(admin) -> dict[str, dict]:
    """The workspace's one shared instance: the local NATS as `events`."""
    return {"events": {"engine": "nats", "host": "127.0.0.1", "port": NATS_PORT,
                       "adminUser": admin["nats"].user, "adminSecret": "natsAdmin"}}


def jetstream(admin, project: str, work):
    """Run one coroutine with devstack's admin JetStream context in `project`'s account."""

    async def main():
        nc = await nats.connect(f"nats://127.0.0.1:{NATS_PORT}", **admin_credential(admin["nats"].password, project),
                                allow_reconnect=False, connect_timeout=5)
        try:
            return await work(nc.jetstream())
        finally:
            await nc.close()

    return run_private(main())


def stream_config(admin, project: str, name: str | None = None):
    """The config of stream `name` (the project's default one when None) in `project`'s account, or None."""
    async def work(js):
        try:
            return (await js.stream_info(name or project)).config
        except NotFoundError:
            return None

    return jetstream(admin, project, work)


def account_outputs(admin, project: str) -> dict | None:
    """What a read of `project`'s account gives on the server (its outputs), or None when it has none."""
    account = configured(Account(), {"shared": events(admin)}, {"nats": admin["nats"].password})
    found = account.read("id", {"engine": "nats", "instance": "events", "kind": "account", "name": project,
                                "owner": project, "params": {}, "purge": True, "stack": ""})
    return None if is_stale(found.outs) else found.outs


@pytest.fixture
def projects(admin):
    """Two fresh project names; afterwards their accounts are dropped with purge, and every stream (so
    consumer, explicitly named ones included, and bucket) of theirs with them."""
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names
    account = configured(Account(), {"shared": events(admin)}, {"nats": admin["nats"].password})
    for name in names:
        if (outs := account_outputs(admin, name)) is not None:
            account.delete("id", {**outs, "purge": True})


def test_two_projects_up_preview_refresh_retain_purge(project_dir, offline_env, pulumi_command, admin, projects):
    a, b = projects
    worker = explicit_name(a, "worker")  # the durable name itself
    a_resources = [
        {"uses": "events", "kind": "stream", "params": {"maxAge": 3600}},
        {"uses": "events", "kind": "consumer", "name": worker, "params": {"stream": a, "filterSubject": f"{a}.orders"}},
        {"uses": "events", "kind": "kv", "params": {"history": 3}},
    ]
    files = [write_project(project_dir, a, a_resources),
             write_project(project_dir, b, [{"uses": "events", "kind": "stream"}])]
    stack = auto.Stack.create("e2e", local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        "shared": {"events": {"engine": "nats", "host": "127.0.0.1", "port": NATS_PORT,
                              "adminUser": admin["nats"].user, "adminSecret": "natsAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:natsAdmin", auto.ConfigValue(admin["nats"].password, secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 10}  # stack, workspace, 2 projects, their 2 accounts, 2 streams, consumer, kv
    out_a = up.outputs[a].value["resources"]
    assert out_a[f"events/stream/{a}"]["subjects"] == f"{a}.>"
    assert out_a[f"events/stream/{a}"]["url"] == f"nats://127.0.0.1:{NATS_PORT}"
    assert out_a[f"events/consumer/{worker}"]["consumer"] == worker  # not prefixed
    assert out_a[f"events/kv/{a}"]["bucket"] == a
    assert stream_config(admin, a).metadata["devstack.owner"] == a
    assert stream_config(admin, b).subjects == [f"{b}.>"]

    async def publish_and_fetch(js):
        await js.publish(f"{a}.orders", b"order-1")
        sub = await js.pull_subscribe_bind(worker, stream=a)
        msgs = await sub.fetch(1, timeout=5)
        await msgs[0].ack()
        return msgs[0].data

    assert jetstream(admin, a, publish_and_fetch) == b"order-1"

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out-of-band change to A's stream: refresh notices it, the next up repairs it.
    live = stream_config(admin, a)
    jetstream(admin, a, lambda js: js.update_stream(live.evolve(max_msgs=5)))
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    assert stream_config(admin, a).max_msgs == -1

    # Removing A's declarations retains its stream (with its message), consumer and bucket, and the account
    # they live in (implied, not purged).
    write_project(project_dir, a, [])
    assert changes(stack.up()) == {"delete": 4}
    assert jetstream(admin, a, lambda js: js.stream_info(a)).state.messages == 1
    assert jetstream(admin, a, lambda js: js.consumer_info(a, worker)).config.durable_name == worker
    assert stream_config(admin, a, f"KV_{a}") is not None

    # Purge asked for explicitly, then removal: B's stream is dropped, and B's account with it (all B declared
    # there is purged, so is the account implied for it); A's stream stays.
    write_project(project_dir, b, [{"uses": "events", "kind": "stream", "purge": True}])
    assert changes(stack.up()) == {"update": 2}  # the stream's purge, and the account's
    write_project(project_dir, b, [])
    assert changes(stack.up()) == {"delete": 2}
    assert account_outputs(admin, b) is None
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        stream_config(admin, b)
    assert stream_config(admin, a) is not None


def stream_and_consumer(work, project: str, storage: str, stream_purge: bool) -> str:
    """Write `project` with its default stream (of `storage`) and a purge consumer on it,
    `explicit_name(project, "worker")`."""
    return write_project(work, project, [
        {"uses": "events", "kind": "stream", "purge": stream_purge, "params": {"storage": storage}},
        {"uses": "events", "kind": "consumer", "name": explicit_name(project, "worker"), "purge": True,
         "params": {"stream": project}},
    ])


def up_then_moved_to_memory(work, env, command, admin, project: str, stream_purge: bool) -> auto.Stack:
    """A stack whose stream (file storage) and purge consumer are up, then the file moved to memory storage."""
    stack = e2e_stack(work, env, command, events(admin), [stream_and_consumer(work, project, "file", stream_purge)],
                      {"natsAdmin": admin["nats"].password})
    assert changes(stack.up()) == {"create": 6}  # stack, workspace, project, account, stream, consumer
    stream_and_consumer(work, project, "memory", stream_purge)
    return stack


def test_a_purged_stream_replaced_takes_its_consumer_along(project_dir, offline_env, pulumi_command, admin, projects):
    """Changing a fixed param of a purge stream drops and re-creates it, consumers included: the
    consumer is replaced with it, so the engine has it again and the ledger has nothing stale."""
    a, _ = projects
    stack = up_then_moved_to_memory(project_dir, offline_env, pulumi_command, admin, a, stream_purge=True)
    assert changes(stack.preview()) == {"replace": 2}
    assert changes(stack.up()) == {"replace": 2}
    assert stream_config(admin, a).storage == "memory"
    worker = explicit_name(a, "worker")
    consumer = jetstream(admin, a, lambda js: js.consumer_info(a, worker))
    assert consumer.config.durable_name == worker
    # The ledger matches the engine: nothing for refresh to correct, nothing for up to do.
    assert changes(stack.refresh()) == {}
    assert changes(stack.up()) == {}


def test_a_retained_stream_that_cannot_change_leaves_its_purge_consumer_alone(project_dir, offline_env,
                                                                              pulumi_command, admin, projects):
    """The stream is retained (no purge), so a fixed param cannot change: the preview says so, and the up
    stops before anything is dropped, its consumer, purge or not, included (only a purged parent takes its
    children)."""
    a, _ = projects
    stack = up_then_moved_to_memory(project_dir, offline_env, pulumi_command, admin, a, stream_purge=False)
    for command in (stack.preview, stack.up):
        with pytest.raises(auto.errors.CommandError, match='params.storage: cannot change from "file" while the '
                                                           'stream is retained'):
            command()
    worker = explicit_name(a, "worker")
    assert jetstream(admin, a, lambda js: js.consumer_info(a, worker)).config.durable_name == worker
