"""NATS JetStream: an account per project, with its streams, durable consumers, KV buckets and users.

The server runs in operator mode (providers.nats_auth): each project gets an
account of its own, pushed to the running server by the `account` kind, and
everything else of the project lives in it, out of every other project's
reach. Services log in as a `user` of the account.

Names: a project's default declaration (name == owner) maps to `<owner>`,
any other to `<owner>_<name>`; KV buckets live in the stream `KV_<bucket>`.
Subjects: every stream's subjects stay under the owner's prefix `<owner>.>`
(check() refuses anything else), and a user may publish and subscribe there.

Ownership: the marker goes into the stream's (and consumer's) `metadata`
as `devstack.managed-by`, `devstack.owner` and `devstack.stack` (server 2.10+),
and into the account JWT's description.

nats-py is asyncio while the provider verbs are synchronous: verbs run their
coroutine on one event loop thread per process, over one admin connection
per server, credential and account that lives as long as the process (the
least recently used beyond KEPT_ACCOUNT_SESSIONS are closed). The pickled
provider never holds a connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Coroutine, Iterator, Literal, Mapping, TypeVar

from pulumi.dynamic import CheckFailure, ReadResult
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from providers import naming as naming_rules
from providers.base import KindProvider, Observed, referenced_name
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.clients import LazyModule
from providers.errors import Conflict, DevstackError, EngineUnavailable, InvalidSpec, NotFound, Unsupported
from providers.credentials import Rotation, predictable_password, rotation_of
from providers.identity import CURRENT_NAMING, PREFIXED, Identity
from providers.instances import SharedInstance

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js import JetStreamContext
    from nats.js.api import ConsumerConfig, ConsumerInfo, StreamConfig, StreamInfo

# Imported on the first engine call: the program, check and diff never need them.
nats = LazyModule("nats")
nkeys = LazyModule("nkeys")
nats_auth = LazyModule("providers.nats_auth")
nats_errors = LazyModule("nats.errors")
jetstream_api = LazyModule("nats.js.api")
jetstream_errors = LazyModule("nats.js.errors")

ENGINE = "nats"
#: The server refuses longer stream names ("maximum allowed is 255"); KV adds "KV_".
MAX_NAME = 255
KV_STREAM_PREFIX = "KV_"
# Lowercase only: JetStream stores a stream under a directory of its name, and
# on a case-insensitive filesystem "Shop" and "shop" would share one.
_NAME = re.compile(r"[a-z0-9_-]+")
_NAME_RULE = (
    "NATS names (streams, consumers, KV buckets) use lowercase letters, digits, '-' and '_' only: "
    "no '.', '*', '>', spaces or path separators"
)
MARKER_PREFIX = "devstack."
#: The server's default duplicate window (seconds); it may not exceed max age.
DUPLICATE_WINDOW = 120.0
#: The longest duration JetStream takes: the server keeps durations as int64 nanoseconds.
MAX_SECONDS = (2**63 - 1) // 10**9
CONNECT_TIMEOUT = 5
API_TIMEOUT = 10.0
#: JetStream's error code for a stream whose storage the server could not set up (sent with status 500).
STREAM_STORE_FAILED = 10049
#: Tries of a stream's create that the server fails that way, with STORE_PAUSE x the try's number between them.
STORE_ATTEMPTS = 4
STORE_PAUSE = 0.1

#: Server features by version (major, minor), read in one place.
FEATURES = {
    "metadata": lambda version: version >= (2, 10),
    "consumer_filter_update": lambda version: version >= (2, 10),
}

T = TypeVar("T")


# --- names and subjects ----------------------------------------------------


def nats_name(name: str, owner: str, limit: int = MAX_NAME) -> str:
    """`<owner>` for the default declaration, else `<owner>_<name>`; InvalidSpec names the broken rule."""
    mapped = owner if name == owner else f"{owner}_{name}"
    for part, value in (("owner", owner), ("name", name)):
        if not _NAME.fullmatch(value):
            raise InvalidSpec("map", f"{part} {value!r}", _NAME_RULE)
    if len(mapped) > limit:
        raise InvalidSpec("map", repr(mapped), f"NATS names here are at most {limit} characters")
    return mapped


def subject_token(owner: str) -> str:
    """The project's name as one subject token: no '.', which would put its subjects inside another
    project's (`acme.shop.>` in `acme.>`)."""
    return naming_rules.nats(owner)


def owner_subjects(owner: str) -> str:
    """The subject space a project owns: everything under `<owner>.`."""
    return f"{subject_token(owner)}.>"


def default_subjects(name: str, owner: str) -> list[str]:
    """`<owner>.>` for the default stream; `<owner>.<name>.>` for others, so named streams never overlap
    (the default one overlaps every other: validation asks for subjects of its own then, see Stream.clash)."""
    return [owner_subjects(owner)] if name == owner else [f"{subject_token(owner)}.{name}.>"]


def subject_error(subject: str) -> str | None:
    """Why `subject` is not a valid NATS subject (filter), or None."""
    if not subject or any(c.isspace() for c in subject):
        return "a subject is non-empty and has no whitespace"
    tokens = subject.split(".")
    if any(not t for t in tokens):
        return "a subject has no empty tokens (no leading, trailing or double '.')"
    if any(("*" in t or ">" in t) and t not in ("*", ">") for t in tokens):
        return "'*' and '>' are whole tokens only"
    if ">" in tokens[:-1]:
        return "'>' may only be the last token"
    return None


def subject_within(subject: str, pattern: str) -> bool:
    """True when every subject `subject` matches is also matched by `pattern`."""
    have, want = subject.split("."), pattern.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or have[i] == ">":
            return False
        if token != "*" and have[i] != token:
            return False
    return len(have) == len(want)


def filters_inside(filter_subject: str | None, subjects: list[str]) -> bool:
    """Whether a consumer filtering on `filter_subject` (None: everything) gets only what a stream
    on `subjects` holds."""
    return not filter_subject or any(subject_within(filter_subject, s) for s in subjects)


def subjects_overlap(one: str, other: str) -> bool:
    """True when some subject matches both filters (NATS refuses two streams that share one)."""
    mine, theirs = one.split("."), other.split(".")
    for a, b in zip(mine, theirs):
        if ">" in (a, b):
            return True
        if a != b and "*" not in (a, b):
            return False
    return len(mine) == len(theirs)


def subjects_failures(field: str, subjects: list[str], owner: str) -> list[CheckFailure]:
    """The tenant check: every subject must be valid and inside `<owner>.>`."""
    failures = []
    for subject in subjects:
        problem = subject_error(subject)
        if problem is None and not subject_within(subject, owner_subjects(owner)):
            problem = f"{subject!r} is outside the project's subjects {owner_subjects(owner)!r}"
        elif problem is not None:
            problem = f"{subject!r}: {problem}"
        if problem:
            failures.append(CheckFailure(field, problem))
    return failures


# --- ownership ----------------------------------------------------------------


