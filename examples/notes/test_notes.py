"""The notes service against a PostgreSQL database of its own, made for this module by devstack's
pytest fixture (devstack_env) and dropped afterwards."""

from pathlib import Path

import psycopg
import pytest

import notes

pytestmark = pytest.mark.devstack_project(Path(__file__).with_name("devstack.yaml"))


@pytest.fixture(scope="module")
def conn(devstack_env):
    with notes.connect(devstack_env) as conn:
        yield conn


def test_a_note_is_stored_and_read_back(conn):
    notes.add(conn, "buy milk")
    assert notes.recent(conn)[0] == "buy milk"


def test_notes_come_newest_first(conn):
    for body in ("first", "second", "third"):
        notes.add(conn, body)
    assert notes.recent(conn, limit=3) == ["third", "second", "first"]


def test_an_empty_note_is_refused(conn):
    with pytest.raises(psycopg.errors.CheckViolation):
        notes.add(conn, "")


def test_the_database_is_the_workspaces_own(devstack_env, devstack_workspace):
    """A database and login named after the throwaway project; the password generated, never in a repr."""
    expected = devstack_workspace.project.replace("-", "_")
    with psycopg.connect(devstack_env["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (expected, expected)
    password = psycopg.conninfo.conninfo_to_dict(devstack_env["DATABASE_URL"])["password"]
    assert password != devstack_workspace.project and password not in repr(devstack_env)
