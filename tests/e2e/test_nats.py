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

from providers.nats import run_private
from tests.e2e.conftest import changes, e2e_stack, explicit_name, local_workspace, write_project

NATS_PORT = 24222




def events(admin) -> dict[str, dict]:
    """The workspace's one shared instance: the local NATS as `events`."""
    return {"events": {"engine": "nats", "host": "127.0.0.1", "port": NATS_PORT,
                       "adminUser": admin["nats"].user, "adminSecret": "natsAdmin"}}


def jetstream(admin, work):
    """Run one coroutine with an admin JetStream context."""

    async def main():
        nc = await nats.connect(f"nats://127.0.0.1:{NATS_PORT}", user=admin["nats"].user,
                                password=admin["nats"].password, allow_reconnect=False, connect_timeout=5)
        try:
            return await work(nc.jetstream())
        finally:
            await nc.close()

    return run_private(main())


def stream_config(admin, name: str):
    async def work(js):
        try:
            return (await js.stream_info(name)).config
        except NotFoundError:
            return None

    return jetstream(admin, work)


@pytest.fixture
def projects(admin):
    """Two fresh project names; afterwards every stream (and so consumer, explicitly named ones included,
    and bucket) of theirs is dropped."""
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names

    async def drop(js):
        for name in (*names, f"KV_{names[0]}"):
            try:
                await js.delete_stream(name)
            except NotFoundError:
                pass

    jetstream(admin, drop)


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
    assert changes(up) == {"create": 8}  # stack, workspace, 2 projects, 2 streams, consumer, kv
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

    assert jetstream(admin, publish_and_fetch) == b"order-1"

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out-of-band change to A's stream: refresh notices it, the next up repairs it.
    live = stream_config(admin, a)
    jetstream(admin, lambda js: js.update_stream(live.evolve(max_msgs=5)))
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    assert stream_config(admin, a).max_msgs == -1

    # Removing A's declarations retains its stream (with its message), consumer and bucket.
    write_project(project_dir, a, [])
    assert changes(stack.up()) == {"delete": 3}
    assert jetstream(admin, lambda js: js.stream_info(a)).state.messages == 1
    assert jetstream(admin, lambda js: js.consumer_info(a, worker)).config.durable_name == worker
    assert stream_config(admin, f"KV_{a}") is not None

    # Purge asked for explicitly, then removal: B's stream is dropped, A's stays.
    write_project(project_dir, b, [{"uses": "events", "kind": "stream", "purge": True}])
    assert changes(stack.up()) == {"update": 1}
    write_project(project_dir, b, [])
    assert changes(stack.up()) == {"delete": 1}
    assert stream_config(admin, b) is None
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
    assert changes(stack.up()) == {"create": 5}
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
    consumer = jetstream(admin, lambda js: js.consumer_info(a, worker))
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
    assert jetstream(admin, lambda js: js.consumer_info(a, worker)).config.durable_name == worker
