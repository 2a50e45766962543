"""Locks on a stack: waiting for another run's Pulumi lock, and the checkout's lock a verb holds.

A verb that changes the ledger waits for the stack's lock a bounded time,
saying whose lock it waits on; a killed run's lock is refused at once
(`devstack recover` frees it), and so are the operations a killed run left
pending in the state. The lock is read where the backend keeps it: a file
backend's lock files, the postgres:// backend's rows of its state table, the
s3:// backend's lock objects; other backends' locks (gs://, azblob://, ...)
cannot be seen from here.
"""

from __future__ import annotations

import base64
import fcntl
import getpass
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pulumi import automation as auto

from devstack.errors import DevstackError, EngineError, InvalidQuery
from devstack.stack import file_backend_root, hide_passwords, short_name
from devstack.state import export_deployment
from providers.identity import Identity

#: How long a verb waits for another run's lock on the stack, in seconds, unless --lock-wait or
#: $DEVSTACK_LOCK_WAIT says otherwise: long enough for an `up` of the examples, short enough to notice.
DEFAULT_LOCK_WAIT = 300.0


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LockWait:
    """How a verb meets a stack another run has locked: it waits at most `seconds`, telling `say` whose
    lock it waits on (once per holder)."""

    seconds: float = DEFAULT_LOCK_WAIT
    say: Callable[[str], None] = _stderr

    @classmethod
    def default(cls, say: Callable[[str], None] = _stderr) -> LockWait:
        """The wait $DEVSTACK_LOCK_WAIT sets (seconds), else DEFAULT_LOCK_WAIT."""
        raw = os.environ.get("DEVSTACK_LOCK_WAIT", "")
        try:
            return cls(max(0.0, float(raw)) if raw.strip() else DEFAULT_LOCK_WAIT, say)
        except ValueError:
            raise InvalidQuery("read", f"DEVSTACK_LOCK_WAIT={raw!r}", "not a number of seconds",
                               "set it to e.g. 300, or unset it") from None


# --- the stack's Pulumi locks, as each backend keeps them ---------------------------------------


@dataclass(frozen=True)
class HeldLock:
    """One Pulumi lock on a stack: where the backend keeps it (a file, a row's key) and who took it, as the
    CLI writes it (`{"pid", "username", "hostname", "timestamp"}`); pid None when that cannot be read."""

    where: str
    pid: int | None = None
    username: str | None = None
    hostname: str | None = None
    timestamp: str | None = None

    @classmethod
    def parse(cls, where: str, content: bytes | str) -> HeldLock:
        try:
            held = json.loads(content)
            return cls(where, int(held["pid"]), held.get("username"), held.get("hostname"), held.get("timestamp"))
        except (ValueError, KeyError, TypeError, AttributeError):  # not Pulumi's
            return cls(where)

    @property
    def holder(self) -> str:
        """`pid P of user@host, since T`: whose lock it is, for a message."""
        if self.pid is None:
            return f"the run of lock {self.where}"
        return f"pid {self.pid} of {self.username}@{self.hostname}, since {self.timestamp}"

    @property
    def this_machines(self) -> bool:
        return self.pid is not None and self.hostname == socket.gethostname()

    @property
    def elsewhere(self) -> bool:
        """Taken on another machine, where whether its run still runs cannot be seen from here."""
        return self.pid is not None and self.hostname != socket.gethostname()

    @property
    def running_here(self) -> bool:
        """Taken on this machine by a pulumi process still running."""
        return self.this_machines and _runs_pulumi(self.pid or 0)

    @property
    def killed(self) -> bool:
        """Taken on this machine by a process that no longer runs pulumi: it never goes away by itself.
        Another machine's lock is never taken for killed: its process cannot be seen from here."""
        return self.this_machines and not _runs_pulumi(self.pid or 0)


def _runs_pulumi(pid: int) -> bool:
    try:  # a pid reused by another program since the holder was killed is not the holder
        return b"pulumi" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def locks_visible(backend_url: str) -> bool:
    """Whether this module reads the locks of that backend (file://, postgres:// and s3://)."""
    return backend_url.startswith(("file://", "s3://")) or _is_postgres(backend_url)


