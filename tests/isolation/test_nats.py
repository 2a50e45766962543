"""NATS: project A's user (NATS_URL, NATS_USER_JWT, NATS_USER_SEED as `devstack env` gives them) against
B's stream, consumer and KV bucket.

Each project has an account of its own. From A's account, B's stream,
consumer and bucket do not exist (the JetStream API answers "not found"),
and A's user may publish and subscribe only on A's subjects (`<A>.>`), so
the server refuses B's subjects with a permissions violation. Making,
changing and deleting streams is refused to every tenant user, on its own
account too: devstack does that from the declarations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats
import nkeys
import pytest
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from providers.nats import auth as nats_auth
from providers.nats.session import run_private
from tests.isolation.conftest import Matrix, Op, Tenants, cases

ENGINE = "nats"
#: How long a refused publish or subscribe waits for the server's asynchronous -ERR.
REFUSAL_WAIT = 5.0
#: How long, once the server has answered the flush, nats-py may take to hand its -ERR to error_cb.
ERROR_CALLBACK_WAIT = 1.0


class PermissionsViolation(Exception):
    """The server's -ERR 'Permissions Violation ...' for this connection (nats-py reports it asynchronously)."""


def denied(err: BaseException) -> str | None:
    if isinstance(err, PermissionsViolation):
        return "Permissions Violation"
    if isinstance(err, NotFoundError):
        return "not found in A's account"
    return None


@dataclass(frozen=True)
class Target:
    """The names of one project's NATS resources, as its service's environment gives them."""

    subject: str
    stream: str
    consumer: str
    bucket: str


def target(tenants: Tenants, project: str) -> Target:
    env = tenants.env(project, ENGINE)
    return Target(subject=f"{env['NATS_STREAM']}.matrix", stream=env["NATS_STREAM"],
                  consumer=env["NATS_CONSUMER"], bucket=env["NATS_KV_BUCKET"])


def as_a(tenants: Tenants, act: Callable[[Any, JetStreamContext, Target, "Refusals"], Awaitable[object]],
         where: Target) -> None:
    """Run `act` over a connection of A's user, made as nats-py takes its environment."""
    env = tenants.env(tenants.a, ENGINE)
    key = nkeys.from_seed(env["NATS_USER_SEED"].encode())

    async def main() -> None:
        refusals = Refusals()
        nc = await nats.connect(env["NATS_URL"], user_jwt_cb=lambda: env["NATS_USER_JWT"].encode(),
                                signature_cb=nats_auth.signer(key),
                                error_cb=refusals.seen, allow_reconnect=False, connect_timeout=5)
        try:
            await act(nc, nc.jetstream(timeout=5), where, refusals)
        finally:
            await nc.close()

    run_private(main())