def marker_metadata(ident: Identity, stack: str) -> dict[str, str]:
    """The ownership marker as metadata entries (`devstack.owner`, ...)."""
    return {MARKER_PREFIX + key: value for key, value in json.loads(ownership_marker(ident, stack)).items()}


def metadata_marker(metadata: dict[str, str] | None) -> str:
    """The ownership marker a stream's or consumer's metadata entries spell out, as marker text."""
    return json.dumps({k[len(MARKER_PREFIX):]: v for k, v in (metadata or {}).items() if k.startswith(MARKER_PREFIX)})


def metadata_owner(metadata: dict[str, str] | None) -> str | None:
    """The owner recorded in a stream's or consumer's metadata, or None when it is not ours."""
    return marker_owner(metadata_marker(metadata))


def metadata_workspace(metadata: dict[str, str] | None) -> str | None:
    """The workspace recorded in a stream's or consumer's metadata."""
    return marker_field(metadata_marker(metadata), "stack")


def with_marker(live: dict[str, str] | None, marker: dict[str, str]) -> dict[str, str]:
    """Keep foreign metadata keys (the server's `_nats.*`), replace ours."""
    kept = {k: v for k, v in (live or {}).items() if not k.startswith(MARKER_PREFIX)}
    return {**kept, **marker}


# --- connection -----------------------------------------------------------------


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


def admin_credential(secret: str, owner: str | None = None) -> dict[str, Any]:
    """nats.connect keywords that log in as devstack's admin user of the system account (owner None) or of
    project `owner`'s account, from the instance's admin secret."""
    operator = nats_auth.Operator.from_secret(secret)
    account = operator.system if owner is None else operator.account_key(owner)
    user = nats_auth.derived_key(account.seed, nats_auth.ADMIN_USER, nkeys.PREFIX_BYTE_USER)
    token = nats_auth.user_jwt(account, user, nats_auth.ADMIN_USER).encode()
    return {"user_jwt_cb": lambda: token, "signature_cb": nats_auth.signer(user)}


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
            servers=[f"nats://{instance.address}"],
            **admin_credential(instance.password(), owner),
            allow_reconnect=False,
            # Without a bound, the first connect retries for max_reconnect_attempts x 2s (two minutes).
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
            str(cause) or type(cause).__name__, OPERATOR_FIX if rejected else instance.start_hint(),
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
        self._sessions: dict[tuple[str, str, str | None], Session] = {}
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
        key = (instance.address, instance.password(), owner)
        session = self._sessions.pop(key, None)
        if session is None or not session.nc.is_connected:
            # A login to an account the server does not hold waits out its resolver's lookup (1.9s on
            # 2.15): ask the system account first, which answers at once.
            system = self._sessions.get((instance.address, instance.password(), None))
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
        session = self._sessions.pop((instance.address, instance.password(), owner), None)
        if session is not None:
            await session.nc.close()


_SESSIONS = Sessions()


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
        return _SESSIONS.run(instance, work, owner)
    except AccountMissing:
        if stack is None or owner is None:
            raise
    _SESSIONS.run(instance, lambda system: ensure_account(system, instance, owner, stack))
    return _SESSIONS.run(instance, work, owner)


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


# --- accounts ------------------------------------------------------------------


def account_marker(owner: str, stack: str) -> str:
    """The ownership marker an account JWT carries in its description."""
    return ownership_marker(Identity(engine=ENGINE, instance="", kind="account", name=owner, owner=owner), stack)


class AccountSpec(BaseModel):
    """Params of a project's `account`: its JetStream and connection limits. All update in place.

    nats-server reserves an account's memory and storage limits out of its own totals and refuses
    JetStream to an account whose limits no longer fit beside the others', so those two default to
    unlimited (bounded by the server's totals, shared); the counts bound a runaway project."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_memory: int = Field(default=-1, ge=-1, alias="maxMemory", description="bytes in memory streams; -1 = unlimited")
    max_storage: int = Field(default=-1, ge=-1, alias="maxStorage", description="bytes in file streams; -1 = unlimited")
    max_streams: int = Field(default=100, ge=-1, alias="maxStreams", description="streams and kv buckets; -1 = unlimited")
    max_consumers: int = Field(default=1000, ge=-1, alias="maxConsumers", description="-1 = unlimited")
    max_connections: int = Field(default=1000, ge=-1, alias="maxConnections", description="-1 = unlimited")


#: AccountSpec's fields as the account JWT's limits spell them.
ACCOUNT_LIMITS = {"max_memory": "mem_storage", "max_storage": "disk_storage", "max_streams": "streams",
                  "max_consumers": "consumer", "max_connections": "conn"}


def account_jwt(operator: Any, owner: str, stack: str, spec: AccountSpec | None = None,
                revocations: Mapping[str, int] | None = None, marker: str | None = None) -> str:
    """Project `owner`'s account JWT: JetStream with `spec`'s limits (the defaults when None), the marker
    for `stack` (or `marker`, the live one kept as it is)."""
    spec = spec or AccountSpec()
    limits = {claim: getattr(spec, field) for field, claim in ACCOUNT_LIMITS.items()}
    return operator.account_jwt(operator.account_key(owner), naming_rules.nats(owner),
                                description=marker if marker is not None else account_marker(owner, stack),
                                jetstream=limits, revocations=dict(revocations or {}))


def account_params(claims: Mapping[str, Any]) -> dict[str, Any]:
    """The live account's limits in the form of AccountSpec's dump (a limit left out is 0)."""
    limits = (claims.get("nats") or {}).get("limits") or {}
    return {field: limits.get(claim, 0) for field, claim in ACCOUNT_LIMITS.items()}


def account_description(claims: Mapping[str, Any]) -> str:
    return str((claims.get("nats") or {}).get("description") or "")


def revocations_of(claims: Mapping[str, Any] | None) -> dict[str, int]:
    return dict(((claims or {}).get("nats") or {}).get("revocations") or {})


def operator_of(instance: SharedInstance) -> Any:
    return nats_auth.Operator.from_secret(instance.password())


def account_key(instance: SharedInstance, owner: str) -> str:
    """The public key of project `owner`'s account on the instance."""
    return nats_auth.public(operator_of(instance).account_key(owner))


async def account_claims(nc: NatsClient, account: str) -> dict[str, Any] | None:
    """The claims of the account the server holds under public key `account`; None when it has none."""
    reply = await nc.request(f"$SYS.REQ.ACCOUNT.{account}.CLAIMS.LOOKUP", b"", timeout=API_TIMEOUT)
    return nats_auth.decode(reply.data.decode()) if reply.data else None


async def all_accounts(nc: NatsClient) -> list[str]:
    """The public keys of every account the server's resolver holds."""
    reply = await nc.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=API_TIMEOUT)
    return list(json.loads(reply.data).get("data") or [])