def backend_locks(env: Mapping[str, str], work_dir: Path, project: str, short: str) -> list[HeldLock]:
    """The locks on stack `short` of `project` in the backend `env` names (PULUMI_BACKEND_URL); none on a
    backend whose locks cannot be seen (locks_visible)."""
    url = env.get("PULUMI_BACKEND_URL", "")
    root = file_backend_root(url, work_dir)
    if root is not None:
        return [lock for path in lock_files(root, project, short) if (lock := _lock_file(path)) is not None]
    if _is_postgres(url):
        return postgres_locks(url, env, project, short)
    if url.startswith("s3://"):
        return s3_locks(url, env, project, short)
    return []


def stack_locks(stack: auto.Stack) -> list[HeldLock]:
    """The Pulumi locks on `stack` (backend_locks)."""
    workspace = stack.workspace
    return backend_locks(workspace.env_vars, Path(workspace.work_dir), workspace.project_settings().name,
                         short_name(stack))


def lock_files(root: Path | None, project: str, short: str) -> list[Path]:
    """The stack's lock files on a file backend (none elsewhere)."""
    # Project-scoped layout (organization/<project>/<stack>), and the legacy one (<stack>) of older backends.
    patterns = (f"*/{project}/{short}/*.json", f"{short}/*.json")
    return sorted(lock for pattern in patterns for lock in (root / ".pulumi" / "locks").glob(pattern)) if root else []


def _lock_file(path: Path) -> HeldLock | None:
    try:
        return HeldLock.parse(str(path), path.read_bytes())
    except FileNotFoundError:  # released while listed
        return None
    except OSError:
        return HeldLock(str(path))


def _is_postgres(url: str) -> bool:
    return urlsplit(url).scheme in ("postgres", "postgresql")


#: The libpq variables the backend's driver reads as well, and the connection parameter each stands for;
#: stack_env puts a URL's password in PGPASSWORD.
_PG_VARIABLES = {"PGHOST": "host", "PGPORT": "port", "PGUSER": "user", "PGPASSWORD": "password",
                 "PGDATABASE": "dbname", "PGSSLMODE": "sslmode"}