class Refusals:
    """The permission errors the server sent this connection."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.arrived = asyncio.Event()

    async def seen(self, err: Exception) -> None:
        if "permissions violation" in str(err).lower():
            self.errors.append(str(err))
            self.arrived.set()

    async def raise_if_refused(self, nc: Any, what: str) -> None:
        """After `what` was sent: raise PermissionsViolation when the server refused it. The server answers
        a PING after it has processed what came before, so its -ERR precedes the flush's PONG; nats-py hands
        it to error_cb in a task of its own, which may run a moment after the flush returns."""
        await nc.flush(timeout=REFUSAL_WAIT)
        try:
            await asyncio.wait_for(self.arrived.wait(), timeout=ERROR_CALLBACK_WAIT)
        except asyncio.TimeoutError:
            return
        raise PermissionsViolation(f"{what}: {self.errors[0]}")

    async def refused_or(self, nc: Any, what: str, call: Awaitable[object]) -> None:
        """Run a JetStream API `call` whose request the server may refuse: a refused request never gets
        an answer, so the refusal, which arrives first, wins."""
        task = asyncio.ensure_future(call)
        waiter = asyncio.ensure_future(self.arrived.wait())
        done, _ = await asyncio.wait({task, waiter}, timeout=REFUSAL_WAIT, return_when=asyncio.FIRST_COMPLETED)
        for pending in (task, waiter):
            if pending not in done:
                pending.cancel()
        if waiter in done:
            raise PermissionsViolation(f"{what}: {self.errors[0]}")
        if task not in done:
            raise AssertionError(f"{what}: neither an answer nor a refusal within {REFUSAL_WAIT}s")
        task.result()


async def publish_to_stream(nc, js, where: Target, refusals: Refusals) -> None:
    await refusals.refused_or(nc, f"publish to {where.subject}", js.publish(where.subject, b"matrix"))


async def publish_core(nc, js, where: Target, refusals: Refusals) -> None:
    await nc.publish(where.subject, b"matrix")
    await refusals.raise_if_refused(nc, f"publish to {where.subject}")


async def subscribe(nc, js, where: Target, refusals: Refusals) -> None:
    await nc.subscribe(where.subject)
    await refusals.raise_if_refused(nc, f"subscribe to {where.subject}")


async def fetch(nc, js, where: Target, refusals: Refusals) -> None:
    sub = await js.pull_subscribe_bind(durable=where.consumer, stream=where.stream)
    await sub.consumer_info()  # B's consumer is not in A's account: NotFound here


async def stream_info(nc, js, where: Target, refusals: Refusals) -> None:
    assert (await js.stream_info(where.stream)).config.name == where.stream


async def purge(nc, js, where: Target, refusals: Refusals) -> None:
    await js.purge_stream(where.stream)


async def kv_put_get(nc, js, where: Target, refusals: Refusals) -> None:
    kv = await js.key_value(where.bucket)
    await kv.put("k", b"v")
    assert (await kv.get("k")).value == b"v"


async def kv_keys(nc, js, where: Target, refusals: Refusals) -> None:
    kv = await js.key_value(where.bucket)
    assert "k" in await kv.keys()


async def kv_delete(nc, js, where: Target, refusals: Refusals) -> None:
    kv = await js.key_value(where.bucket)
    await kv.put("gone", b"v")
    await kv.delete("gone")


async def delete_stream(nc, js, where: Target, refusals: Refusals) -> None:
    await refusals.refused_or(nc, f"delete stream {where.stream}", js.delete_stream(where.stream))


async def update_stream(nc, js, where: Target, refusals: Refusals) -> None:
    config = StreamConfig(name=where.stream, subjects=[f"{where.stream}.>"], max_msgs=1)
    await refusals.refused_or(nc, f"update stream {where.stream}", js.update_stream(config))


async def create_stream(nc, js, where: Target, refusals: Refusals) -> None:
    config = StreamConfig(name=f"{where.stream}_extra", subjects=[f"{where.stream}.extra.>"])
    await refusals.refused_or(nc, f"create a stream on {where.stream}'s subjects", js.add_stream(config))


def acting(act: Callable[..., Awaitable[object]]) -> Callable[[Tenants, str], None]:
    """`act` with A's user on that project's stream, consumer and bucket."""
    return lambda tenants, project: as_a(tenants, act, target(tenants, project))


OPS = [
    Op("read: stream info", acting(stream_info)),
    Op("read: fetch from consumer", acting(fetch)),
    Op("read: subscribe to subjects", acting(subscribe)),
    Op("read: kv get", acting(kv_put_get)),
    Op("write: publish to stream", acting(publish_to_stream)),
    Op("write: core publish", acting(publish_core)),
    Op("list: kv keys", acting(kv_keys)),
    Op("delete: purge stream", acting(purge)),
    Op("delete: kv delete", acting(kv_delete)),
    # Tenant users manage no streams, their own included: devstack makes them from the declarations.
    Op("administer: delete stream", acting(delete_stream), own=False),
    Op("administer: update stream", acting(update_stream), own=False),
    Op("administer: create stream", acting(create_stream), own=False),
]


@pytest.mark.parametrize("op,target_", cases(OPS))
def test_nats(tenants: Tenants, matrix: Matrix, op: Op, target_: str) -> None:
    project = tenants.a if target_ == "own" else tenants.b
    matrix.check(ENGINE, op.name, target_, lambda: op.run(tenants, project), denied)


def test_nats_admin_ops_refused_on_own_account(tenants: Tenants) -> None:
    """What `other` shows for stream management holds on A's own stream too."""
    where = target(tenants, tenants.a)
    for act in (delete_stream, update_stream, create_stream):
        with pytest.raises(PermissionsViolation):
            as_a(tenants, act, where)