async def _claims_request(nc: NatsClient, subject: str, token: str, what: str) -> None:
    """Send an operator-signed JWT to the resolver; DevstackError with the server's words when it refuses."""
    reply = json.loads((await nc.request(subject, token.encode(), timeout=API_TIMEOUT)).data)
    answer = reply.get("data") or reply.get("error") or {}
    if answer.get("code") != 200:
        raise DevstackError("push", what, f"the server refused it: {answer.get('description') or answer.get('message') or answer}",
                            "the server must run with the full account resolver (`resolver: {type: full, "
                            "allow_delete: true}`) and trust this stack's operator (docs/engines.md)")


async def push_account(nc: NatsClient, token: str, owner: str) -> None:
    await _claims_request(nc, "$SYS.REQ.CLAIMS.UPDATE", token, f"the nats account of project {owner!r}")


async def ensure_account(system: Session, instance: SharedInstance, owner: str, stack: str) -> None:
    """Make project `owner`'s account with default limits, unless the server has it."""
    async with _SESSIONS.account_lock(instance, owner):
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
            session = await _SESSIONS.session(instance, owner)
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


async def _clustered(session: Session) -> bool:
    # The server's INFO names its cluster only when it has one (nats-py keeps INFO only here).
    return "cluster" in session.nc._server_info


#: JetStream error codes whose cause is the declaration, not the server.
_SPEC_ERRORS = {
    10065: "its subjects overlap those of another stream; give each stream its own subjects under the project's prefix",
    10074: "replicas > 1 needs a clustered server; this one is a single server",
    10047: "params.maxBytes is more than the server's file storage holds: lower it, or leave it unset (unlimited)",
    10028: "params.maxBytes is more than the server's memory holds: lower it, or use storage: file",
}


@contextmanager
def api_errors(verb: str, what: str) -> Iterator[None]:
    """Turn JetStream API refusals into typed errors that say what to change."""
    try:
        yield
    except jetstream_errors.APIError as err:
        if isinstance(err, jetstream_errors.ServiceUnavailableError):
            raise  # no JetStream at all: the session's call names it (Sessions._call)
        if isinstance(err, jetstream_errors.NotFoundError):
            raise NotFound(verb, what, err.description or "not found") from err
        if err.err_code == STREAM_STORE_FAILED:  # the server's own failure, not the declaration's (add_stream)
            raise DevstackError(verb, what, f"the server failed: {err.description}",
                                "the nats-server log says why; run the command again") from err
        hint = _SPEC_ERRORS.get(err.err_code or 0, "change the declaration; retrying will not help")
        raise InvalidSpec(verb, what, f"the server refused: {err.description}", hint) from err


def _value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


async def stream_info(js: JetStreamContext, name: str) -> StreamInfo | None:
    try:
        return await js.stream_info(name)
    except jetstream_errors.NotFoundError:
        return None


async def add_stream(js: JetStreamContext, config: StreamConfig) -> StreamInfo:
    """Create a stream, trying again when the server fails to set up its storage.

    A single server removes its account's streams directory once the
    account's last stream is deleted; a create that lands at that moment fails
    with "error creating store for stream" (its log: mkdir .../streams: no such
    file or directory), about 1 in 400 such creates on nats-server 2.15. The
    server drops the failed stream and what it had made of its directories, so
    the next try starts afresh.
    """
    for attempt in range(1, STORE_ATTEMPTS):
        try:
            return await js.add_stream(config)
        except jetstream_errors.ServerError as err:
            if err.err_code != STREAM_STORE_FAILED:
                raise
        await asyncio.sleep(STORE_PAUSE * attempt)
    return await js.add_stream(config)


async def delete_owned_stream(js: JetStreamContext, name: str, ident: Identity, what: str) -> None:
    """Delete a stream only when its metadata names the resource's owner: a purge never drops someone else's."""
    info = await stream_info(js, name)
    if info is None:
        raise NotFound("drop", what, "it does not exist")
    holder = metadata_owner(info.config.metadata)
    if holder != ident.owner:
        raise Conflict("drop", what, f"{name!r} now belongs to {f'project {holder!r}' if holder else 'something devstack does not manage'}",
                       "nothing was dropped; remove it from the state with `pulumi state delete` if it is no longer ours")
    await js.delete_stream(name)


def duplicate_window(max_age: int) -> float:
    return min(DUPLICATE_WINDOW, float(max_age)) if max_age else DUPLICATE_WINDOW


# --- kinds -------------------------------------------------------------------------


class NatsKind(KindProvider):
    """Shared by the NATS kinds: names are checked at check() time, plus a per-kind tenant check."""

    engine = ENGINE

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        if naming == PREFIXED:
            return nats_name(name, owner)
        return naming_rules.nats(name)

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        replicas = getattr(spec, "replicas", 1)
        if replicas > 1 and not run(instance, _clustered):
            return [("replicas", f"{replicas} replicas need a clustered server and the one at {instance.address} is a "
                                 "single server", "set replicas: 1")]
        return []

    @staticmethod
    def _base_attributes(instance: SharedInstance) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port}


class StreamSpec(BaseModel):
    """Params of a `stream`. Retention and storage are fixed at creation; the rest update in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Default (filled in by check): `<owner>.>`, or `<owner>.<name>.>` for a named stream.
    subjects: list[str] | None = Field(default=None, min_length=1)
    retention: Literal["limits", "interest", "workqueue"] = "limits"
    storage: Literal["file", "memory"] = "file"
    max_age: int = Field(default=0, ge=0, le=MAX_SECONDS, alias="maxAge", description="seconds; 0 = unlimited")
    max_bytes: int = Field(default=-1, ge=-1, alias="maxBytes", description="-1 = unlimited")
    max_msgs: int = Field(default=-1, ge=-1, alias="maxMsgs", description="-1 = unlimited")
    replicas: int = Field(default=1, ge=1, le=5)


def stream_params(config: StreamConfig) -> dict[str, Any]:
    """The live stream config in the form of StreamSpec's dump."""
    return {
        "subjects": list(config.subjects or []),
        "retention": _value(config.retention),
        "storage": _value(config.storage),
        "max_age": round(config.max_age or 0),
        "max_bytes": config.max_bytes,
        "max_msgs": config.max_msgs,
        "replicas": config.num_replicas,
    }


#: What devstack leaves at the server's defaults on a stream. Set outside Pulumi, they change what the stream
#: keeps (one message per subject), takes (a sealed stream nothing; a full one with discard new, no more) or
#: lets clients and devstack do (deny purge). The next update puts them back, but those in IRREVERSIBLE.
STREAM_LAYOUT: dict[str, Any] = {
    "discard": "old", "max_msgs_per_subject": -1, "max_msg_size": -1, "max_consumers": -1, "allow_rollup_hdrs": False,
    "no_ack": False, "sealed": False, "deny_delete": False, "deny_purge": False,
    # Defaults the server gives the stream's consumers: an inactive threshold deletes idle durable ones,
    # a max ack pending below the consumers' own makes their creates fail.
    "consumer_limits": None,
}
#: A kv bucket's stream as nats clients make it and expect it (purging a key rolls it up); the history
#: param is its max_msgs_per_subject.
KV_LAYOUT: dict[str, Any] = {
    "discard": "new", "max_msg_size": -1, "max_consumers": -1, "allow_rollup_hdrs": True, "allow_direct": True,
    "no_ack": False, "sealed": False, "deny_delete": True, "deny_purge": False, "consumer_limits": None,
}
#: What devstack leaves at the server's defaults on a consumer. Set outside Pulumi, they stall it (one
#: message in flight), strip its messages to their headers, delete it when idle, or delay redeliveries.
CONSUMER_LAYOUT: dict[str, Any] = {
    "max_ack_pending": 1000, "headers_only": False, "inactive_threshold": None, "backoff": None, "sample_freq": None,
}
#: What the server never lets an update take back once set.
IRREVERSIBLE = ("sealed", "deny_delete", "deny_purge")


