"""`devstack env`: a service's environment from the stack outputs, and the warnings when those
may be stale or not known yet."""

from __future__ import annotations

import re

import pytest
from psycopg import sql

from tests.devstack.conftest import fresh_name
from tests.devstack.stacks import configure_stack, pg, write


def test_env_warns_while_the_last_up_failed(sandbox, admin, local_shared, names):
    """Pulumi keeps the outputs of the last up that finished: after a failed one (which may have rotated
    a password already) the environment may be stale, and `env` must say so."""
    from pulumi import automation as auto

    a, _ = names
    service = {"api": {"uses": ["pg"], "env": {"import": [{"from": "pg/database", "vars": {"PGUSER": "user"}}]}}}
    files = [write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)]
    stack = configure_stack(sandbox, "stale", local_shared, admin, files)
    stack.up()
    fine = sandbox.cli("env", a, "api", "-w", "stale")
    assert fine.returncode == 0 and "warning" not in fine.stderr
    write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True},
                       {"uses": "pg", "kind": "database", "name": "other", "params": {"locale": "xx_YY.UTF-8"}}],
          services=service)
    with pytest.raises(auto.errors.CommandError):
        stack.up()
    stale = sandbox.cli("env", a, "api", "-w", "stale")
    assert stale.returncode == 0 and "warning: the last `pulumi up` failed" in stale.stderr
    write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)
    stack.up()
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "stale").stderr
    stack.destroy()


def test_env_warns_while_a_refresh_found_a_password_changed_behind_pulumis_back(sandbox, admin, local_shared, names):
    """The outputs keep the password the resource set; once it is changed in the engine, a refresh marks
    the resource (passwordInSync false) and `env` had handed out the old one without a word."""
    a, _ = names
    service = {"api": {"uses": ["pg"], "env": {"import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}}]}}}
    files = [write(sandbox, a, [{"uses": "pg", "kind": "database", "purge": True}], services=service)]
    stack = configure_stack(sandbox, "drift", local_shared, admin, files)
    stack.up()
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "drift").stderr
    with pg(admin) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD 'changed-by-hand'").format(sql.Identifier(a.replace("-", "_"))))
    stack.refresh()
    stale = sandbox.cli("env", a, "api", "-w", "drift")
    assert stale.returncode == 0
    assert f"the password of postgres/pg/database/{a}@{a} no longer works" in stale.stderr, stale.stderr
    stack.up()  # sets it again
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "drift").stderr
    # Dropped behind Pulumi's back: the refresh keeps the entry as stale, and env says so.
    with pg(admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(a.replace("-", "_"))))
    stack.refresh()
    gone = sandbox.cli("env", a, "api", "-w", "drift")
    assert gone.returncode == 0
    assert re.search(rf"a refresh did not find postgres/pg/database/{a}@{a} \(last seen \d{{4}}-", gone.stderr), \
        gone.stderr
    stack.up()  # makes it again
    assert "warning" not in sandbox.cli("env", a, "api", "-w", "drift").stderr
    stack.destroy()


def test_env_refuses_values_a_targeted_update_left_unknown(scratch):
    """A verb's targeted update leaves the project's other new declarations out; the stack outputs
    then hold Pulumi's placeholder for their attributes, which must not reach a service as a value."""
    entry, service = "  - {uses: cache, kind: acl_user}\n", ("services:\n  api:\n    env:\n      import:\n"
                                                             "        - from: cache/acl_user\n          vars: {RUSER: user}\n")
    scratch.file.write_text(scratch.file.read_text().replace("# Trailing comment", entry + service + "# Trailing comment"))
    assert scratch.verb("queue", "add", fresh_name())[0] == 0
    code, out, err = scratch.verb("env", scratch.project, "api", yes=False)
    assert code != 0 and "RUSER have no value yet" in err and "pulumi up" in err
    assert "04da6b54" not in out + err
    # The clean-up purges what is applied and takes the rest out.
    scratch.file.write_text(scratch.file.read_text().replace(entry, "").replace(service, ""))
