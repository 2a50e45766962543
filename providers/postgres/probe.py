"""`devstack doctor`'s look at a PostgreSQL server: the admin logs in, is a superuser or has CREATEDB and
CREATEROLE (its mode, and what it cannot do then), and nobody else gets in without a password."""

from __future__ import annotations

import secrets

from providers.engine import PROBE_TIMEOUT, Probed, Rejected, Unfit
from providers.errors import first_line
from providers.instances import SharedInstance
from providers.postgres.client import (ADMIN_NEEDS, FEATURES, LIMITED_MODE, SUPERUSER_MODE, admin_fix, admin_mode,
                                      connect_params, psycopg)

#: The databases a server makes for itself, noted when they let every role in. Not a problem that fails
#: the report: devstack does not change a server-wide grant of a server it does not run (the local engine
#: revokes it itself), and a project's role there reaches no other project's data, only the catalogs it
#: sees from its own database too.
SERVER_DATABASES = ("postgres", "template1")


def open_database(database: str) -> str:
    """The note on a server database PUBLIC may still connect to."""
    return (f"PUBLIC has CONNECT on the server's database `{database}`: every project's role can log in there "
            f"(and take devstack's DDL lock on `postgres`); close it as a superuser: "
            f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC")


def probe(instance: SharedInstance) -> Probed:
    """The server's version, with a note per server database anyone may connect to; Rejected, Unfit."""
    try:
        conn = psycopg.connect(**connect_params(instance), user=instance.admin_user,
                               password=instance.password(), dbname="postgres", connect_timeout=int(PROBE_TIMEOUT))
    except psycopg.OperationalError as err:
        if "authentication failed" in str(err) or "password" in str(err):
            raise Rejected(first_line(err)) from err
        raise
    with conn:
        mode = admin_mode(conn)
        if mode is None:
            raise Unfit(f"{instance.admin_user!r} is neither a superuser nor has CREATEDB and CREATEROLE ({ADMIN_NEEDS})",
                        admin_fix(instance))
        version = str(conn.execute("SHOW server_version").fetchone()[0])
        opened = [name for name in SERVER_DATABASES if conn.execute(
            "SELECT has_database_privilege('public', datname, 'CONNECT') FROM pg_database WHERE datname = %s",
            [name]).fetchone() in ((True,),)]
        limits = () if mode == SUPERUSER_MODE else (limited_admin(conn, instance),)
    _asks_for_passwords(instance)
    return Probed(version, tuple(open_database(name) for name in opened) + limits, mode=mode)


def limited_admin(conn: psycopg.Connection, instance: SharedInstance) -> str:
    """The note on an admin with CREATEDB and CREATEROLE but not SUPERUSER: what it cannot do; Unfit when it
    cannot act as a project's role at all."""
    admin, modern = instance.admin_user, FEATURES["role_grant_options"](conn.info.server_version // 10000)
    inherits, signals = conn.execute("SELECT rolinherit, pg_has_role('pg_signal_backend', 'USAGE') FROM pg_roles "
                                     "WHERE rolname = current_user").fetchone()
    if not (inherits or modern):  # before 16 a membership grants privileges only to a role that inherits
        raise Unfit(f"{admin!r} is not a superuser and has NOINHERIT, so being made a member of a project's role "
                    "(how devstack acts as it) gives it none of that role's privileges", f"ALTER ROLE {admin} INHERIT")
    cannot = ["take back SUPERUSER, REPLICATION or BYPASSRLS given to a project's role outside devstack",
              "end a superuser's session in a database it drops (the drop then fails, naming it)"]
    if not signals:
        cannot.append("end another role's session there but the project's own roles' "
                      f"(GRANT pg_signal_backend TO {admin} lets it)")
    if modern:
        cannot.append("alter or drop a role another admin made, unless that admin grants it ADMIN OPTION on it")
    return (f"admin mode {LIMITED_MODE}: {admin!r} is not a superuser; devstack makes it a member of a "
            f"project's role for the time it acts as that role, and it cannot: {'; '.join(cannot)}")


def _asks_for_passwords(instance: SharedInstance) -> None:
    """Unfit when the admin gets in with a wrong password: `trust` in pg_hba.conf lets anyone in as any
    role, past every tenant's password."""
    try:
        psycopg.connect(**connect_params(instance), user=instance.admin_user,
                        password=f"wrong-{secrets.token_hex(8)}", dbname="postgres", connect_timeout=int(PROBE_TIMEOUT)).close()
    except psycopg.OperationalError:
        return
    raise Unfit("so does anyone with a wrong password (`trust` in pg_hba.conf): every tenant's database is open "
                "to them as any role, whatever its password",
                "authenticate host connections with scram-sha-256 in pg_hba.conf, then SELECT pg_reload_conf()")
