"""The extensions a postgres `database` lists, against the real local server."""

from __future__ import annotations


import psycopg
import pytest

from providers.errors import InvalidSpec, Unsupported
from tests.providers.conftest import props
from tests.providers.postgres.helpers import PG, check_failures, connect


def extensions(admin, database: str) -> list[str]:
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password, dbname=database) as conn:
        return [r[0] for r in conn.execute("SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1")]


def test_database_extensions_create_adopt_update_and_drift(database, owner, admin, admin_conn):
    inputs = props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto", "citext", "citext"]})
    inputs = database.check({}, inputs).inputs
    assert inputs["params"]["extensions"] == ["citext", "pgcrypto"]  # normalized: sorted, unique
    outs = database.create(inputs).outs
    assert extensions(admin, owner) == ["citext", "pgcrypto"]
    assert database.create(inputs).outs["password"] == outs["password"]  # adoption changes nothing
    assert database.read("id", outs).outs["params"] == outs["params"]

    changed = {**inputs, "params": {**inputs["params"], "extensions": ["citext", "hstore"]}}
    diff = database.diff("id", outs, changed)
    assert diff.changes and diff.replaces == []
    outs = database.update("id", outs, changed).outs
    assert extensions(admin, owner) == ["citext", "hstore"]

    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname=owner, autocommit=True) as conn:
        conn.execute("DROP EXTENSION hstore")  # out of band
    refreshed = database.read("id", outs).outs
    assert refreshed["params"]["extensions"] == ["citext"]
    assert database.diff("id", refreshed, changed).changes  # the next up re-creates it


def test_extensions_go_into_the_databases_public_schema(database, owner, admin):
    database.create(database.check({}, props("postgres", "pg", "database", owner, owner,
                                             {"extensions": ["citext", "hstore"]})).inputs)
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password, dbname=owner) as conn:
        schemas = conn.execute("SELECT e.extname, n.nspname FROM pg_extension e JOIN pg_namespace n "
                               "ON n.oid = e.extnamespace WHERE e.extname <> 'plpgsql' ORDER BY 1").fetchall()
    assert schemas == [("citext", "public"), ("hstore", "public")]


def test_database_adopted_without_an_extension_drops_the_one_devstack_installed(database, owner, admin):
    """A retained database declared again with fewer extensions: the ledger says what the engine has."""
    outs = database.create(database.check({}, props("postgres", "pg", "database", owner, owner,
                                                    {"extensions": ["citext", "pgcrypto"]})).inputs).outs
    with connect(outs) as conn:  # the tenant's own extension is not devstack's to drop
        conn.execute("CREATE EXTENSION pg_trgm")
    again = database.check({}, props("postgres", "pg", "database", owner, owner, {"extensions": ["pgcrypto"]})).inputs
    adopted = database.create(again).outs
    assert extensions(admin, owner) == ["pg_trgm", "pgcrypto"]
    assert database.read("id", adopted).outs["params"] == adopted["params"]


def test_database_tenant_installed_extension_is_not_managed(database, owner, admin):
    outs = database.create(props("postgres", "pg", "database", owner, owner)).outs
    with connect(outs) as conn:  # pg_trgm is trusted: the owner may install it itself
        conn.execute("CREATE EXTENSION pg_trgm")
    assert database.read("id", outs).outs["params"]["extensions"] == []
    assert extensions(admin, owner) == ["pg_trgm"]


def test_database_extension_in_use_is_not_dropped(database, owner, admin):
    inputs = props("postgres", "pg", "database", owner, owner, {"extensions": ["citext"]})
    outs = database.create(inputs).outs
    with connect(outs) as conn:
        conn.execute("CREATE TABLE emails (address citext)")
    with pytest.raises(Unsupported, match="citext still in use"):
        database.update("id", outs, {**inputs, "params": {**inputs["params"], "extensions": []}})
    assert extensions(admin, owner) == ["citext"]
    with connect(outs) as conn:
        assert conn.execute("SELECT count(*) FROM emails").fetchone() == (0,)


@pytest.mark.parametrize(
    "wanted, message",
    [
        pytest.param(["no_such_extension"], "'no_such_extension' is not available", id="unknown"),
        pytest.param(["file_fdw"], "'file_fdw' is not a trusted extension", id="untrusted"),
        pytest.param(["earthdistance"], "'earthdistance' requires 'cube', which is not listed", id="missing-requirement"),
    ],
)
def test_database_bad_extensions_change_nothing(database, owner, admin_conn, wanted, message):
    with pytest.raises(InvalidSpec, match=message):
        database.create(props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (owner,)).fetchone() is None
    assert admin_conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None


@pytest.mark.parametrize("wanted, message", [
    (["no_such_extension"], "'no_such_extension' is not available"),
    (["file_fdw"], "'file_fdw' is not a trusted extension"),
])
def test_database_bad_extensions_fail_check_before_the_up(database, owner, admin_conn, wanted, message):
    """Said at the preview, new or changed, not half-way through the up after the workspace's other creates."""
    found = check_failures(database, props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert message in found["params.extensions"] and "the database was not made" in found["params.extensions"]
    made = database.create(props("postgres", "pg", "database", owner, owner)).outs
    changed = database.check(made, props("postgres", "pg", "database", owner, owner, {"extensions": wanted}))
    assert [(f.property, message in f.reason, "was not changed" in f.reason) for f in changed.failures] == [
        ("params.extensions", True, True)]


def test_database_extension_names_with_a_dash_are_quoted(database, owner, admin):
    database.create(props("postgres", "pg", "database", owner, owner, {"extensions": ["uuid-ossp"]}))
    assert extensions(admin, owner) == ["uuid-ossp"]