@dataclass(frozen=True)
class _StateTable:
    """Where the postgres:// backend keeps a stack's blobs: one row per key (`<database>/.pulumi/...`, the
    URL's path being the bucket's prefix) in the table its `table` parameter names, `pulumi_state` by
    default; each row's `data` is `{"data": <the blob in base64>}`."""

    conninfo: str
    params: dict[str, str]
    table: list[str]
    prefix: str

    @classmethod
    def of(cls, url: str, env: Mapping[str, str]) -> _StateTable:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        table = dict(query).get("table") or "pulumi_state"
        subdir = unquote(parts.path).lstrip("/")
        conninfo = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "table"])))
        params = {param: env[variable] for variable, param in _PG_VARIABLES.items() if env.get(variable)}
        return cls(conninfo, params, table.split("."), subdir + "/" if subdir and not subdir.endswith("/") else subdir)

    def lock_keys(self, project: str, short: str) -> re.Pattern[str]:
        base = re.escape(f"{self.prefix}.pulumi/locks/")
        return re.compile(rf"{base}(?:[^/]+/{re.escape(project)}/)?{re.escape(short)}/[^/]+\.json")

    def execute(self, verb: str, what: str, query: Any, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of `query` (composed with the table's identifier as {}); EngineError naming the backend
        without its password when it cannot be reached."""
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10, **self.params) as conn:
                cursor = conn.execute(sql.SQL(query).format(sql.Identifier(*self.table)), args)
                return cursor.fetchall() if cursor.description else []
        except psycopg.errors.UndefinedTable:
            return []  # the backend has written nothing yet: no stack, no lock
        except psycopg.Error as err:
            raise EngineError(verb, what, f"the backend {hide_passwords(self.conninfo)} cannot be read: "
                              f"{hide_passwords(str(err).strip())}",
                              "check that its database is reachable, as `pulumi stack ls` would") from err


def postgres_locks(url: str, env: Mapping[str, str], project: str, short: str) -> list[HeldLock]:
    """The locks on the stack in a postgres:// backend: its rows under `.pulumi/locks/`."""
    table = _StateTable.of(url, env)
    wanted = table.lock_keys(project, short)
    rows = table.execute("read the locks of", f"stack {short!r}",
                         "SELECT key, data::text FROM {} WHERE starts_with(key, %s) ORDER BY key",
                         f"{table.prefix}.pulumi/locks/")
    found = []
    for key, data in rows:
        if wanted.fullmatch(key):
            try:
                content = base64.b64decode(json.loads(data)["data"])
            except (ValueError, KeyError, TypeError):
                content = b""
            found.append(HeldLock.parse(key, content))
    return found


#: The spellings of true Go's strconv.ParseBool (how s3blob reads its flags) accepts, lower-cased.
_S3_TRUE = ("1", "t", "true")
#: S3 error codes that answer the request (no such key, a refused precondition), not a bucket out of reach.
_S3_ANSWERS = ("NoSuchKey", "404", "PreconditionFailed", "412", "ConditionalRequestConflict", "409")


@dataclass(frozen=True)
class S3Bucket:
    """Where the s3:// backend keeps its blobs: a bucket and the URL's path as the prefix of every key, reached
    as Pulumi's s3blob (gocloud.dev) reaches it: `region`, `endpoint` (https:// unless `disable_https` or the
    older `disableSSL`), `use_path_style` or `s3ForcePathStyle`, `profile`, `anonymous` from the query;
    credentials and region otherwise from the AWS variables of `env`, then the process's, as the CLI's SDK."""

    url: str
    bucket: str
    prefix: str
    session: tuple[tuple[str, str], ...]
    endpoint: str | None
    plain: bool
    path_style: bool
    anonymous: bool

    @classmethod
    def of(cls, url: str, env: Mapping[str, str]) -> S3Bucket:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        plain = (query.get("disable_https") or query.get("disableSSL") or "").lower() in _S3_TRUE
        endpoint = query.get("endpoint")
        if endpoint and "://" not in endpoint:
            endpoint = f"{'http' if plain else 'https'}://{endpoint}"
        path_style = (query.get("use_path_style") or query.get("s3ForcePathStyle") or "").lower() in _S3_TRUE
        session = {arg: env[variable] for variable, arg in (
            ("AWS_ACCESS_KEY_ID", "aws_access_key_id"), ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
            ("AWS_SESSION_TOKEN", "aws_session_token"), ("AWS_PROFILE", "profile_name"),
            ("AWS_DEFAULT_REGION", "region_name"), ("AWS_REGION", "region_name")) if env.get(variable)}
        session.update({"profile_name": query["profile"]} if query.get("profile") else {})
        session.update({"region_name": query["region"]} if query.get("region") else {})
        subdir = unquote(parts.path).lstrip("/")
        return cls(url, parts.hostname or "", subdir + "/" if subdir and not subdir.endswith("/") else subdir,
                   tuple(sorted(session.items())), endpoint, plain, path_style,
                   query.get("anonymous", "").lower() in _S3_TRUE)

    @property
    def client(self) -> Any:
        return _s3_client(self.session, self.endpoint, self.plain, self.path_style, self.anonymous)

    def call(self, verb: str, what: str, operation: str, **args: Any) -> Any:
        """The S3 `operation` on the bucket; EngineError naming it when the bucket cannot be reached. Any
        ClientError but a refused precondition is that (a caller that sets one catches it)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **args)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in _S3_ANSWERS:
                raise
            raise self._unreachable(verb, what, err) from err
        except BotoCoreError as err:
            raise self._unreachable(verb, what, err) from err

    def _unreachable(self, verb: str, what: str, err: Exception) -> EngineError:
        return EngineError(verb, what, f"the backend s3://{self.bucket}/{self.prefix} cannot be read: {err}",
                           "check that the bucket is reachable with the AWS credentials pulumi uses, as "
                           "`pulumi stack ls` would")

    def lock_keys(self, project: str, short: str) -> re.Pattern[str]:
        base = re.escape(f"{self.prefix}.pulumi/locks/")
        return re.compile(rf"{base}(?:[^/]+/{re.escape(project)}/)?{re.escape(short)}/[^/]+\.json")


@lru_cache(maxsize=16)
def _s3_client(session: tuple[tuple[str, str], ...], endpoint: str | None, plain: bool, path_style: bool,
               anonymous: bool) -> Any:
    """One client per way of reaching a bucket, kept: building one reads the AWS config files (a wait
    polls the locks every half second). boto3's clients are thread-safe."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path" if path_style else "auto"}, connect_timeout=10,
                    retries={"max_attempts": 3}, request_checksum_calculation="when_required",
                    **({"signature_version": UNSIGNED} if anonymous else {}))
    return boto3.session.Session(**dict(session)).client("s3", endpoint_url=endpoint, use_ssl=not plain, config=config)


def s3_locks(url: str, env: Mapping[str, str], project: str, short: str) -> list[HeldLock]:
    """The locks on the stack in an s3:// backend: its objects under `.pulumi/locks/`, the JSON of a lock file."""
    from botocore.exceptions import ClientError

    bucket = S3Bucket.of(url, env)
    wanted, what = bucket.lock_keys(project, short), f"stack {short!r}"
    listed = bucket.call("read the locks of", what, "list_objects_v2", Prefix=f"{bucket.prefix}.pulumi/locks/")
    found = []
    for key in sorted(o["Key"] for o in listed.get("Contents", []) if wanted.fullmatch(o["Key"])):
        try:
            content = bucket.call("read the locks of", what, "get_object", Key=key)["Body"].read()
        except ClientError:  # released while listed
            continue
        found.append(HeldLock.parse(key, content))
    return found


def release_lock(env: Mapping[str, str], lock: HeldLock) -> None:
    """Remove that one lock (`pulumi cancel` removes every lock on the stack, a run's started since too)."""
    url = env.get("PULUMI_BACKEND_URL", "")
    if _is_postgres(url):
        _StateTable.of(url, env).execute("remove the lock of", lock.holder, "DELETE FROM {} WHERE key = %s", lock.where)
    elif url.startswith("s3://"):
        bucket = S3Bucket.of(url, env)
        bucket.call("remove the lock of", lock.holder, "delete_object", Key=lock.where)
    else:
        Path(lock.where).unlink(missing_ok=True)


# --- waiting for them -----------------------------------------------------------------------------


class _Waiting:
    """One bounded wait: its deadline, and the holder last announced."""

    def __init__(self, wait: LockWait, name: str) -> None:
        self.wait, self.name = wait, name
        self.started = time.monotonic()
        self.announced: str | None = None

    def met(self, holder: str, verb: str, what: str, elsewhere: bool = False) -> None:
        """Another run holds the lock: say so (once per holder), or fail once the wait is over.
        `elsewhere`: the holder is on another machine, where whether it still runs cannot be seen."""
        waited = time.monotonic() - self.started
        if waited >= self.wait.seconds:
            if elsewhere:
                hint = (f"nothing was changed by this run; wait for that one to end and run it again; if it no longer "
                        f"runs there, `pulumi cancel --stack {self.name}` removes its lock, then `devstack recover "
                        f"-w {self.name}`")
            else:
                hint = (f"nothing was changed by this run; wait for that one to end and run it again, or if none is "
                        f"running, `devstack recover -w {self.name}`")
            raise EngineError(verb, what, f"stack {self.name!r} stayed locked by {holder} for the {waited:.0f}s "
                              f"this verb waits (--lock-wait)", hint)
        if holder != self.announced:
            self.wait.say(f"waiting for the lock on stack {self.name!r} held by {holder} (at most "
                          f"{self.wait.seconds - waited:.0f}s more)")
            self.announced = holder

    def pause(self, interval: float = 0.2) -> None:
        time.sleep(min(interval, max(0.0, self.wait.seconds - (time.monotonic() - self.started))))


def wait_while_locked(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> None:
    """Return once no other run holds the stack's lock (file:// and postgres:// backends, where it can be
    seen), waiting for it at most `wait.seconds`, and the state holds no operation a killed run left
    pending; else EngineError, nothing changed, naming the holder or the pending operations.

    Called before the ledger or data change: the ledger edit after the drops would fail on the lock, and
    an `up` holding it records what it makes only once made (gc would take its new resources for orphans)."""
    waiting = _Waiting(wait, short_name(stack))
    while held := stack_locks(stack):
        _refuse_a_killed_runs_lock(stack, held, verb, what)
        waiting.met(held[0].holder, verb, what, elsewhere=held[0].elsewhere)
        waiting.pause(0.2 if stack.workspace.env_vars.get("PULUMI_BACKEND_URL", "").startswith("file://") else 0.5)
    refuse_pending_operations(stack, verb, what)


def waiting_for_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait, call: Callable[[], Any]) -> Any:
    """`call()` (one pulumi command on `stack`), run again once the lock it met is released.

    A command that meets another run's lock fails at once without doing anything, so running it again
    is safe. The wait is bounded by `wait.seconds`: then EngineError names the holder."""
    waiting = _Waiting(wait, short_name(stack))
    visible = locks_visible(stack.workspace.env_vars.get("PULUMI_BACKEND_URL", ""))
    while True:
        try:
            return call()
        except auto.errors.ConcurrentUpdateError:
            held = stack_locks(stack)
            _refuse_a_killed_runs_lock(stack, held, verb, what)
            waiting.met(held[0].holder if held else "another pulumi run", verb, what,
                        elsewhere=bool(held) and held[0].elsewhere)
            while stack_locks(stack) and time.monotonic() - waiting.started < wait.seconds:
                waiting.pause(0.5)
            if not visible:  # no lock to watch: try again a second later
                waiting.pause(1.0)


def _refuse_a_killed_runs_lock(stack: auto.Stack, held: list[HeldLock], verb: str, what: str) -> None:
    """EngineError at once, rather than a wait that cannot end, when the stack's lock is that of a run
    killed on this machine (its pid runs no pulumi): `devstack recover` is what frees it. The message
    lists what the killed run left pending in the state."""
    for lock in held:
        if lock.killed:
            try:
                pending = pending_operations(export_deployment(stack))
            except DevstackError:  # the refusal says enough without them (recover reads them again)
                pending = []
            left = f"; it left {len(pending)} operation(s) pending: {', '.join(pending)}" if pending else ""
            raise EngineError(verb, what, f"stack {short_name(stack)!r} is locked by pid {lock.pid} of this "
                              f"machine, since {lock.timestamp}, which no longer runs: a killed run's lock{left}",
                              f"nothing was changed by this run; `devstack recover -w {stack.name}`, then run it again")


# --- what a killed run left pending -----------------------------------------------------------


def pending_operations(deployment: Mapping[str, Any]) -> list[str]:
    """`<operation> <resource>` for each operation the deployment holds pending (`creating
    postgres/pg/database/x@shop`): what a killed run had begun and not recorded the end of."""
    described = []
    for pending in deployment.get("pending_operations") or []:
        resource = pending.get("resource") or {}
        try:
            what = str(Identity.from_props(resource.get("outputs") or resource.get("inputs") or {}))
        except (KeyError, TypeError, ValueError):  # a component, or another program's resource
            what = f"{resource.get('type', '?')} {str(resource.get('urn', '?')).rsplit('::', 1)[-1]}"
        described.append(f"{pending.get('type', 'an operation')} {what}")
    return described


def refuse_pending_operations(stack: auto.Stack, verb: str, what: str) -> None:
    """EngineError, nothing changed, listing them, when the stack's state holds operations a killed run left
    pending: a resource being created may be in its engine and not in the ledger (gc would take it for an
    orphan), one being deleted in the ledger and gone."""
    pending = pending_operations(export_deployment(stack))
    if pending:
        raise EngineError(verb, what, f"the ledger of stack {short_name(stack)!r} holds {len(pending)} operation(s) a "
                          f"killed run left pending: {', '.join(pending)}",
                          f"nothing was changed; `devstack recover -w {stack.name}` resolves them against the engines "
                          f"(or `pulumi refresh --clear-pending-creates`), then run it again")


# --- the checkout's lock, one verb at a time ---------------------------------------------------------


@contextmanager
def verb_lock(stack: auto.Stack, verb: str, what: str, wait: LockWait) -> Iterator[None]:
    """Hold the checkout's lock on the workspace for a verb that edits its devstack.yaml files or ledger.

    Two verbs at once would each read a devstack.yaml, add their entry and write it back, and one entry
    would be lost; the second waits here instead (bounded by `wait`), told whose verb it waits for. The
    lock is an flock on `<work dir>/.devstack/locks/<stack>.lock`, released when its holder exits,
    however; the file names the holder for the waiter's message.
    """
    path = Path(stack.workspace.work_dir) / ".devstack" / "locks" / f"{short_name(stack)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        waiting = _Waiting(wait, short_name(stack))
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waiting.met(_verb_holder(path), verb, what)
                waiting.pause()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "username": getpass.getuser(), "hostname": socket.gethostname(),
                                  "verb": f"{verb} {what}", "since": datetime.now().astimezone().isoformat(
                                      timespec="seconds")}).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


def _verb_holder(path: Path) -> str:
    """The devstack verb holding the checkout's lock, as its lock file names it."""
    try:
        held = json.loads(path.read_text())
        return (f"devstack pid {held['pid']} of {held['username']}@{held['hostname']} ({held['verb']}), "
                f"since {held['since']}")
    except (OSError, ValueError, KeyError, TypeError):  # taken a moment ago, not written yet
        return "another devstack verb"