def off_layout(config: StreamConfig, layout: Mapping[str, Any]) -> list[str]:
    """The settings of `layout` the live config does not have (the server leaves a false one out)."""
    def live(name: str) -> Any:
        value = _value(getattr(config, name))
        if is_dataclass(value) and not any(asdict(value).values()):
            value = None  # the server answers {} for limits none of which is set
        return False if value is None and isinstance(layout[name], bool) else value

    return [name for name, value in layout.items() if live(name) != value]


def layout_fields(layout: Mapping[str, Any]) -> dict[str, Any]:
    """`layout` as StreamConfig fields."""
    return {**layout, "discard": jetstream_api.DiscardPolicy(layout["discard"])}


def refuse_irreversible(config: StreamConfig, layout: Mapping[str, Any], verb: str, what: str) -> None:
    """Refuse what was set outside Pulumi and NATS cannot undo in place: a mirror (it cannot turn back into
    a plain stream), or one of IRREVERSIBLE."""
    if config.mirror:
        raise Unsupported(verb, what, f"it mirrors stream {config.mirror.name!r} (set outside Pulumi), which NATS "
                          "cannot undo in place", "delete it with purge and create it again")
    stuck = [name for name in IRREVERSIBLE if getattr(config, name) and not layout[name]]
    if stuck:
        raise Unsupported(verb, what, f"it is set {' and '.join(stuck)} (outside Pulumi), which NATS cannot undo",
                          "delete it with purge and create it again")


def stream_in_sync(config: StreamConfig) -> bool:
    """Whether the stream moves nothing across projects and keeps devstack's layout."""
    return not (reaching_out(config) or off_layout(config, STREAM_LAYOUT))


def reaching_out(config: StreamConfig) -> list[str]:
    """Settings devstack never makes that move messages across the project's subjects: copying another
    stream in (mirror, sources) or publishing out (republish, subject_transform)."""
    return [name for name in ("mirror", "sources", "republish", "subject_transform") if getattr(config, name)]


