"""Stale entries against the real engines: what read, diff, update and a purging delete do with an entry a
refresh missed (KindProvider in providers.base, clocks in providers.lifecycle).

A read that misses the resource keeps the entry, stale, its last-seen time as it was; the update makes it
again (a generated password anew) or adopts it; a read that finds it again makes it active; another
project's object under the name is never converged nor dropped; an engine that cannot be reached fails.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Callable

import psycopg
import pytest
import redis
from botocore.exceptions import ClientError
from minio.credentials import StaticProvider
from minio.minioadmin import MinioAdmin
from psycopg import sql

from providers.base import KindProvider
from providers.errors import Conflict, EngineUnavailable
from providers.identity import NAMING, SANITIZED
from providers.lifecycle import ACTIVE, FIRST_SEEN, LAST_SEEN, LIFECYCLE, STALE, is_stale, without_clocks
from providers.minio.bucket import MinioBucket
from providers.postgres.database import Database
from providers.redis.acl_user import AclUser
from providers.redis.client import ACL_OWNERS_KEY
from tests.providers.conftest import props
from tests.providers.minio.helpers import ENDPOINT, MINIO, MinioBucketOutOfBand
from tests.providers.postgres.helpers import PG
from tests.providers.redis.helpers import REDIS
from tests.providers.s3.contract import aws

EARLIER = "2026-01-02T03:04:05Z"


@dataclass
class Case:
    """A kind with generated credentials, and how the test reaches around the provider to its engine."""

    kind: type[KindProvider]
    instance: str
    drop: Callable[[Any, str], None]  # (admin credentials, engine name): removed behind Pulumi's back
    logs_in: Callable[[dict], bool]  # whether the outputs' credential works
    cleanup: Callable[[Any, str], None]


def _pg(admin) -> psycopg.Connection:
    return psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password, dbname="postgres",
                           autocommit=True, connect_timeout=5)


def _pg_drop(admin, name: str) -> None:
    with _pg(admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _pg_logs_in(outs: dict) -> bool:
    with psycopg.connect(**PG, user=outs["user"], password=outs["password"], dbname=outs["database"],
                         connect_timeout=5) as conn:
        return conn.execute("SELECT current_database()").fetchone() == (outs["database"],)


def _pg_cleanup(admin, name: str) -> None:
    _pg_drop(admin, name)
    with _pg(admin) as conn:
        for (role,) in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (name,)).fetchall():
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _redis(admin) -> redis.Redis:
    return redis.Redis(**REDIS, username=admin["redis"].user, password=admin["redis"].password, decode_responses=True)


def _redis_drop(admin, name: str) -> None:
    with _redis(admin) as client:  # the user and its marker, as a Redis that came back empty
        client.acl_deluser(name)
        client.hdel(ACL_OWNERS_KEY, name)


def _redis_logs_in(outs: dict) -> bool:
    with redis.Redis(**REDIS, username=outs["user"], password=outs["password"]) as client:
        return client.ping()


def _redis_cleanup(admin, name: str) -> None:
    with _redis(admin) as client:
        client.hdel(ACL_OWNERS_KEY, name)
        if client.acl_getuser(name):
            client.acl_deluser(name)


def _minio_oob(admin) -> MinioBucketOutOfBand:
    minio_admin = MinioAdmin(endpoint=MINIO, credentials=StaticProvider(admin["minio"].user, admin["minio"].password),
                             secure=False)
    return MinioBucketOutOfBand(minio_admin, ENDPOINT, admin["minio"].user, admin["minio"].password)


def _minio_drop(admin, name: str) -> None:
    _minio_oob(admin).cleanup(name)  # the bucket and its own key, as a MinIO that came back empty


def _minio_logs_in(outs: dict) -> bool:
    try:
        aws("s3", ENDPOINT, outs["accessKey"], outs["secretKey"]).list_objects_v2(Bucket=outs["bucket"])
    except ClientError:
        return False
    return True


CASES = [
    pytest.param(Case(Database, "pg", _pg_drop, _pg_logs_in, _pg_cleanup), id="postgres-database"),
    pytest.param(Case(AclUser, "cache", _redis_drop, _redis_logs_in, _redis_cleanup), id="redis-acl_user"),
    pytest.param(Case(MinioBucket, "objects", _minio_drop, _minio_logs_in, _minio_drop), id="minio-bucket"),
]


@pytest.fixture(params=CASES)
def case(request, admin, owner):
    """The case, and a cleanup of whatever the test's owner (and `<owner>x`) left in its engine."""
    case: Case = request.param
    yield case
    for project in (owner, f"{owner}x"):
        case.cleanup(admin, case.kind.engine_name(owner, project, naming=SANITIZED))


