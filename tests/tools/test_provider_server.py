"""tools.provider_server: Pulumi's dynamic-provider server with more worker threads than its fixed 4."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from tests.tools.gate_provider import GATE_SIZE, Failing, Gate
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def serve(module: str, workers: str | None = None) -> tuple[subprocess.Popen, int]:
    env = {k: v for k, v in os.environ.items() if k != "DEVSTACK_PROVIDER_WORKERS"}
    if workers:
        env["DEVSTACK_PROVIDER_WORKERS"] = workers
    server = subprocess.Popen([sys.executable, "-u", "-m", module, "127.0.0.1:1"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return server, int(server.stdout.readline())


def create(port: int, provider, name: str) -> provider_pb2.CreateResponse:
    properties = asyncio.run(rpc.serialize_properties({"__provider": serialize_provider(provider), "name": name}, {}))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        return stub.Create(provider_pb2.CreateRequest(urn=f"urn:{name}", properties=properties), timeout=30)


def creates_together(port: int) -> list[int]:
    """GATE_SIZE concurrent creates; how many were inside the provider together, as each saw it."""
    def together(index: int) -> int:
        return int(create(port, Gate(), f"r{index}").properties["together"])

    with ThreadPoolExecutor(GATE_SIZE) as pool:
        return list(pool.map(together, range(GATE_SIZE)))


@pytest.mark.parametrize("module, workers, expected", [
    ("tools.provider_server", None, GATE_SIZE),  # the default pool: 16
    ("tools.provider_server", "12", GATE_SIZE),
    ("tools.provider_server", "4", 0),  # as few as Pulumi's own: the gate never fills
    ("pulumi.dynamic", None, 0),  # the stock server, for contrast
])
def test_concurrent_creates(module, workers, expected):
    server, port = serve(module, workers)
    try:
        assert creates_together(port) == [expected] * GATE_SIZE
    finally:
        server.kill()
        server.wait()


def test_interrupt_ends_the_server_at_once():
    """The engine ends a provider with SIGINT once the deployment is over: it must exit cleanly (status 0),
    its port closed, after having served calls (so its clients and worker threads exist)."""
    server, port = serve("tools.provider_server")
    try:
        assert creates_together(port) == [GATE_SIZE] * GATE_SIZE
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        server.kill()
        server.wait()


def test_errors_raised_on_purpose_read_as_their_message_and_bugs_keep_their_traceback():
    server, port = serve("tools.provider_server")
    try:
        with pytest.raises(grpc.RpcError) as on_purpose:
            create(port, Failing(), "taken")
        assert on_purpose.value.code() == grpc.StatusCode.UNKNOWN
        assert on_purpose.value.details() == ("Conflict: cannot create database postgres/pg/database/taken@a: "
                                              "'taken' belongs to another project")
        with pytest.raises(grpc.RpcError) as bug:
            create(port, Failing(), "other")
        assert bug.value.details().startswith("Traceback (most recent call last):")
        assert bug.value.details().rstrip().endswith("KeyError: 'a bug'")
    finally:
        server.kill()
        server.wait()


def exited(pid: int) -> bool:
    """Gone, or a zombie its new parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_server_whose_engine_was_killed_exits_by_itself():
    """`kill -9` of `pulumi up` sends the provider no SIGINT: it must notice and exit, not idle for ever."""
    engine = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -u -m tools.provider_server 127.0.0.1:1 & '
                                           'echo "pid=$!"; wait'],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = [engine.stdout.readline().strip() for _ in range(2)]
    pid = int(next(line for line in lines if line.startswith("pid=")).removeprefix("pid="))
    port = int(next(line for line in lines if not line.startswith("pid=")))
    try:
        assert creates_together(port) == [GATE_SIZE] * GATE_SIZE
        assert not exited(pid)  # its engine is alive: it serves on
        engine.kill()
        engine.wait()
        eventually(lambda: exited(pid), 15, f"the provider server (pid {pid}) to exit", interval=0.2)
        assert exited(pid)
    finally:
        if not exited(pid):
            os.kill(pid, signal.SIGKILL)
