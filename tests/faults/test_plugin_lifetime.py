"""The language host ends with the engine that started it.

`kill -9` of `pulumi up` (the fault suite's own case, and a user's Ctrl-\\ or
OOM kill) gives the engine no chance to stop its plugins: our language host
must notice on its own, as Pulumi's does, instead of living on.
"""

from __future__ import annotations

import subprocess
import time
from concurrent import futures

import grpc

from tools.pulumi_env import BIN_DIR


def test_the_language_host_exits_once_its_engine_is_gone():
    engine = grpc.server(futures.ThreadPoolExecutor(max_workers=2))  # answers health checks as Unimplemented
    port = engine.add_insecure_port("127.0.0.1:0")
    engine.start()
    host = subprocess.Popen([str(BIN_DIR / "pulumi-language-python"), f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert host.stdout.readline().strip().isdigit()  # serving: it printed its port
        time.sleep(12)  # past one check of a live engine
        assert host.poll() is None, "the host quit while its engine was alive"
        engine.stop(grace=None)
        host.wait(timeout=40)  # a check every 10 s
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        engine.stop(grace=None)
