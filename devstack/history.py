"""The ledger's history: tombstones, lifecycle decisions and events, kept beside the state on each backend.

Pulumi's own update history cannot hold it: `pulumi state delete` and `stack
import` (how `rm` and `destroy` edit the ledger) write the checkpoint without
a history entry, a prune drops objects the state never held, the history's
checkpoints are the backend's private layout (files, or rows of
`pulumi_state`), never pruned, each a full copy of the state. So the ledger
keeps one small document per stack: a file beside the file backend's
`.pulumi` (written atomically under an flock), a row of `devstack_ledger` in
a `postgres://` backend's database (written under a transaction advisory
lock), an object beside an `s3://` backend's `.pulumi` (written under a lock
object, both by S3 conditional writes). All run the same rules below.

The document holds `known` (each entry of the state as last synced, secrets
redacted), `records` (the ledger's own lifecycle decisions: a tombstone is
a `deleted` record), and the newest `MAX_EVENTS` events. `sync` derives
events from the state against `known`: a new entry is provisioned, a changed
`modified` an update, a changed `created` a replacement (drop and provision),
an entry gone without a record a drop (cause `state`). Reads derive in
memory and write nothing.

Lifecycle rules (CON-8): the newest decision wins, by its time; a deleted
resource cannot become stale (InvalidTransition); an observation older than
the one held is refused (StaleObservation) and, in a scan, leaves the
resource as it was; a delayed observation from before a deletion does not
resurrect it; a fresh one (an `up` that adopts or re-creates it) does.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pulumi import automation as auto

from devstack.errors import AlreadyExists, EngineError, InvalidQuery, InvalidTransition, NotFound, StaleObservation
from devstack.locks import S3Bucket
from devstack.stack import PROGRAM_PROJECT, file_backend_root, hide_passwords, short_name
from devstack.state import ACTIVE, DELETED, REDACTED, STALE, Tracked, parse_time, read_state

#: Events kept per stack, oldest dropped first; tombstones kept per stack, the longest deleted dropped first.
MAX_EVENTS, MAX_TOMBSTONES = 1000, 1000
#: spec 27's event_log kinds.
EVENT_KINDS = ("provision", "update", "drop", "gc.drop")
#: How far ahead of this clock an observation may be (CON-8).
MAX_SKEW = timedelta(minutes=1)
TABLE = "devstack_ledger"


def now() -> datetime:
    return datetime.now(timezone.utc)


def iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def empty() -> dict[str, Any]:
    return {"version": 1, "seq": 0, "known": {}, "records": {}, "events": []}


# --- the stores ------------------------------------------------------------------------------


class Store:
    """One stack's document on its backend: `load` reads a snapshot without a lock; `writing` holds the
    store's lock from the read to the atomic write (nothing is written when the block raises)."""

    where: str

    def load(self) -> dict[str, Any]:
        raise NotImplementedError

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        raise NotImplementedError
        yield {}


class NoStore(Store):
    """A backend without a history store (gs://, azblob://, ...): nothing is kept, nothing is derived beyond the state."""

    def __init__(self, url: str) -> None:
        self.where = f"no history store on {hide_passwords(url)}"

    def load(self) -> dict[str, Any]:
        return empty()

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        yield empty()