def inputs_of(provider: KindProvider, case: Case, owner: str, name: str | None = None,
              credentials: str = "generated") -> dict:
    declared = props(provider.engine, case.instance, provider.kind, name or owner, owner, credentials=credentials,
                     naming=SANITIZED)
    return provider.check({}, declared).inputs


def test_a_refresh_that_misses_it_keeps_it_stale_and_the_up_makes_it_again(case, configure, admin, owner):
    provider = configure(case.kind())
    inputs = inputs_of(provider, case, owner)
    made = provider.create(inputs)
    outs = {**made.outs, FIRST_SEEN: EARLIER, LAST_SEEN: EARLIER}  # as an earlier run recorded it
    assert made.outs[LIFECYCLE] == ACTIVE and made.outs[FIRST_SEEN] == made.outs[LAST_SEEN]
    assert provider.diff(made.id, outs, inputs).changes is False
    case.drop(admin, provider.engine_name(owner, owner, naming=SANITIZED))

    missed = provider.read(made.id, outs)
    assert missed.id == made.id  # kept
    assert missed.outs == {**outs, LIFECYCLE: STALE}  # nothing but the lifecycle changed: last seen as it was
    # The stale mark goes into the inputs the preview compares with the program's (which record no naming).
    assert missed.inputs == {**{k: v for k, v in inputs.items() if k != NAMING}, LIFECYCLE: STALE}
    assert provider.read(made.id, missed.outs).outs == missed.outs  # missed again: nothing moves
    diff = provider.diff(made.id, missed.outs, inputs)
    assert (diff.changes, diff.replaces) == (True, [])

    remade = provider.update(made.id, missed.outs, inputs).outs
    assert (remade[LIFECYCLE], remade[FIRST_SEEN]) == (ACTIVE, EARLIER) and remade[LAST_SEEN] > EARLIER
    secret = "password" if "password" in remade else "secretKey"
    assert remade[secret] != outs[secret] and case.logs_in(remade)
    assert provider.diff(made.id, remade, inputs).changes is False
    seen = provider.read(made.id, remade)
    assert seen.outs[LIFECYCLE] == ACTIVE and seen.outs[LAST_SEEN] >= remade[LAST_SEEN] and seen.inputs is None
    assert without_clocks(seen.outs) == without_clocks(remade)


def test_a_refresh_that_finds_it_made_again_by_the_project_makes_it_active(case, configure, admin, owner):
    provider = configure(case.kind())
    inputs = inputs_of(provider, case, owner, credentials="predictable")  # made again, it logs in the same
    made = provider.create(inputs)
    case.drop(admin, provider.engine_name(owner, owner, naming=SANITIZED))
    missed = provider.read(made.id, {**made.outs, LAST_SEEN: EARLIER}).outs
    assert is_stale(missed)
    provider.create(inputs)  # this project's own again (another run of it, say)

    back = provider.read(made.id, missed)
    assert back.id == made.id and back.outs[LIFECYCLE] == ACTIVE and back.outs[LAST_SEEN] > EARLIER
    assert back.inputs is not None and LIFECYCLE not in back.inputs  # the preview's stale mark goes with it
    assert provider.diff(made.id, back.outs, inputs).changes is False


def test_a_name_another_project_holds_now_is_stale_and_never_touched(case, configure, admin, owner):
    provider, other = configure(case.kind()), f"{owner}x"
    inputs = inputs_of(provider, case, owner)
    made = provider.create(inputs)
    engine_name = provider.engine_name(owner, owner, naming=SANITIZED)
    case.drop(admin, engine_name)
    assert provider.engine_name(engine_name, other, naming=SANITIZED) == engine_name  # theirs, by its explicit name
    theirs = provider.create(inputs_of(provider, case, other, name=engine_name))

    missed = provider.read(made.id, made.outs).outs
    assert is_stale(missed) and missed[LAST_SEEN] == made.outs[LAST_SEEN]
    with pytest.raises(Conflict, match=f"cannot create .*belongs to project '{other}'.*nothing was changed"):
        provider.update(made.id, missed, inputs)
    with pytest.raises(Conflict, match=f"belongs to project '{other}'"):
        provider.delete(made.id, {**missed, "purge": True})
    assert case.logs_in(theirs.outs)  # theirs, as they made it
    assert provider.read(theirs.id, theirs.outs).outs[LIFECYCLE] == ACTIVE


def test_an_engine_that_cannot_be_reached_marks_nothing(case, configure, owner):
    provider = configure(case.kind())
    made = provider.create(inputs_of(provider, case, owner))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    provider._instances[case.instance] = provider._instances[case.instance].model_copy(update={"port": closed})
    with pytest.raises(EngineUnavailable):
        provider.read(made.id, made.outs)