class Stream(NatsKind):
    """A JetStream stream on the owner's subjects, marked with the owner in its metadata.

    `read` reports in `configInSync` whether the stream is free of `reaching_out`
    settings; one made outside Pulumi is drift, and the next update removes it
    (a mirror it cannot: that update fails saying so).
    """

    kind = "stream"
    after_kinds = ("account",)
    Spec = StreamSpec
    # The server refuses storage changes and retention changes to/from workqueue
    # (limits <-> interest it allows since 2.10, but one rule is simpler to reason about).
    create_only = frozenset({"retention", "storage"})
    # More than one replica on a single server; subjects another stream on the server holds.
    refusable_in_place = frozenset({"replicas", "subjects"})
    attributes = ("host", "port", "stream", "subjects")
    name_attribute = "stream"

    @classmethod
    def normalized_params(cls, params: dict[str, Any] | None, name: str, owner: str) -> dict[str, Any]:
        normalized = super().normalized_params(params, name, owner)
        if normalized.get("subjects") is None and name and owner:
            normalized["subjects"] = default_subjects(name, owner)
        return normalized

    def check_params(self, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        subjects = params["subjects"]
        failures = subjects_failures("params.subjects", subjects, owner)
        # The server refuses a stream whose own subjects overlap (a repeat, or one inside a wildcard).
        failures += [CheckFailure("params.subjects", f"{a!r} and {b!r} overlap: list each subject once")
                     for i, a in enumerate(subjects) for b in subjects[i + 1:] if subjects_overlap(a, b)]
        return failures

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        mine = cls.normalized_params(params, name, owner)["subjects"]
        theirs = cls.normalized_params(other_params, other, owner)["subjects"]
        for subject, taken in ((s, t) for s in mine for t in theirs if subjects_overlap(s, t)):
            return ("params.subjects",
                    f"{subject!r} overlaps {taken!r} of stream {other!r}, and NATS refuses two streams on one "
                    f"subject (give each stream its own subjects; the project's default stream takes all of "
                    f"{owner_subjects(owner)!r} unless its params.subjects say otherwise)")
        return None

    def defaults(self, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        # Left out, a named stream's subjects are its name's (`<owner>.<name>.>`), which no other named
        # stream's overlap: the engine is asked only about subjects a declaration sets, so most stream
        # creates call no engine at check.
        return {**super().defaults(params, name, owner), "subjects": default_subjects(name, owner)}

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        """The base's, and subjects that live streams other than this one hold. Validation sees only
        declared streams; a renamed one's old stream (Pulumi makes the new one before it deletes the
        old) or a removed, retained one still holds its subjects, and the server would refuse the create
        part-way through the up."""
        assert isinstance(spec, StreamSpec)
        subjects = spec.subjects or []
        # Check knows no naming (an existing stream keeps it in its outputs): either one may name this stream.
        names = set()
        for naming in (PREFIXED, CURRENT_NAMING):
            with suppress(InvalidSpec):
                names.add(self.engine_name(ident.name, ident.owner, naming=naming))
        others = observed(instance, ident.owner, lambda s: _other_streams(s.js, names, ident.owner)) or []
        return super().refusals(instance, ident, spec) + [
            ("subjects", f"{subject!r} overlaps {held!r} of stream {other} on the server, and NATS refuses two "
                         f"streams on one subject",
             f"free it first: remove it from stream {other}, or purge that stream (a rename keeps the old "
             f"stream until the end of the up: set `purge: true` on the old declaration and remove it in "
             f"one up, add the new one in the next), or give this stream other subjects")
            for other, held_subjects in others for subject in subjects for held in held_subjects
            if subjects_overlap(subject, held)
        ]

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        info = observed(instance, ident.owner, lambda s: stream_info(s.js, name))
        if info is None:
            return None
        params = stream_params(info.config)
        return Observed(
            owner=metadata_owner(info.config.metadata),
            workspace=metadata_workspace(info.config.metadata),
            params=params,
            attributes={"stream": name, "subjects": ",".join(params["subjects"]),
                        "configInSync": stream_in_sync(info.config)},
        )

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, StreamSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create")

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = StreamSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update")

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"stream {ident}"
        with api_errors("drop", what):
            in_account(instance, ident.owner, lambda s: delete_owned_stream(s.js, name, ident, what), what)

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str,
                verb: str) -> dict[str, Any]:
        """Create the stream, or bring an existing one of ours to `spec`; a no-op when it already matches."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        subjects = spec.subjects or default_subjects(ident.name, ident.owner)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> StreamInfo:
            info = await stream_info(session.js, name)
            live = info.config if info else jetstream_api.StreamConfig(
                name=name, retention=jetstream_api.RetentionPolicy(spec.retention),
                storage=jetstream_api.StorageType(spec.storage),
                discard=jetstream_api.DiscardPolicy.OLD,
            )
            refuse_irreversible(live, STREAM_LAYOUT, verb, f"stream {ident}")
            wanted = live.evolve(
                subjects=subjects, max_age=float(spec.max_age), max_bytes=spec.max_bytes, max_msgs=spec.max_msgs,
                num_replicas=spec.replicas, duplicate_window=duplicate_window(spec.max_age),
                metadata=with_marker(live.metadata, marker),
                sources=None, republish=None, subject_transform=None, **layout_fields(STREAM_LAYOUT),
            )
            if info is None:
                return await add_stream(session.js, wanted)
            if stream_params(wanted) == stream_params(live) and wanted.metadata == live.metadata \
                    and stream_in_sync(live):
                return info  # already converged: change nothing
            return await session.js.update_stream(wanted)

        with api_errors(verb, f"stream {ident}"):
            info = run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "stream": name, "subjects": ",".join(info.config.subjects or []),
                "configInSync": stream_in_sync(info.config)}


class ConsumerSpec(BaseModel):
    """Params of a durable pull `consumer` bound to one of the project's streams."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The `name` of a stream declaration of the same project.
    stream: str = Field(min_length=1)
    filter_subject: str | None = Field(default=None, alias="filterSubject")
    deliver_policy: Literal["all", "last", "new", "last_per_subject"] = Field(default="all", alias="deliverPolicy")
    ack_policy: Literal["explicit", "all", "none"] = Field(default="explicit", alias="ackPolicy")
    ack_wait: int = Field(default=30, ge=1, le=MAX_SECONDS, alias="ackWait", description="seconds")
    max_deliver: int = Field(default=-1, ge=-1, alias="maxDeliver", description="-1 or 0 = unlimited")
    description: str = ""

    @field_validator("max_deliver")
    @classmethod
    def _unlimited_as_stored(cls, value: int) -> int:
        # The server stores 0 (unlimited) as -1: declared as 0, every refresh would find drift.
        return -1 if value == 0 else value

    @field_validator("description")
    @classmethod
    def _server_limit(cls, value: str) -> str:
        if len(value.encode()) > 4096:
            raise ValueError("is at most 4096 bytes (the server's limit)")
        return value


def consumer_params(config: ConsumerConfig, stream_decl: str) -> dict[str, Any]:
    """The live consumer config in the form of ConsumerSpec's dump."""
    return {
        "stream": stream_decl,
        "filter_subject": config.filter_subject or None,
        "deliver_policy": _value(config.deliver_policy),
        "ack_policy": _value(config.ack_policy),
        "ack_wait": round(config.ack_wait or 0),
        "max_deliver": config.max_deliver,
        "description": config.description or "",
    }


def stream_declaration(stream: str, owner: str) -> str:
    """Invert nats_name for a stream of `owner`: the declaration name it came from."""
    return owner if stream == owner else stream.removeprefix(f"{owner}_")


async def all_streams(js: JetStreamContext) -> list[StreamInfo]:
    """Every stream on the server, page after page."""
    found: list[StreamInfo] = []
    while page := await js.streams_info(len(found)):
        found += page
    return found


async def owner_streams(js: JetStreamContext, owner: str) -> list[StreamInfo]:
    """The streams whose metadata names `owner` (explicitly named ones are in no namespace of its own)."""
    return [info for info in await all_streams(js) if metadata_owner(info.config.metadata) == owner]


async def _other_streams(js: JetStreamContext, names: set[str], owner: str) -> list[tuple[str, list[str]]]:
    """Every stream on the server but `owner`'s called one of `names`, with its subjects."""
    return [(info.config.name or "", list(info.config.subjects or [])) for info in await all_streams(js)
            if not (info.config.name in names and metadata_owner(info.config.metadata) == owner)]


async def find_consumer(js: JetStreamContext, owner: str, name: str) -> tuple[StreamInfo, ConsumerInfo] | None:
    """The consumer `name` in one of the owner's streams, with that stream; None when there is none."""
    for info in await owner_streams(js, owner):
        try:
            return info, await js.consumer_info(info.config.name or "", name)
        except jetstream_errors.NotFoundError:
            continue
    return None


class Consumer(NatsKind):
    """A durable pull consumer on one of the owner's streams, filter inside that stream's subjects.

    What the server (2.15, checked) allows in place: description, max deliver,
    ack wait and filter subject (2.10+). Deliver policy and ack policy it
    refuses ("can not be updated"), so they replace; the durable name is the
    identity and the stream is what the consumer lives in: both replace.
    The server does not check that the filter lies inside the stream's
    subjects; this provider does, against the live stream. `read` reports in
    `configInSync` whether CONSUMER_LAYOUT still holds; the next update puts it back.
    """

    kind = "consumer"
    after_kinds = ("account",)
    Spec = ConsumerSpec
    create_only = frozenset({"stream", "deliver_policy", "ack_policy"})
    attributes = ("host", "port", "stream", "consumer")
    references: ClassVar[dict[str, str]] = {"stream": "stream"}

    def check_params(self, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        failures = []
        try:
            Stream.engine_name(params["stream"], owner, naming=CURRENT_NAMING)
        except InvalidSpec as err:
            failures.append(CheckFailure("params.stream", str(err)))
        if params.get("filter_subject") is not None:
            failures += subjects_failures("params.filterSubject", [params["filter_subject"]], owner)
        elif params.get("deliver_policy") == "last_per_subject":
            failures.append(CheckFailure("params.filterSubject", "is required with deliverPolicy: last_per_subject "
                                                                 "(the server refuses it without a filter)"))
        return failures

    @classmethod
    def misfit(cls, param: str, params: dict[str, Any], target: str, target_params: dict[str, Any],
               owner: str) -> tuple[str, str] | None:
        # The provider checks the filter against the live stream only when the consumer itself changes:
        # a stream narrowed later would leave it filtering on subjects the stream no longer takes.
        if param != "stream":
            return None
        try:
            spec = ConsumerSpec.model_validate(params)
            stream = Stream.normalized_params(target_params, target, owner)
        except ValidationError:
            return None  # a problem of the declarations themselves, reported on them
        filter_subject, subjects = spec.filter_subject, stream["subjects"]
        if stream["retention"] == "workqueue" and spec.ack_policy != "explicit":
            # The server refuses it: a work queue removes a message once it is acknowledged.
            return ("params.ackPolicy", f"must be explicit on stream {target!r}, whose retention is workqueue")
        if not filters_inside(filter_subject, [owner_subjects(owner)]):
            return None  # outside the project's subjects: check's tenant rule says so
        if filters_inside(filter_subject, subjects):
            return None
        return ("params.filterSubject",
                f"{filter_subject!r} is outside the subjects of stream {target!r} ({', '.join(subjects)}), so the "
                f"consumer would get nothing (filter inside them, or add it to the stream's params.subjects)")

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        # A work queue hands each message to one consumer, so the server refuses a second consumer
        # whose filter overlaps the first's (no filter overlaps every filter).
        stream_decl = params.get("stream")
        if stream_decl != other_params.get("stream") or ("stream", stream_decl) not in declared:
            return None
        try:
            stream = Stream.normalized_params(declared[("stream", stream_decl)], stream_decl, owner)
            mine = ConsumerSpec.model_validate(params).filter_subject
            theirs = ConsumerSpec.model_validate(other_params).filter_subject
        except ValidationError:
            return None  # a problem of the declarations themselves, reported on them
        if stream["retention"] != "workqueue" or (mine and theirs and not subjects_overlap(mine, theirs)):
            return None
        return ("params.filterSubject",
                f"{'unset' if mine is None else repr(mine)} overlaps the filter of consumer {other!r} "
                f"({'unset' if theirs is None else repr(theirs)}) on stream {stream_decl!r}, whose retention is "
                f"workqueue: NATS gives each of its subjects to one consumer (give each consumer a filter of "
                f"its own subjects)")

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        found = observed(instance, ident.owner, lambda s: find_consumer(s.js, ident.owner, name))
        if found is None:
            return None
        stream, info = found
        stream_name = stream.config.name or ""
        return Observed(
            owner=metadata_owner(info.config.metadata),
            workspace=metadata_workspace(info.config.metadata),
            params=consumer_params(info.config, stream_declaration(stream_name, ident.owner)),
            attributes={"stream": stream_name, "consumer": name,
                        "configInSync": not off_layout(info.config, CONSUMER_LAYOUT)},
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        # Its stream's declaration is read back from the stream's name, which only owner-prefixed naming
        # can invert: on the stream it was made on, the declared one stands.
        if result.id and result.outs.get("stream") == props.get("stream") and (props.get("params") or {}).get("stream"):
            result.outs["params"] = {**result.outs["params"], "stream": props["params"]["stream"]}
        return result

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, ConsumerSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create", referenced_name(props, "stream"))

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = ConsumerSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update",
                            referenced_name(new, "stream") or old.get("stream"))

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)

        async def work(session: Session) -> None:
            found = await find_consumer(session.js, ident.owner, name)
            if found is None:
                raise NotFound("drop", f"consumer {ident}", "it does not exist")
            if metadata_owner(found[1].config.metadata) != ident.owner:
                raise Conflict("drop", f"consumer {ident}", "it carries no marker of this project",
                               "nothing was dropped; remove it from the state with `pulumi state delete`")
            await session.js.delete_consumer(found[0].config.name or "", name)

        with api_errors("drop", f"consumer {ident}"):
            in_account(instance, ident.owner, work, f"consumer {ident}")

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: ConsumerSpec, stack: str,
                verb: str, stream: str | None) -> dict[str, Any]:
        """Create the consumer, or converge an existing one of ours; a no-op when it already matches."""
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"consumer {ident}"
        # The stream as its resource records it (`stream`), else as this consumer's naming maps it.
        stream = stream or Stream.engine_name(spec.stream, ident.owner, naming=ident.naming)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> None:
            info = await self._bound_stream(session.js, ident, spec, stream, verb)
            existing = await find_consumer(session.js, ident.owner, name)
            live = existing[1].config if existing else None
            if existing is not None:
                self._require_changeable(existing, ident, spec, session.version)
            wanted = self._config(name, spec, with_marker(live.metadata if live else None, marker))
            if live is not None and consumer_params(wanted, spec.stream) == consumer_params(live, spec.stream) \
                    and wanted.metadata == live.metadata and not off_layout(live, CONSUMER_LAYOUT):
                return  # already converged: change nothing
            # Same name and stream: the server treats this as an update of the durable consumer.
            await session.js.add_consumer(info.config.name or stream, wanted)

        with api_errors(verb, what):
            run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "stream": stream, "consumer": name, "configInSync": True}

    def _require_changeable(self, existing: tuple[StreamInfo, ConsumerInfo], ident: Identity, spec: ConsumerSpec,
                            version: tuple[int, int]) -> None:
        """Refuse what the server cannot change in place, naming the field and its live value."""
        what = f"consumer {ident}"
        stream, info = existing
        live = consumer_params(info.config, stream_declaration(stream.config.name or "", ident.owner))
        if live["filter_subject"] != spec.filter_subject and not FEATURES["consumer_filter_update"](version):
            raise Unsupported("update", what, "this server cannot change a consumer's filter subject",
                              "use nats-server 2.10+, or delete the consumer with purge and re-create it")

    @staticmethod
    async def _bound_stream(js: JetStreamContext, ident: Identity, spec: ConsumerSpec, stream: str,
                            verb: str) -> StreamInfo:
        """The owner's stream the consumer binds to, with the filter checked against its subjects."""
        what = f"consumer {ident}"
        info = await stream_info(js, stream)
        if info is None:
            raise NotFound(verb, what, f"its stream {spec.stream!r} ({stream}) does not exist",
                           "declare that stream in the same project")
        if metadata_owner(info.config.metadata) != ident.owner:
            raise Conflict(verb, what, f"stream {stream!r} does not belong to project {ident.owner!r}",
                           "bind the consumer to a stream the project declares")
        if off_layout(info.config, {"consumer_limits": None}):
            raise Unsupported(verb, what, f"stream {stream!r} has consumer limits set outside devstack "
                           f"({info.config.consumer_limits}), which would override or refuse the consumer's settings",
                           "`pulumi refresh` then `pulumi up`: the stream's update takes them off first")
        subjects = info.config.subjects or []
        if not filters_inside(spec.filter_subject, subjects):
            raise InvalidSpec(verb, what, f"params.filterSubject {spec.filter_subject!r} is outside the subjects "
                              f"of stream {stream!r} ({', '.join(subjects)})", "filter on one of the stream's subjects")
        return info

    @staticmethod
    def _config(name: str, spec: ConsumerSpec, metadata: dict[str, str]) -> ConsumerConfig:
        return jetstream_api.ConsumerConfig(
            name=name, durable_name=name, description=spec.description or None,
            deliver_policy=jetstream_api.DeliverPolicy(spec.deliver_policy),
            ack_policy=jetstream_api.AckPolicy(spec.ack_policy),
            ack_wait=float(spec.ack_wait), max_deliver=spec.max_deliver,
            filter_subject=spec.filter_subject, metadata=metadata, **CONSUMER_LAYOUT,
        )


