"""The preview warns of the data the next `up` drops: a removed `purge: true` entry (real CLI, real PostgreSQL)."""

from __future__ import annotations

from tests.e2e.conftest import changes, e2e_stack, write_project
from tests.e2e.test_postgres_database import database_exists, pg_instance
from tests.e2e.test_postgres_database import projects  # noqa: F401 - the fixture, with its clean-up


def test_a_removed_purge_entry_is_warned_of_and_a_retained_one_is_not(project_dir, offline_env, pulumi_command,
                                                                      admin, projects):  # noqa: F811
    a = projects[0]
    db = a.replace("-", "_")
    purged = {"uses": "pg", "kind": "database", "purge": True}
    retained = {"uses": "pg", "kind": "database", "name": f"{a}-aux"}
    files = [write_project(project_dir, a, [purged, retained])]
    stack = e2e_stack(project_dir, offline_env, pulumi_command, {"pg": pg_instance(admin)}, files,
                      {"pgAdmin": admin["postgres"].password})
    up = stack.up(on_output=print)
    assert changes(up) == {"create": 5}  # stack, workspace, project, 2 databases
    assert "no longer declared" not in up.stdout

    write_project(project_dir, a, [])
    preview = stack.preview(on_output=print)
    assert changes(preview) == {"delete": 2}
    warnings = [line for line in preview.stdout.splitlines() if "no longer declared" in line]
    assert warnings and all(f"project {a}: database {a!r} of instance pg (postgres/pg/database/{a}@{a})" in line
                            and "the next `pulumi up` drops it and its data" in line for line in warnings)
    assert not any(f"{a}-aux" in line for line in warnings)  # retained: its removal drops nothing

    stack.up(on_output=print)  # what the warning said: the purged database goes, the retained one stays
    assert not database_exists(admin, db) and database_exists(admin, f"{db}_aux")
