"""`python -m tools.provider_server`: Pulumi's dynamic-provider server with more worker threads.

The engine runs up to `--parallel` resource operations at once (4 per CPU
by default), but `pulumi.dynamic`'s server answers only 4 RPCs at a time,
so on a larger run most operations queue inside the provider process while
the engines sit idle. This runs the very same server module, handing gRPC a
larger pool. Our providers are safe to call from many threads: clients are
shared under locks, and PostgreSQL DDL is serialized on the server by an
advisory lock, not by the thread count.

DEVSTACK_PROVIDER_WORKERS overrides the pool size (default 16).

When the engine interrupts it (the deployment is over), the process exits at
once instead of finalizing the interpreter: every call's effect is durable
before the call returns, so there is nothing to tear down, and destroying the
engine clients (librdkafka's above all) kept `pulumi` waiting some 0.3s.
"""

from __future__ import annotations

import os
import runpy
import sys
from concurrent.futures import ThreadPoolExecutor

import grpc

DEFAULT_WORKERS = 16


def workers() -> int:
    value = os.environ.get("DEVSTACK_PROVIDER_WORKERS", "")
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_WORKERS


def main() -> None:
    make_server = grpc.server

    def server_with_more_workers(thread_pool: ThreadPoolExecutor, *args, **kwargs) -> grpc.Server:
        # The module builds its own 4-thread pool inline; swap it before it serves anything.
        thread_pool.shutdown(wait=False)
        return make_server(ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="provider"), *args, **kwargs)

    grpc.server = server_with_more_workers
    # Returns once SIGINT has stopped the server.
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