class KvSpec(BaseModel):
    """Params of a `kv` bucket. Storage is fixed at creation; the server updates the rest in place (2.15, checked)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    history: int = Field(default=1, ge=1, le=64, description="values kept per key")
    ttl: int = Field(default=0, ge=0, le=MAX_SECONDS, description="seconds a value lives; 0 = forever")
    max_bytes: int = Field(default=-1, ge=-1, alias="maxBytes", description="-1 = unlimited")
    storage: Literal["file", "memory"] = "file"
    replicas: int = Field(default=1, ge=1, le=5)


def kv_params(config: StreamConfig) -> dict[str, Any]:
    """The live KV stream config in the form of KvSpec's dump."""
    return {
        "history": config.max_msgs_per_subject,
        "ttl": round(config.max_age or 0),
        "max_bytes": config.max_bytes,
        "storage": _value(config.storage),
        "replicas": config.num_replicas,
    }


def kv_in_sync(config: StreamConfig, bucket: str) -> bool:
    """Whether the KV stream takes its own keys' subjects alone and moves nothing across projects: an
    extra subject would take in another project's messages, `reaching_out` settings copy or publish them."""
    return list(config.subjects or []) == [kv_subject(bucket)] and not (reaching_out(config) or off_layout(config, KV_LAYOUT))


