"""A small service: notes stored in PostgreSQL, reached through DATABASE_URL as devstack hands it over
(`devstack exec notes api -- python -m ...`, or the pytest fixture in its tests)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import psycopg

SCHEMA = """CREATE TABLE IF NOT EXISTS notes (
    id bigserial PRIMARY KEY,
    body text NOT NULL CHECK (body <> ''),
    created timestamptz NOT NULL DEFAULT clock_timestamp()
)"""


def connect(env: Mapping[str, str] = os.environ) -> psycopg.Connection:
    """A connection to the service's database, its table made if missing."""
    conn = psycopg.connect(env["DATABASE_URL"], autocommit=True)
    conn.execute(SCHEMA)
    return conn


def add(conn: psycopg.Connection, body: str) -> int:
    """Store a note; its id."""
    row = conn.execute("INSERT INTO notes (body) VALUES (%s) RETURNING id", (body,)).fetchone()
    return row[0]


def recent(conn: psycopg.Connection, limit: int = 10) -> list[str]:
    """The latest notes' bodies, newest first."""
    rows = conn.execute("SELECT body FROM notes ORDER BY created DESC, id DESC LIMIT %s", (limit,)).fetchall()
    return [body for (body,) in rows]
