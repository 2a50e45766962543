"""`python -m tools.provider_server`: Pulumi's dynamic-provider server with more worker threads.

The engine runs up to `--parallel` resource operations at once (4 per CPU
by default), but `pulumi.dynamic`'s server answers only 4 RPCs at a time,
so on a larger run most operations queue inside the provider process while
the engines sit idle. This runs the very same server module, handing gRPC a
larger pool. Our providers are safe to call from many threads: clients are
shared under locks, and PostgreSQL DDL is serialized on the server by an
advisory lock, not by the thread count.

DEVSTACK_PROVIDER_WORKERS overrides the pool size (default 16).

The stock server reports every exception as its Python traceback. An error
our providers raise on purpose (`providers.errors`) already says which
resource, why and what to do, so the engine gets that line alone
(`Conflict: cannot create ...`); anything else keeps its traceback, as a bug
should. A check failure on a nested param (`params.partitions`) names it in
its reason: the engine would print its value as `{<nil>}`.

When the engine is killed (`kill -9` of `pulumi up`), it never interrupts the
server: the server notices its parent is gone, lets the calls under way finish
and exits.

When the engine interrupts it (the deployment is over), the process exits at
once instead of finalizing the interpreter: every call's effect is durable
before the call returns, so there is nothing to tear down, and destroying the
engine clients (librdkafka's above all) would keep `pulumi` waiting.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from providers.errors import DevstackError

DEFAULT_WORKERS = 16


def workers() -> int:
    value = os.environ.get("DEVSTACK_PROVIDER_WORKERS", "")
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_WORKERS


class _MessageOnlyContext:
    """The call's context, except that aborting on a DevstackError sends its message, not the traceback."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str):
        # The stock server aborts from inside its `except` block: the exception is still at hand.
        raised = sys.exc_info()[1]
        if isinstance(raised, DevstackError):
            details = f"{type(raised).__name__}: {raised}"
        return self._context.abort(code, details)

    def __getattr__(self, name: str):
        return getattr(self._context, name)


def _nested_failures_unnamed(response):
    """The engine prints a check failure's property with its value looked up at the top level only:
    `params.partitions` came out as "value {<nil>}". A nested one goes into the reason instead."""
    for failure in response.failures:
        if "." in failure.property:
            failure.reason, failure.property = f"{failure.property}: {failure.reason}", ""
    return response


class ExpectedErrorsAsMessages(grpc.ServerInterceptor):
    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        behavior, checking = handler.unary_unary, handler_call_details.method.endswith("/Check")

        def answer(request, context):
            response = behavior(request, _MessageOnlyContext(context))
            return _nested_failures_unnamed(response) if checking else response

        return grpc.unary_unary_rpc_method_handler(
            answer,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


#: How often the server looks for the engine that started it, and how long the calls under way
#: get to finish once it is gone.
ORPHAN_POLL_SECONDS, ORPHAN_GRACE_SECONDS = 1.0, 60.0


def exit_when_orphaned(server: grpc.Server, engine_pid: int) -> None:
    """A killed `pulumi` never sends its SIGINT. Once the engine is gone, let the calls under way
    finish (what they make, the next up adopts), then exit instead of idling for ever."""
    while os.getppid() == engine_pid:
        time.sleep(ORPHAN_POLL_SECONDS)
    server.stop(ORPHAN_GRACE_SECONDS).wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    make_server = grpc.server

    def server_with_more_workers(thread_pool: ThreadPoolExecutor, *args, **kwargs) -> grpc.Server:
        # The module builds its own 4-thread pool inline; swap it before it serves anything.
        thread_pool.shutdown(wait=False)
        pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="provider")
        server = make_server(pool, *args, interceptors=[ExpectedErrorsAsMessages()], **kwargs)
        threading.Thread(target=exit_when_orphaned, args=(server, os.getppid()), name="orphan-watch",
                         daemon=True).start()
        return server

    grpc.server = server_with_more_workers
    # Returns once SIGINT has stopped the server.
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
