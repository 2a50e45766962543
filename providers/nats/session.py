"""The admin sessions devstack's NATS kinds run their work in.

nats-py is asyncio while the provider verbs are synchronous: verbs run their
coroutine on one event loop thread per process, over one admin connection
per server, credential and account that lives as long as the process (the
least recently used beyond KEPT_ACCOUNT_SESSIONS are closed). The pickled
provider never holds a connection.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, TypeVar

from providers.clients import LazyModule
from providers.errors import DevstackError, EngineUnavailable, NotFound, Unsupported
from providers.instances import SharedInstance
from providers.nats.claims import (API_TIMEOUT, account_claims, account_jwt, account_key, auth, operator_of,
                                   push_account)

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js import JetStreamContext

# Imported on the first engine call: the program, check and diff never need them.
nats = LazyModule("nats")
nkeys = LazyModule("nkeys")
nats_errors = LazyModule("nats.errors")
jetstream_errors = LazyModule("nats.js.errors")

CONNECT_TIMEOUT = 5

#: Server features by version (major, minor), read in one place.
FEATURES = {
    "metadata": lambda version: version >= (2, 10),
    "consumer_filter_update": lambda version: version >= (2, 10),
}

T = TypeVar("T")


@dataclass
class Session:
    """One admin connection (to the system account, or to one project's account), its JetStream context and
    the server version."""

    nc: NatsClient
    js: JetStreamContext
    version: tuple[int, int]
    #: Set once the connection is gone: nats-py leaves a request it sent before then waiting for its timeout.
    closed: asyncio.Event


class AccountMissing(Exception):
    """The server knows no account of the project: nothing of it exists there."""


#: What to do when the server refuses devstack's operator.
OPERATOR_FIX = ("the stack's admin secret is not the one the server trusts, or the server is not in operator mode; "
                "run `python -m tools.engines start nats` (it writes the server's config from the secret), or, "
                "for a server set up elsewhere, put its operator and system account seeds in the secret "
                "(docs/engines.md)")


def servers(instance: SharedInstance) -> dict[str, Any]:
    """nats.connect keywords that reach the instance: its URLs, and over TLS (`tls://`) the client context
    (the instance's CA, verification, client certificate) and the name its certificate must carry, when
    `serverName` gives one (else each URL's host)."""
    tls = instance.tls
    if tls is None:
        return {"servers": instance.urls("nats")}
    return {"servers": instance.urls("tls"), "tls": tls.ssl_context(),
            **({"tls_hostname": tls.server_name} if tls.server_name else {})}


def connect_fix(instance: SharedInstance, cause: BaseException) -> str:
    """What to do about a connect that failed with `cause`: the TLS settings when the handshake failed."""
    if isinstance(cause, ssl.SSLError) and instance.tls is None:  # nats-py takes up TLS when the server asks
        return (f"the server requires TLS: give shared.{instance.name} a tls block in the stack config, caFile "
                "naming the CA that signed its certificate")
    if isinstance(cause, ssl.SSLError):
        return instance.tls_hint()
    return instance.start_hint()


def admin_credential(secret: str, owner: str | None = None) -> dict[str, Any]:
    """nats.connect keywords that log in as devstack's admin user of the system account (owner None) or of
    project `owner`'s account, from the instance's admin secret."""
    operator = auth.Operator.from_secret(secret)
    account = operator.system if owner is None else operator.account_key(owner)
    user = auth.derived_key(account.seed, auth.ADMIN_USER, nkeys.PREFIX_BYTE_USER)
    token = auth.user_jwt(account, user, auth.ADMIN_USER).encode()
    return {"user_jwt_cb": lambda: token, "signature_cb": auth.signer(user)}


async def open_session(instance: SharedInstance, owner: str | None = None) -> Session:
    """A new connection of devstack's admin user, in the system account (owner None) or in project `owner`'s;
    EngineUnavailable when the server does not answer, AccountMissing when it has no account of `owner`."""
    seen: list[Exception] = []
    closed = asyncio.Event()

    async def remember(err: Exception) -> None:
        # nats-py reports why each attempt failed only here; its final error just says "no servers".
        seen.append(err)

    async def gone() -> None:
        closed.set()

    try:
        nc = await nats.connect(
            **servers(instance),
            **admin_credential(instance.password(), owner),
            allow_reconnect=False,
            # Without a bound, the first connect retries for max_reconnect_attempts x 2s.
            max_reconnect_attempts=1,
            reconnect_time_wait=0.2,
            connect_timeout=CONNECT_TIMEOUT,
            error_cb=remember,
            disconnected_cb=gone,
            closed_cb=gone,
        )
    except (nats_errors.Error, OSError, asyncio.TimeoutError) as err:
        cause = seen[-1] if seen else err
        # The server's refusal arrives as a plain protocol error naming it.
        rejected = isinstance(cause, nats_errors.AuthorizationError) or "authorization violation" in str(cause).lower()
        if rejected and owner is not None:
            raise AccountMissing(owner) from err  # the system account's session, opened first, proved the operator
        raise EngineUnavailable(
            "connect to", f"nats instance {instance.name!r} at {instance.address}",
            str(cause) or type(cause).__name__, OPERATOR_FIX if rejected else connect_fix(instance, cause),
        ) from err
    server = nc.connected_server_version
    if not FEATURES["metadata"]((server.major, server.minor)):
        await nc.close()
        raise Unsupported(
            "manage", f"nats instance {instance.name!r}",
            f"server {server} has no stream metadata for the ownership marker", "use nats-server 2.10 or newer",
        )
    return Session(nc=nc, js=nc.jetstream(timeout=API_TIMEOUT), version=(server.major, server.minor), closed=closed)


#: A server that answers no JetStream API request: a stream, consumer or kv needs it.
JETSTREAM_MISSING = "no JetStream answered: the server runs without it, or without it for the project's account"
JETSTREAM_FIX = ("start nats-server with -js (or a jetstream block); a project's account gets JetStream from its "
                 "`account` declaration's limits")
#: Connections to project accounts kept open per process; the least recently used beyond it is closed.
KEPT_ACCOUNT_SESSIONS = 32


class Sessions:
    """This process's admin sessions, one per server, credential and account, on one event loop thread.

    Provider verbs arrive on several threads at once; their coroutines all run
    on this loop, where nats-py multiplexes them over the shared connection.
    A session whose connection has closed (the server restarted) is replaced.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: dict[tuple[str, str, str | None, Any], Session] = {}
        self._opening: asyncio.Lock | None = None
        self._accounts: dict[tuple[str, str], asyncio.Lock] = {}

    def run(self, instance: SharedInstance, work: Callable[[Session], Awaitable[T]], owner: str | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(self._call(instance, work, owner), self._running_loop()).result()

    def account_lock(self, instance: SharedInstance, owner: str) -> asyncio.Lock:
        """Serializes this process's changes to one account's JWT (read, change, push), on the loop."""
        return self._accounts.setdefault((instance.address, owner), asyncio.Lock())

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="nats-sessions", daemon=True).start()
                self._loop = loop
            return self._loop

    async def _call(self, instance: SharedInstance, work: Callable[[Session], Awaitable[T]], owner: str | None) -> T:
        """`work`, or EngineUnavailable as soon as the server stops answering (not one API timeout later)."""
        session = await self._session(instance, owner)
        working, closing = asyncio.ensure_future(work(session)), asyncio.ensure_future(session.closed.wait())
        try:
            done, _ = await asyncio.wait({working, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # the loser, or both when this call is itself cancelled
            closing.cancel()
            if not working.done():
                working.cancel()
        if working not in done:
            raise instance.stopped_answering("the connection closed")
        try:
            return working.result()
        except (nats_errors.ConnectionClosedError, nats_errors.TimeoutError, asyncio.TimeoutError, OSError) as err:
            raise instance.stopped_answering(err) from err
        except jetstream_errors.ServiceUnavailableError as err:  # nats-py's word for "no responders" to an API call
            raise Unsupported("use", f"nats instance {instance.name!r} at {instance.address}",
                              JETSTREAM_MISSING, f"{JETSTREAM_FIX}; nothing was changed") from err

    async def session(self, instance: SharedInstance, owner: str | None) -> Session:
        """The session for `owner`'s account (None: the system account), opened if needed; on the loop."""
        return await self._session(instance, owner)

    async def _session(self, instance: SharedInstance, owner: str | None) -> Session:
        self._opening = self._opening or asyncio.Lock()  # only this loop's thread gets here
        async with self._opening:
            if owner is not None:
                await self._open(instance, None)  # proves the operator, so a refusal below means no account
            return await self._open(instance, owner)

    async def _open(self, instance: SharedInstance, owner: str | None) -> Session:
        key = _key(instance, owner)
        session = self._sessions.pop(key, None)
        if session is None or not session.nc.is_connected:
            # A login to an account the server does not hold waits out its resolver's lookup: ask the
            # system account first, which answers at once.
            system = self._sessions.get(_key(instance, None))
            if owner is not None and system is not None \
                    and await account_claims(system.nc, account_key(instance, owner)) is None:
                raise AccountMissing(owner)
            session = await open_session(instance, owner)
        self._sessions[key] = session  # last: the most recently used
        accounts = [k for k in self._sessions if k[2] is not None]
        for stale in accounts[:max(0, len(accounts) - KEPT_ACCOUNT_SESSIONS)]:
            await self._sessions.pop(stale).nc.close()
        return session

    async def forget(self, instance: SharedInstance, owner: str) -> None:
        """Close the session in `owner`'s account (it was deleted: the server closes it anyway)."""
        session = self._sessions.pop(_key(instance, owner), None)
        if session is not None:
            await session.nc.close()


def _key(instance: SharedInstance, owner: str | None) -> tuple[str, str, str | None, Any]:
    """A session's key: server, credential, account, and TLS settings (a session opened with one CA must
    not serve an instance configured with another)."""
    return instance.address, instance.password(), owner, instance.tls


SESSIONS = Sessions()


def run_private(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on an event loop of its own, then close that loop.

    Unlike asyncio.run, this never sets or clears the calling thread's current
    loop, so code in the same thread that relies on it (Pulumi's runtime, an
    async caller) is left as it was. Inside a running loop it uses a thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(coroutine)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run_private, coroutine).result()


def run(instance: SharedInstance, work: Callable[[Session], Awaitable[T]], owner: str | None = None,
        *, stack: str | None = None) -> T:
    """Run `work` with this process's admin session for the instance: in project `owner`'s account, or
    the system account. AccountMissing when the server has no account of `owner`, unless `stack` is
    given: then the account is made first, with default limits (a stream made before its account)."""
    try:
        return SESSIONS.run(instance, work, owner)
    except AccountMissing:
        if stack is None or owner is None:
            raise
    SESSIONS.run(instance, lambda system: ensure_account(system, instance, owner, stack))
    return SESSIONS.run(instance, work, owner)


def observed(instance: SharedInstance, owner: str, work: Callable[[Session], Awaitable[T]]) -> T | None:
    """`work` in `owner`'s account; None when the account does not exist (nor does anything in it)."""
    try:
        return run(instance, work, owner)
    except AccountMissing:
        return None


def in_account(instance: SharedInstance, owner: str, work: Callable[[Session], Awaitable[T]], what: str) -> T:
    """`work` in `owner`'s account; NotFound naming `what` when the account (so all in it) is gone."""
    try:
        return run(instance, work, owner)
    except AccountMissing:
        raise NotFound("drop", what, f"project {owner!r} has no account on the server") from None


async def ensure_account(system: Session, instance: SharedInstance, owner: str, stack: str) -> None:
    """Make project `owner`'s account with default limits, unless the server has it."""
    async with SESSIONS.account_lock(instance, owner):
        if await account_claims(system.nc, account_key(instance, owner)) is None:
            await push_new_account(system, instance, owner, lambda: account_jwt(operator_of(instance), owner, stack))


#: How long a new account may take to take logins and answer JetStream requests.
ACCOUNT_READY_SECONDS = 10.0


async def push_new_account(system: Session, instance: SharedInstance, owner: str, sign: Callable[[], str]) -> None:
    """Push the JWT `sign` makes for a new account, and return once JetStream answers in it.

    The server enables JetStream for a new account after it has answered the claims update (a request in
    between finds no responder). An account pushed within about a second of its own deletion is listed
    but refuses every login until a later update: then it is signed and pushed again."""
    await push_account(system.nc, sign(), owner)
    deadline = asyncio.get_running_loop().time() + ACCOUNT_READY_SECONDS
    while True:
        try:
            session = await SESSIONS.session(instance, owner)
            if not session.nc._server_info.get("jetstream"):
                return  # a server without JetStream: the login is all there is to wait for (INFO says so)
            await session.js.account_info()
            return
        except AccountMissing:
            retry = "pushed again"
        except (jetstream_errors.ServiceUnavailableError, nats_errors.NoRespondersError, nats_errors.TimeoutError):
            retry = ""
        if asyncio.get_running_loop().time() > deadline:
            raise Unsupported("use", f"nats instance {instance.name!r} at {instance.address}",
                              f"project {owner!r}'s new account did not take logins and answer JetStream requests "
                              f"within {ACCOUNT_READY_SECONDS:.0f}s",
                              "the server refuses JetStream to an account whose maxMemory or maxStorage does not "
                              "fit in what it has left (its log says `insufficient ... resources`): lower them, or "
                              f"-1 to share the server's; else {JETSTREAM_FIX}")
        await asyncio.sleep(0.25 if retry else 0.02)
        if retry:
            with suppress(DevstackError):  # one signed within the same second as the last may be refused
                await push_account(system.nc, sign(), owner)
