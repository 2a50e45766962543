"""Fixtures of the postgres provider tests: an admin session, configured kinds whose leftovers are dropped, and
a PostgreSQL 16 beside the local 15."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from providers.postgres.database import Database
from providers.postgres.role import Role
from providers.postgres.user import User
from tests.providers.postgres import pg16
from tests.providers.postgres.helpers import PG


@pytest.fixture(scope="session")
def postgres16(admin):
    """The address of a local PostgreSQL 16 with the local engine's admin, started on first use (pg16.py),
    stopped when the session ends."""
    pg16.start(admin["postgres"].user, admin["postgres"].password)
    yield pg16.ADDRESS
    pg16.stop()


@pytest.fixture
def admin_conn(admin):
    with psycopg.connect(**PG, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", autocommit=True) as conn:
        yield conn


@pytest.fixture
def cleanup(admin_conn, owner):
    """Drops every database and role whose name starts with the test's owner, retained or not."""
    yield
    for (name,) in admin_conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (owner,)).fetchall():
        admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    for (name,) in admin_conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (owner,)).fetchall():
        admin_conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        admin_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def database(configure, cleanup):
    return configure(Database())


@pytest.fixture
def role(configure, cleanup):
    return configure(Role())


@pytest.fixture
def user(configure, cleanup):
    return configure(User())