def kv_subject(bucket: str) -> str:
    return f"$KV.{bucket}.>"


class Kv(NatsKind):
    """A KV bucket: the stream `KV_<bucket>` laid out as nats clients expect, marked in its metadata.

    `read` reports in `configInSync` whether the stream still takes only its keys' subjects and is free
    of `reaching_out` settings, as for a stream; the next update puts it back (a mirror it cannot).
    """

    kind = "kv"
    after_kinds = ("account",)
    Spec = KvSpec
    create_only = frozenset({"storage"})
    refusable_in_place = frozenset({"replicas"})
    attributes = ("host", "port", "bucket")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        limit = MAX_NAME - len(KV_STREAM_PREFIX)
        if naming == PREFIXED:
            return nats_name(name, owner, limit=limit)
        return naming_rules.nats(name, limit=limit)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        bucket = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        info = observed(instance, ident.owner, lambda s: stream_info(s.js, KV_STREAM_PREFIX + bucket))
        if info is None:
            return None
        return Observed(owner=metadata_owner(info.config.metadata), workspace=metadata_workspace(info.config.metadata),
                        params=kv_params(info.config),
                        attributes={"bucket": bucket, "configInSync": kv_in_sync(info.config, bucket)})

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, KvSpec)
        return self._ensure(instance, ident, spec, props.get("stack", ""), "create")

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        spec = KvSpec.model_validate(new.get("params") or {})
        return self._ensure(instance, ident, spec, new.get("stack", ""), "update")

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        stream, what = KV_STREAM_PREFIX + self.engine_name(ident.name, ident.owner, naming=ident.naming), f"kv {ident}"
        with api_errors("drop", what):
            in_account(instance, ident.owner, lambda s: delete_owned_stream(s.js, stream, ident, what), what)

    def _ensure(self, instance: SharedInstance, ident: Identity, spec: KvSpec, stack: str,
                verb: str) -> dict[str, Any]:
        bucket = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        marker = marker_metadata(ident, stack)

        async def work(session: Session) -> None:
            info = await stream_info(session.js, KV_STREAM_PREFIX + bucket)
            live = info.config if info else self._new_config(bucket, spec)
            refuse_irreversible(live, KV_LAYOUT, verb, f"kv {ident}")
            wanted = live.evolve(
                max_msgs_per_subject=spec.history, max_age=float(spec.ttl), max_bytes=spec.max_bytes,
                num_replicas=spec.replicas, duplicate_window=duplicate_window(spec.ttl),
                metadata=with_marker(live.metadata, marker),
                subjects=[kv_subject(bucket)], sources=None, republish=None, subject_transform=None,
                **layout_fields(KV_LAYOUT),
            )
            if info is None:
                await add_stream(session.js, wanted)
            elif kv_params(wanted) != kv_params(live) or wanted.metadata != live.metadata \
                    or not kv_in_sync(live, bucket):
                await session.js.update_stream(wanted)

        with api_errors(verb, f"kv {ident}"):
            run(instance, work, ident.owner, stack=stack)
        return {**self._base_attributes(instance), "bucket": bucket, "configInSync": True}

    @staticmethod
    def _new_config(bucket: str, spec: KvSpec) -> StreamConfig:
        """The KV stream layout nats clients (nats.go, nats-py) create and expect."""
        return jetstream_api.StreamConfig(
            name=KV_STREAM_PREFIX + bucket, subjects=[kv_subject(bucket)],
            storage=jetstream_api.StorageType(spec.storage), max_msgs=-1, **layout_fields(KV_LAYOUT),
        )


class Account(NatsKind):
    """The project's own NATS account: its streams, consumers, kv buckets and users live in it, and no
    other project's credential reaches into it (the server keeps accounts apart).

    One per project and instance, named after the project; the program adds it when the project declares
    anything on a NATS instance, and a declaration of its own sets its limits. Its JWT, signed by the
    operator key the stack's admin secret gives, carries the ownership marker in its description and the
    revocations of the project's dropped users; a purge drops everything in it and deletes it.
    """

    kind = "account"
    implied = True
    Spec = AccountSpec
    attributes = ("host", "port", "account")

    def check_params(self, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        if name != owner:
            return [CheckFailure("name", f"{name!r} is not the project's name: a project has one account per NATS "
                                         f"instance, called after it (leave `name` out)")]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        account = account_key(instance, ident.owner)
        claims = run(instance, lambda system: account_claims(system.nc, account))
        if claims is None:
            return None
        marker = account_description(claims)
        return Observed(owner=marker_owner(marker), workspace=marker_field(marker, "stack"),
                        params=account_params(claims), attributes={"account": account})

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, AccountSpec)
        return self._push(instance, ident, spec, props.get("stack", ""))

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return self._push(instance, ident, AccountSpec.model_validate(new.get("params") or {}), new.get("stack", ""))

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        what, operator = f"account {ident}", operator_of(instance)
        account = nats_auth.public(operator.account_key(ident.owner))

        async def empty(session: Session) -> None:
            streams = await all_streams(session.js)
            foreign = [info.config.name for info in streams if metadata_owner(info.config.metadata) != ident.owner]
            if foreign:
                raise Conflict("drop", what, f"it holds streams that carry no marker of this project: "
                               f"{', '.join(map(repr, foreign))}",
                               "nothing was dropped; move or delete those first, or remove the account from the "
                               "state with `pulumi state delete`")
            for info in streams:
                await session.js.delete_stream(info.config.name or "")

        async def delete(system: Session) -> None:
            claims = await account_claims(system.nc, account)
            if claims is None:
                raise NotFound("drop", what, "the server has no account of the project")
            if marker_owner(account_description(claims)) != ident.owner:
                raise Conflict("drop", what, "its JWT carries no marker of this project",
                               "nothing was dropped; remove it from the state with `pulumi state delete`")
            await _claims_request(system.nc, "$SYS.REQ.CLAIMS.DELETE", operator.deletion_jwt([account]), what)
            await _SESSIONS.forget(instance, ident.owner)

        with api_errors("drop", what):
            observed(instance, ident.owner, empty)  # its data goes with it; the server keeps files of deleted accounts
            run(instance, delete)

    def _push(self, instance: SharedInstance, ident: Identity, spec: AccountSpec, stack: str) -> dict[str, Any]:
        """Sign and push the account JWT with `spec`'s limits, keeping the users it has revoked."""
        operator = operator_of(instance)
        account = nats_auth.public(operator.account_key(ident.owner))

        async def work(system: Session) -> None:
            async with _SESSIONS.account_lock(instance, ident.owner):
                live = await account_claims(system.nc, account)
                if live is not None and account_params(live) == spec.model_dump() \
                        and account_description(live) == account_marker(ident.owner, stack):
                    return  # already converged: change nothing
                if live is None:
                    await push_new_account(system, instance, ident.owner,
                                           lambda: account_jwt(operator, ident.owner, stack, spec))
                else:
                    await push_account(system.nc, account_jwt(operator, ident.owner, stack, spec, revocations_of(live)),
                                       ident.owner)

        run(instance, work)
        return {**self._base_attributes(instance), "account": account}