class FileStore(Store):
    """`<backend>/.devstack-ledger/<project>/<stack>.json`, replaced atomically under an flock of a file beside it."""

    def __init__(self, root: Path, stack: str) -> None:
        self.path = root / ".devstack-ledger" / PROGRAM_PROJECT / f"{stack}.json"
        self.where = str(self.path)

    def load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return empty()
        except (OSError, ValueError) as err:
            raise EngineError("read", f"the ledger history {self.path}", str(err),
                              "restore the file from a backup, or remove it (tombstones and events are lost)") from err

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                doc = self.load()
                yield doc
                fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as out:
                        json.dump(doc, out, separators=(",", ":"))
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(temp, self.path)
                except BaseException:
                    Path(temp).unlink(missing_ok=True)
                    raise
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class PostgresStore(Store):
    """A row of `devstack_ledger` (key: project/stack) in the `postgres://` backend's own database."""

    def __init__(self, url: str, password: str | None, stack: str) -> None:
        parts = urlsplit(url)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "table"]  # Pulumi's own
        self.conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))
        self.password = password
        self.key = f"{PROGRAM_PROJECT}/{stack}"
        self.where = f"table {TABLE} of {hide_passwords(url)}"

    def _connect(self):
        import psycopg

        try:
            return psycopg.connect(self.conninfo, password=self.password, connect_timeout=10, autocommit=True)
        except psycopg.Error as err:
            raise EngineError("open", f"the ledger history ({self.where})", str(err).strip()) from err

    def load(self) -> dict[str, Any]:
        import psycopg

        with self._connect() as conn:
            try:
                row = conn.execute(f"SELECT doc FROM {TABLE} WHERE key = %s", (self.key,)).fetchone()
            except psycopg.errors.UndefinedTable:
                return empty()
        return row[0] if row else empty()

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        from psycopg.types.json import Jsonb

        with self._connect() as conn, conn.transaction():
            # One lock for every write, the table's creation included (two CREATE IF NOT EXISTS at once collide).
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (TABLE,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (key text PRIMARY KEY, doc jsonb NOT NULL, "
                         "updated_at timestamptz NOT NULL DEFAULT now())")
            row = conn.execute(f"SELECT doc FROM {TABLE} WHERE key = %s FOR UPDATE", (self.key,)).fetchone()
            doc = row[0] if row else empty()
            yield doc
            conn.execute(f"INSERT INTO {TABLE} (key, doc) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                         "SET doc = EXCLUDED.doc, updated_at = now()", (self.key, Jsonb(doc)))


#: How long an s3:// writer waits for another's lock object, and the age past which one is a dead writer's.
S3_LOCK_WAIT, S3_LOCK_LEASE = 60.0, 120.0


class S3Store(Store):
    """`<bucket>/<prefix>/.devstack-ledger/<project>/<stack>.json` in the s3:// backend's bucket.

    A write holds `<stack>.json.lock`, created only if absent (If-None-Match: *), polled a bounded time
    while another machine holds it and taken over past its lease (its writer died); the document is then
    written only if unchanged since read (If-Match on its ETag, If-None-Match: * for the first), so a
    writer whose lease was taken over fails rather than lose the other's edit."""

    def __init__(self, url: str, env: Mapping[str, str], stack: str) -> None:
        self.bucket = S3Bucket.of(url, env)
        self.key = f"{self.bucket.prefix}.devstack-ledger/{PROGRAM_PROJECT}/{stack}.json"
        self.where = f"s3://{self.bucket.bucket}/{self.key}"

    def _read(self) -> tuple[dict[str, Any], str | None]:
        from botocore.exceptions import ClientError

        try:
            got = self.bucket.call("read", f"the ledger history {self.where}", "get_object", Key=self.key)
        except ClientError as err:
            if err.response["Error"]["Code"] == "NoSuchKey":
                return empty(), None
            raise
        try:
            return json.loads(got["Body"].read()), got["ETag"]
        except ValueError as err:
            raise EngineError("read", f"the ledger history {self.where}", str(err), "restore the object from a "
                              "backup, or remove it (tombstones and events are lost)") from err

    def load(self) -> dict[str, Any]:
        return self._read()[0]

    @contextmanager
    def writing(self) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import ClientError

        lock = self._lock()
        try:
            doc, etag = self._read()
            yield doc
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
            try:
                self.bucket.call("write", f"the ledger history {self.where}", "put_object", Key=self.key,
                                 Body=json.dumps(doc, separators=(",", ":")).encode(), **condition)
            except ClientError as err:
                raise EngineError("write", f"the ledger history {self.where}", "another writer changed it while "
                                  "this one held its lock past the lease", "nothing was written; run it again") from err
        finally:
            self._unlock(lock)

    def _unlock(self, etag: str) -> None:
        """Remove the lock object if it is still this writer's (not one that took it over past the lease)."""
        from botocore.exceptions import ClientError

        key, what = f"{self.key}.lock", f"the lock of {self.where}"
        try:
            if self.bucket.call("read", what, "head_object", Key=key)["ETag"] == etag:
                self.bucket.call("release", what, "delete_object", Key=key)
        except ClientError:
            pass  # gone already

    def _lock(self) -> str:
        """Create the lock object (bounded retry while another writer holds it); its ETag."""
        from botocore.exceptions import ClientError

        key, what = f"{self.key}.lock", f"the lock of {self.where}"
        mine = json.dumps({"pid": os.getpid(), "hostname": socket.gethostname(), "at": iso(now())}).encode()
        deadline = time.monotonic() + S3_LOCK_WAIT
        while True:
            try:
                return self.bucket.call("take", what, "put_object", Key=key, Body=mine, IfNoneMatch="*")["ETag"]
            except ClientError:
                pass  # held: another writer's (or one writing it this moment)
            try:
                held = self.bucket.call("read", what, "head_object", Key=key)
                if now() - held["LastModified"] > timedelta(seconds=S3_LOCK_LEASE):
                    self.bucket.call("remove", what, "delete_object", Key=key)  # a dead writer's
                    continue
            except ClientError:
                continue  # released meanwhile
            if time.monotonic() > deadline:
                raise EngineError("write", f"the ledger history {self.where}", f"its lock {key} stayed held for "
                                  f"{S3_LOCK_WAIT:.0f}s", "run it again; a lock older than "
                                  f"{S3_LOCK_LEASE:.0f}s is taken for a dead writer's")
            time.sleep(0.1)


def store_for(stack: auto.Stack) -> Store:
    """The history store of the stack's backend."""
    env = stack.workspace.env_vars
    url = env.get("PULUMI_BACKEND_URL", "")
    root = file_backend_root(url, Path(stack.workspace.work_dir))
    if root is not None:
        return FileStore(root, short_name(stack))
    if urlsplit(url).scheme in ("postgres", "postgresql"):
        return PostgresStore(url, env.get("PGPASSWORD"), short_name(stack))
    if url.startswith("s3://"):
        return S3Store(url, env, short_name(stack))
    return NoStore(url)


# --- the rules, the same on every store ------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One resource as the ledger holds it now: the state's entry and the ledger's records, merged."""

    id: str
    row: dict[str, Any]
    lifecycle: str
    first_seen: datetime | None
    last_seen: datetime | None
    observed: datetime | None = None
    deleted_at: datetime | None = None
    cause: str | None = None
    tracked: Tracked | None = None

    @property
    def sort_key(self) -> tuple[str, ...]:
        r = self.row
        return (r["owner"], r["engine"], r["instance"], r["kind"], r["name"], r.get("urn") or "")


def snapshot(t: Tracked) -> dict[str, Any]:
    """What the ledger keeps of a state entry, secrets redacted: enough to list it once it is gone."""
    i, entry = t.ident, t.entry
    return {"id": str(i), "urn": t.urn, "engine": i.engine, "instance": i.instance, "kind": i.kind, "name": i.name,
            "owner": i.owner, "created": entry.get("created"), "modified": entry.get("modified"),
            "retained": bool(entry.get("retainOnDelete")), "dependencies": t.dependencies,
            "props": {k: REDACTED if k in t.secrets else v for k, v in t.props.items()},
            "firstSeen": _iso(t.first_seen), "lastSeen": _iso(t.last_seen), "lifecycle": t.lifecycle}


def snapshot_row(engine: str, instance: str, kind: str, name: str, owner: str, **props: Any) -> dict[str, Any]:
    """A row for what the state never held (a pruned orphan): its identity and what the scan said."""
    return {"id": f"{engine}/{instance}/{kind}/{name}@{owner}", "urn": None, "engine": engine, "instance": instance,
            "kind": kind, "name": name, "owner": owner, "created": None, "modified": None, "retained": False,
            "dependencies": [], "props": props, "firstSeen": None, "lastSeen": None, "lifecycle": DELETED}


def _iso(value: datetime | None) -> str | None:
    return iso(value) if value is not None else None


def _event(doc: dict[str, Any], kind: str, ident: str, urn: str | None, at: datetime | None, cause: str) -> None:
    doc["seq"] += 1
    doc["events"].append({"seq": doc["seq"], "at": _iso(at), "kind": kind, "id": ident, "urn": urn, "cause": cause})
    del doc["events"][:-MAX_EVENTS]


def _tombstone(doc: dict[str, Any], row: dict[str, Any], at: datetime, cause: str, kind: str = "drop") -> None:
    doc["records"][row["id"]] = {"lifecycle": DELETED, "at": iso(at), "cause": cause, "row": row,
                                 "firstSeen": row.get("firstSeen"), "lastSeen": row.get("lastSeen")}
    _event(doc, kind, row["id"], row.get("urn"), at, cause)
    deleted = sorted((r["at"], i) for i, r in doc["records"].items() if r["lifecycle"] == DELETED)
    for _, oldest in deleted[:max(0, len(deleted) - MAX_TOMBSTONES)]:
        del doc["records"][oldest]


def sync(doc: dict[str, Any], tracked: Iterable[Tracked], gone_at: datetime) -> None:
    """Bring `doc` up to the state: events for what was provisioned, updated or replaced since the
    last sync, a tombstone (cause `state`) for what left it without a record saying why."""
    known, records, seen = doc["known"], doc["records"], set()
    for t in tracked:
        row, ident = snapshot(t), str(t.ident)
        seen.add(ident)
        old, record = known.get(ident), records.get(ident)
        tombstone = record is not None and record["lifecycle"] == DELETED
        delayed = tombstone and not _newer(t.observed, record["at"])
        if old is None or (tombstone and not delayed):  # new, or made again after its deletion
            if not delayed:
                _event(doc, "provision", ident, t.urn, t.first_seen, "state")
        elif old["created"] != row["created"]:
            _event(doc, "drop", ident, old["urn"], parse_time(row["created"]), "replace")
            _event(doc, "provision", ident, t.urn, parse_time(row["created"]), "replace")
        elif old["modified"] != row["modified"]:
            _event(doc, "update", ident, t.urn, parse_time(row["modified"]), "state")
        known[ident] = row
        if record is not None and _newer(t.observed, record["at"]):
            del records[ident]  # a newer observation (an `up` that adopted or made it again) supersedes it
    for ident in [i for i in known if i not in seen]:
        record = records.get(ident)
        if record is None or record["lifecycle"] != DELETED:
            _tombstone(doc, known[ident], gone_at, "state")
        known.pop(ident, None)


def _newer(observed: datetime | None, than: str) -> bool:
    held = parse_time(than)
    return observed is not None and held is not None and observed > held


def merge(doc: dict[str, Any], tracked: list[Tracked]) -> list[Entry]:
    """Every resource the ledger holds, tombstones included, in the stable list order."""
    records, entries, live = doc["records"], [], set()
    for t in tracked:
        ident = str(t.ident)
        live.add(ident)
        record = records.get(ident)
        if record is None or _newer(t.observed, record["at"]):
            entries.append(Entry(ident, snapshot(t), t.lifecycle, t.first_seen, t.last_seen, t.observed, tracked=t))
        else:
            entries.append(_from_record(ident, record, t))
    entries += [_from_record(i, r, None) for i, r in records.items() if i not in live and r["lifecycle"] == DELETED]
    return sorted(entries, key=lambda e: e.sort_key)


def _from_record(ident: str, record: dict[str, Any], t: Tracked | None) -> Entry:
    at = parse_time(record["at"])
    last = parse_time(record.get("lastSeen"))
    if t is not None and t.last_seen is not None and (last is None or t.last_seen > last):
        last = t.last_seen
    deleted = record["lifecycle"] == DELETED
    return Entry(ident, snapshot(t) if t is not None and not deleted else record["row"], record["lifecycle"],
                 parse_time(record.get("firstSeen")) or (t.first_seen if t else None), last, at,
                 at if deleted else None, record.get("cause"), t)


@dataclass(frozen=True)
class Ledger:
    """The ledger as read: the merged entries and the document's events (`sync`ed in memory)."""

    entries: list[Entry]
    events: list[dict[str, Any]]
    store: str


def read(stack: auto.Stack, show_secrets: bool = False) -> Ledger:
    """The ledger now, lock-free: the state merged with its history store, nothing written."""
    store = store_for(stack)
    tracked, written = read_state(stack, show_secrets)
    doc = copy.deepcopy(store.load())
    sync(doc, tracked, written or now())
    return Ledger(merge(doc, tracked), doc["events"], store.where)


@contextmanager
def _changing(stack: auto.Stack) -> Iterator[tuple[dict[str, Any], dict[str, Entry]]]:
    """The document under its store's lock, synced with the state, and the merged entries by id."""
    store = store_for(stack)
    with store.writing() as doc:
        tracked, written = read_state(stack)
        sync(doc, tracked, written or now())
        yield doc, {e.id: e for e in merge(doc, tracked)}


def sync_history(stack: auto.Stack) -> None:
    """Persist what the state says happened since the last sync (before an edit the ledger records itself)."""
    with _changing(stack):
        pass


def checked_time(at: datetime | None, verb: str, what: str) -> datetime:
    """`at` as aware UTC; InvalidQuery when unset or more than a minute ahead of this clock."""
    if at is None:
        raise InvalidQuery(verb, what, "the observation has no time", "pass the time of the scan or edit")
    at = at if at.tzinfo else at.replace(tzinfo=timezone.utc)
    if at > now() + MAX_SKEW:
        raise InvalidQuery(verb, what, f"its time {iso(at)} is ahead of this clock by more than a minute",
                           "check the clock of the machine that observed it")
    return at


def record_removal(stack: auto.Stack, ids: Iterable[str], cause: str, *, kind: str = "drop",
                   rows: Iterable[dict[str, Any]] = (), at: datetime | None = None) -> list[str]:
    """Tombstones (and a `kind` event each) for resources a verb removed: `ids` the ledger knows (as last
    synced, or still in the state), `rows` (snapshot-shaped) for those it never held (a pruned orphan).

    All or nothing: AlreadyExists when one is a tombstone already (a gc.drop then only adds its event:
    a prune drops the data of what an earlier `rm` un-tracked), StaleObservation when the ledger
    holds a newer decision, NotFound for an id it never knew. Returns the ids recorded.
    """
    if kind not in ("drop", "gc.drop"):
        raise InvalidQuery("record", f"a {kind!r} event", "a removal is a drop or a gc.drop")
    at = checked_time(at or now(), "record", "the removal")
    given = {r["id"]: r for r in rows}
    with store_for(stack).writing() as doc:
        tracked, written = read_state(stack)
        known = {**doc["known"], **{str(t.ident): snapshot(t) for t in tracked}}
        wanted = [*dict.fromkeys([*ids, *given])]
        for ident in wanted:
            record = doc["records"].get(ident)
            if record is not None and record["lifecycle"] == DELETED and kind != "gc.drop":
                raise AlreadyExists("record the removal of", ident, f"it is a tombstone since {record['at']} "
                                    f"({record.get('cause')})", "nothing was recorded")
            if record is not None and record["lifecycle"] != DELETED and not _newer(at, record["at"]):
                raise StaleObservation("record the removal of", ident, f"the ledger holds a decision of "
                                       f"{record['at']}, newer than {iso(at)}", "nothing was recorded")
            if ident not in given and ident not in known:
                raise NotFound("record the removal of", ident, "the ledger never held it", "nothing was recorded")
        for ident in wanted:
            record = doc["records"].get(ident)
            if record is not None and record["lifecycle"] == DELETED:
                _event(doc, kind, ident, record["row"].get("urn"), at, cause)
            else:
                _tombstone(doc, given.get(ident) or known[ident], at, cause, kind)
        sync(doc, tracked, written or at)
    return wanted


def observe(stack: auto.Stack, ident: str, at: datetime) -> Entry:
    """A fresh observation that `ident` is present at `at`: active, last seen then. StaleObservation for
    one older than the ledger's (a delayed observation from before a deletion included)."""
    at = checked_time(at, "record an observation of", ident)
    with _changing(stack) as (doc, entries):
        entry = _entry(entries, ident, "record an observation of")
        if entry.observed is not None and at <= entry.observed:
            why = "before its deletion" if entry.lifecycle == DELETED else "older than the one the ledger holds"
            raise StaleObservation("record an observation of", ident, f"{iso(at)} is {why} ({iso(entry.observed)})",
                                   "nothing was recorded")
        _set(doc, entry, ACTIVE, at, "observed", last_seen=at)
        if entry.lifecycle == DELETED:
            _event(doc, "provision", ident, entry.row.get("urn"), at, "observed")
    return _entry(read_entries(stack), ident, "read")


def mark_stale(stack: auto.Stack, ident: str, at: datetime, cause: str = "missed") -> None:
    """`ident` was missed at `at`: stale, last seen unchanged. InvalidTransition for a tombstone,
    StaleObservation for a time older than the ledger's."""
    at = checked_time(at, "mark stale", ident)
    with _changing(stack) as (doc, entries):
        entry = _entry(entries, ident, "mark stale")
        if entry.lifecycle == DELETED:
            raise InvalidTransition("mark stale", ident, "it is deleted (a tombstone); a deleted resource cannot "
                                    "become stale", "an `up` that makes it again reactivates it")
        if entry.observed is not None and at < entry.observed:
            raise StaleObservation("mark stale", ident, f"{iso(at)} is older than the ledger's "
                                   f"{iso(entry.observed)}", "nothing was recorded")
        _set(doc, entry, STALE, at, cause)


@dataclass(frozen=True)
class Scan:
    """One complete, successful scan of an instance: the ids it found, of its `kinds` (None: all)."""

    engine: str
    instance: str
    observed: frozenset[str]
    kinds: frozenset[str] | None = None

    @property
    def what(self) -> str:
        return f"{self.engine} instance {self.instance!r}"


def reconcile(stack: auto.Stack, engine: str, instance: str, observed: Iterable[str], at: datetime,
              kinds: Iterable[str] | None = None) -> dict[str, list[str]]:
    """One complete, successful scan of an instance (its `kinds`, or all): the resources in `observed`
    are active, last seen `at`; the others of that scope that are active become stale; tombstones and
    other scopes are untouched; a resource the ledger decided on after `at` is left (a delayed scan).
    A failed or partial scan must not call this. InvalidQuery, nothing changed, for an id out of scope.
    """
    scan = Scan(engine, instance, frozenset(observed), frozenset(kinds) if kinds is not None else None)
    return reconcile_scans(stack, [scan], at)[0]


def reconcile_scans(stack: auto.Stack, scans: list[Scan], at: datetime) -> list[dict[str, list[str]]]:
    """`reconcile` for each of `scans` (one per instance, all taken at `at`) in one write: the state is
    read once for them all. All or nothing: InvalidQuery, nothing changed, for an id out of its scan's
    scope. Returns what each scan did, in order."""
    if not scans:
        return []
    at = checked_time(at, "reconcile", ", ".join(scan.what for scan in scans))
    with _changing(stack) as (doc, entries):
        scopes = [_in_scope(entries, scan) for scan in scans]  # every scan checked before any is applied
        return [_apply_scan(doc, inside, scan.observed, at) for scan, inside in zip(scans, scopes)]


def _in_scope(entries: dict[str, Entry], scan: Scan) -> dict[str, Entry]:
    inside = {i: e for i, e in entries.items() if (e.row["engine"], e.row["instance"]) == (scan.engine, scan.instance)
              and (scan.kinds is None or e.row["kind"] in scan.kinds)}
    outside = sorted(scan.observed - set(inside))
    if outside:
        raise InvalidQuery("reconcile", scan.what, "ids outside the scan's scope or unknown to the ledger: "
                           f"{', '.join(outside)}", "nothing was changed")
    return inside


def _apply_scan(doc: dict[str, Any], inside: dict[str, Entry], observed: frozenset[str],
                at: datetime) -> dict[str, list[str]]:
    done: dict[str, list[str]] = {"active": [], "stale": [], "skipped": []}
    for ident, entry in sorted(inside.items()):
        if entry.observed is not None and at <= entry.observed:
            done["skipped"].append(ident)
        elif ident in observed:
            _set(doc, entry, ACTIVE, at, "scan", last_seen=at)
            done["active"].append(ident)
        elif entry.lifecycle == ACTIVE:
            _set(doc, entry, STALE, at, "scan")
            done["stale"].append(ident)
    return done


def _set(doc: dict[str, Any], entry: Entry, lifecycle: str, at: datetime, cause: str,
         last_seen: datetime | None = None) -> None:
    last = last_seen or entry.last_seen
    doc["records"][entry.id] = {"lifecycle": lifecycle, "at": iso(at), "cause": cause, "row": entry.row,
                                "firstSeen": _iso(entry.first_seen or at), "lastSeen": _iso(last)}


def _entry(entries: dict[str, Entry] | list[Entry], ident: str, verb: str) -> Entry:
    found = entries.get(ident) if isinstance(entries, dict) else next((e for e in entries if e.id == ident), None)
    if found is None:
        raise NotFound(verb, ident, "the ledger has no such resource", "see `devstack resource list`")
    return found


def read_entries(stack: auto.Stack) -> list[Entry]:
    return read(stack).entries