class UserSpec(BaseModel):
    """Params of a NATS `user` of the project's account."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Change it to give the user a new key in place (the old one is revoked).
    rotation: Rotation = None


def user_permissions(owner: str) -> dict[str, Any]:
    """What a project's user may do in its account: publish and subscribe on the project's subjects and
    its kv buckets, use its streams and consumers, but not make, change or delete streams (devstack
    does, from the declarations)."""
    own = owner_subjects(owner)
    return {
        "pub": {"allow": [own, "$KV.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>"],
                "deny": ["$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>"]},
        "sub": {"allow": [own, "$KV.>", "_INBOX.>"]},
    }


def user_seed(ident: Identity, name: str, new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str:
    """The user's nkey seed: kept across updates while the policy and rotation stay; else derived from the
    project's predictable password (predictable) or drawn anew (generated)."""
    rotation = rotation_of((new.get("params") or {}).get("rotation"))
    if old and old.get("seed") and old.get("credentials") == new.get("credentials") \
            and (old.get("params") or {}).get("rotation") == rotation:
        return str(old["seed"])
    if new.get("credentials", "predictable") == "predictable":
        raw = hashlib.sha256(f"nats-user/{name}/{predictable_password(ident.owner, rotation)}".encode()).digest()
        return nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER).decode()
    return nats_auth.seed(nats_auth.random_key(nkeys.PREFIX_BYTE_USER))


class User(NatsKind):
    """A user of the project's account, for services: its JWT (signed by the account key) and nkey seed.

    The server stores no users: it checks each connection's JWT against the account. So the user exists
    while its account does and has not revoked its key; `read` connects with the stored credential to
    tell (`loginInSync`), and a drop or a new rotation revokes the key in the account's JWT.
    """

    kind = "user"
    after_kinds = ("account",)
    listed = False
    Spec = UserSpec
    logins = True
    attributes = ("host", "port", "account", "user", "jwt", "seed")
    secret_outputs = ("jwt", "seed")

    @classmethod
    def engine_object(cls, host: str, port: int, name: str, owner: str, *,
                      naming: int = CURRENT_NAMING) -> tuple[str, str, int, str, str]:
        # Users live in their project's account: two projects' users of one name never meet.
        return cls.object_named(host, port, f"{naming_rules.nats(owner)}/{cls.engine_name(name, owner, naming=naming)}")

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        return Account().observe(instance, ident)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if result.id and props.get("jwt") and props.get("seed"):
            result.outs["loginInSync"] = self._logs_in(self._instances[str(props["instance"])],
                                                       str(props["jwt"]), str(props["seed"]))
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["loginInSync"] if olds.get("loginInSync") is False else []

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        return self._issue(instance, ident, props, None)

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return self._issue(instance, ident, new, old)

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        if props.get("user"):
            self._revise(instance, ident, str(props.get("stack", "")), revoke=str(props["user"]))

    def _issue(self, instance: SharedInstance, ident: Identity, new: Mapping[str, Any],
               old: Mapping[str, Any] | None) -> dict[str, Any]:
        """Sign the user's JWT; revoke the key it replaces, make sure its own is not revoked."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        key = nkeys.from_seed(user_seed(ident, name, new, old).encode())
        replaced = str(old["user"]) if old and old.get("user") and old["user"] != nats_auth.public(key) else None
        self._revise(instance, ident, str(new.get("stack", "")), revoke=replaced, keep=nats_auth.public(key))
        account = operator_of(instance).account_key(ident.owner)
        return {**self._base_attributes(instance), "account": nats_auth.public(account),
                "user": nats_auth.public(key), "seed": nats_auth.seed(key), "loginInSync": True,
                "jwt": nats_auth.user_jwt(account, key, name, user_permissions(ident.owner))}

    def _revise(self, instance: SharedInstance, ident: Identity, stack: str, *, revoke: str | None = None,
                keep: str | None = None) -> None:
        """Revoke user key `revoke` and lift a revocation of `keep` in the account's JWT, making the account
        if it is missing (a user declared before any account); nothing when that changes nothing."""
        operator = operator_of(instance)
        account = nats_auth.public(operator.account_key(ident.owner))

        async def work(system: Session) -> None:
            async with _SESSIONS.account_lock(instance, ident.owner):
                live = await account_claims(system.nc, account)
                if live is None and revoke and not keep:
                    return  # no account: no key of it works anyway
                revocations = revocations_of(live)
                changed = live is None or (keep in revocations) or (revoke and revoke not in revocations)
                if not changed:
                    return
                revocations.pop(keep or "", None)
                if revoke:
                    revocations[revoke] = int(time.time())
                if live is None:  # a user declared before any account: the account, with default limits
                    await push_new_account(system, instance, ident.owner,
                                           lambda: account_jwt(operator, ident.owner, stack))
                    return
                await push_account(system.nc, account_jwt(
                    operator, ident.owner, stack, AccountSpec.model_validate(account_params(live)), revocations,
                    marker=account_description(live)), ident.owner)

        run(instance, work)

    def _logs_in(self, instance: SharedInstance, token: str, seed: str) -> bool:
        """Whether the server takes the stored credential now (revoked, or its account gone: it does not)."""
        key = nkeys.from_seed(seed.encode())

        async def attempt() -> bool:
            try:
                client = await nats.connect(servers=[f"nats://{instance.address}"], user_jwt_cb=lambda: token.encode(),
                                            signature_cb=nats_auth.signer(key), allow_reconnect=False,
                                            max_reconnect_attempts=1, connect_timeout=CONNECT_TIMEOUT)
            except nats_errors.Error:
                return False
            await client.close()
            return True

        return run_private(attempt())


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"account": Account, "stream": Stream, "consumer": Consumer, "kv": Kv,
                                        "user": User}
