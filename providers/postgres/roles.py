"""PostgreSQL roles as all three kinds handle them: reading one with its marker, keeping it inside its
project, releasing and dropping it.

A project's own LOGIN role (the `database` kind's) carries the plain ownership
marker; a group `role` or a login `user` also records its kind in the marker,
so one can never be adopted as the other. Passwords reach the server only as
SCRAM verifiers computed client-side by libpq, so no plaintext password can
show up in a server log line.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from providers.base import KindProvider
from providers.errors import Conflict, NotFound, Unsupported
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed, marker_field, marker_owner, ownership_marker
from providers.postgres.client import (
    ENGINE_NAME, FEATURES, TENANT_LOCK_WAIT, admin_connection, ddl_lock, is_superuser, psycopg, refusal, server_major,
    sql, tenant_database,
)
from providers.postgres.names import namespaced_role, tenant_role

#: The namespace roles, users and databases' login roles share (KindProvider.namespace).
ROLE_NAMESPACE = "role"
#: The marker kind of a project's own login role (written by `database`, no "kind" key).
PROJECT_ROLE = "database"


def kind_marker(ident: Identity, stack: str) -> str:
    """The ownership marker of a `role` or `user`: the base marker plus the kind."""
    return json.dumps({**json.loads(ownership_marker(ident, stack)), "kind": ident.kind}, sort_keys=True)


@dataclass(frozen=True)
class RoleRow:
    """A role as pg_roles shows it, with its parsed ownership marker."""

    name: str
    login: bool
    inherit: bool
    connection_limit: int
    comment: str | None
    #: (name, marker) of each role it is a member of: what it inherits.
    groups: tuple[tuple[str, str | None], ...] = ()
    #: Server-wide attributes it has (SUPERUSER, CREATEROLE ...): devstack gives a tenant role none.
    powers: tuple[str, ...] = ()
    #: (name, marker) of each role that is a member of it, so inherits what it may do (the admin and
    #: superusers left out).
    members: tuple[tuple[str, str | None], ...] = ()
    #: Its password has expired (VALID UNTIL in the past): it no longer logs in with any.
    expired: bool = False

    @property
    def logs_in(self) -> bool:
        """LOGIN, and a password that has not expired."""
        return self.login and not self.expired

    @property
    def member_of(self) -> tuple[str, ...]:
        """The names of its groups."""
        return tuple(group for group, _ in self.groups)

    def breached(self, owner: str) -> bool:
        """Whether it reaches past project `owner`: a server-wide power, a member from outside the project,
        or membership of a role from outside it (another project's, or a predefined one such as
        pg_read_server_files, which reads any file the server can)."""
        return bool(self.powers) or any(marker_owner(comment) != owner for _, comment in self.members + self.groups)

    @property
    def owner(self) -> str | None:
        return marker_owner(self.comment)

    @property
    def workspace(self) -> str | None:
        return marker_field(self.comment, "stack")

    @property
    def marker_kind(self) -> str:
        return marker_kind(self.comment)


def marker_kind(comment: str | None) -> str:
    """The kind a role's marker records: `role`, `user`, or (none recorded) the project's own role."""
    try:
        return str(json.loads(comment or "").get("kind", PROJECT_ROLE))
    except (ValueError, AttributeError):
        return PROJECT_ROLE


def role_row(conn: psycopg.Connection, name: str) -> RoleRow | None:
    """The role `name`, or None when it does not exist (not found is a value, not an error)."""
    row = conn.execute(
        """
        SELECT r.rolcanlogin, r.rolinherit, r.rolconnlimit, shobj_description(r.oid, 'pg_authid'),
               ARRAY(SELECT json_build_array(g.rolname, shobj_description(g.oid, 'pg_authid'))::text
                     FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                     WHERE m.member = r.oid ORDER BY 1),
               ARRAY_REMOVE(ARRAY[CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
                                  CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
                                  CASE WHEN r.rolreplication THEN 'REPLICATION' END,
                                  CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END], NULL),
               -- Members, but the admin (PostgreSQL 16 makes a non-superuser creator one) and superusers,
               -- who reach everything anyway.
               ARRAY(SELECT json_build_array(u.rolname, shobj_description(u.oid, 'pg_authid'))::text
                     FROM pg_auth_members m JOIN pg_roles u ON u.oid = m.member
                     WHERE m.roleid = r.oid AND u.rolname <> current_user AND NOT u.rolsuper ORDER BY 1),
               coalesce(r.rolvaliduntil < now(), false)
        FROM pg_roles r WHERE r.rolname = %s
        """,
        (name,),
    ).fetchone()
    if row is None:
        return None
    groups = tuple(tuple(json.loads(group)) for group in row[4])
    members = tuple(tuple(json.loads(member)) for member in row[6])
    return RoleRow(name, row[0], row[1], row[2], row[3], groups, tuple(row[5]), members, row[7])


#: Powers only a superuser may take back: an admin that is not one may not even name them in ALTER ROLE.
SUPERUSER_POWERS = frozenset({"SUPERUSER", "REPLICATION", "BYPASSRLS"})


def contain(conn: psycopg.Connection, row: RoleRow, owner: str) -> None:
    """Take back what was granted outside devstack to reach past the project (see RoleRow.breached)."""
    if row.powers:
        refuse_superuser_powers(conn, row)
        # The names come from role_row's fixed list, never from the server's text.
        powers = sql.SQL(" ").join(sql.SQL("NO" + power) for power in row.powers)
        conn.execute(sql.SQL("ALTER ROLE {} WITH {}").format(sql.Identifier(row.name), powers))
    for member, comment in row.members:
        if marker_owner(comment) != owner:
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(row.name), sql.Identifier(member)))
    for group, comment in row.groups:
        if marker_owner(comment) != owner:
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), sql.Identifier(row.name)))


def refuse_superuser_powers(conn: psycopg.Connection, row: RoleRow | None) -> None:
    """Unsupported, before anything changes, when `row` has a power only a superuser may take back and the
    admin is not one: PostgreSQL then refuses it every ALTER ROLE of that role."""
    kept = sorted(SUPERUSER_POWERS.intersection(row.powers if row else ()))
    if kept and not is_superuser(conn):
        raise Unsupported("contain", f"role {row.name!r}", f"it was given {', '.join(kept)} outside devstack, which "
                          f"only a superuser may take back, and the admin {conn.info.user!r} is not one",
                          f"have a superuser run ALTER ROLE {row.name} WITH {' '.join('NO' + p for p in kept)}, then "
                          "run it again; nothing was changed")


def password_literal(conn: psycopg.Connection, role: str, password: str) -> sql.Literal:
    """A SCRAM verifier computed by libpq: the server never sees the plaintext."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return sql.Literal(verifier.decode())


def set_password(conn: psycopg.Connection, role: str, password: str) -> None:
    """The project's role logs in with `password`, whatever was changed out of band (an expiry, a limit)."""
    conn.execute(
        sql.SQL("ALTER ROLE {} WITH LOGIN CONNECTION LIMIT -1 VALID UNTIL 'infinity' PASSWORD {}").format(
            sql.Identifier(role), password_literal(conn, role, password)
        )
    )


def comment_role(conn: psycopg.Connection, role: str, marker: str) -> None:
    conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(sql.Identifier(role), sql.Literal(marker)))


def set_memberships(conn: psycopg.Connection, row: RoleRow, expected: Iterable[str]) -> None:
    """Grant the expected group memberships and revoke every other one."""
    wanted = set(expected)
    member = sql.Identifier(row.name)
    for group in sorted(wanted - set(row.member_of)):
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), member))
    for group in sorted(set(row.member_of) - wanted):
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), member))


@contextmanager
def acting_as(conn: psycopg.Connection, *names: str | None) -> Iterator[None]:
    """Let the admin act as these roles for the block: hand one a database, alter and drop what it owns,
    reassign and drop what it owns elsewhere, end its sessions.

    A superuser may anyway. An admin with CREATEDB and CREATEROLE (managed
    PostgreSQL's) may only as a member of the role, so it is made one for the
    block and no longer (GRANT role TO CURRENT_USER, with INHERIT and SET on
    16 and later, where its own ADMIN OPTION on a role it created gives
    neither), as the Terraform provider does. A membership it already had is
    left alone; a role dropped in the block takes its membership with it.
    """
    if is_superuser(conn):
        yield
        return
    modern = FEATURES["role_grant_options"](server_major(conn))
    options = sql.SQL(" WITH INHERIT TRUE, SET TRUE" if modern else "")
    wanted = [name for name in dict.fromkeys(names) if name]
    granted: list[str] = []
    refused = None  # the role whose GRANT the server refused, if that is what failed
    try:
        for (name,) in conn.execute(_NOT_ACTING_AS.format(may_set="SET" if modern else "MEMBER"), (wanted,)).fetchall():
            refused = name
            conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(name)) + options)
            granted.append(name)
        refused = None
        yield
    except psycopg.errors.InsufficientPrivilege as err:
        _stop_acting_as(conn, granted, quietly=True)
        acting = ", ".join(repr(name) for name in ([refused] if refused else wanted))
        raise Unsupported("act as", f"role {acting}", f"PostgreSQL refused the admin {conn.info.user!r}, which is not "
                          f"a superuser: {refusal(err)}",
                          "on PostgreSQL 16 and later a CREATEROLE admin needs ADMIN OPTION on a role another admin "
                          f"made (as that admin: GRANT {refused or '<role>'} TO {conn.info.user} WITH ADMIN OPTION); "
                          "or give shared.<instance>.adminUser SUPERUSER") from err
    except BaseException:
        _stop_acting_as(conn, granted, quietly=True)
        raise
    _stop_acting_as(conn, granted)


#: The roles of a list the admin does not yet act as: without their privileges, or unable to SET ROLE to them.
_NOT_ACTING_AS = ("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) "
                  "AND NOT (pg_has_role(oid, 'USAGE') AND pg_has_role(oid, '{may_set}')) ORDER BY 1")


def _stop_acting_as(conn: psycopg.Connection, granted: list[str], quietly: bool = False) -> None:
    """Revoke the memberships acting_as granted, those of roles still there. `quietly` when another error
    is on its way: a membership left behind is no breach (role_row leaves the admin out), only untidy."""
    if not granted or conn.closed or conn.broken:
        return
    try:
        for (name,) in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1",
                                    (granted,)).fetchall():
            conn.execute(sql.SQL("REVOKE {} FROM CURRENT_USER").format(sql.Identifier(name)))
    except psycopg.Error:
        if not quietly:
            raise


def release_role(instance: SharedInstance, conn: psycopg.Connection, role: str, heir: str | None,
                  spare: str | None = None) -> None:
    """Make `role` droppable: hand what it owns to `heir` and revoke its privileges, in every database
    but `spare` (one about to be dropped whole).

    REASSIGN/DROP OWNED act on one database at a time; pg_shdepend tells which
    databases hold anything of the role. Objects go to the project's role (the
    data stays with the project's database); only grants are dropped. A database
    that refuses sessions or keeps a lock past TENANT_LOCK_WAIT is a Conflict.
    """
    rows = conn.execute(
        """
        SELECT DISTINCT d.datname, d.datallowconn, shobj_description(d.oid, 'pg_database'), r.rolname,
                        shobj_description(r.oid, 'pg_authid')
        FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = d.datdba
        WHERE s.refclassid = 'pg_authid'::regclass
          AND s.refobjid = (SELECT oid FROM pg_roles WHERE rolname = %s) AND d.datname NOT IN ('postgres', %s)
        """,
        (role, spare or ""),
    ).fetchall()
    for database, allows_sessions, *marks in rows:
        holder = database_owner(*marks)
        where = f"database {database!r} " + (f"of project {holder!r}" if holder else "(not devstack's)")
        if not allows_sessions:
            raise Conflict("release", f"role {role!r}", f"{where} holds grants to it and refuses every session "
                           "(ALLOW_CONNECTIONS false)", f"run it again once {where} lets sessions in (the next "
                           "up of its workspace does)")
        with tenant_database(instance, database) as other, _bounded(role, where):
            _reassign_and_drop_owned(other, role, heir)
    with _bounded(role, "another project"):
        _reassign_and_drop_owned(conn, role, heir)  # also revokes grants on shared objects (databases)


def drop_role(instance: SharedInstance, conn: psycopg.Connection, role: str, heir: str | None) -> None:
    """Release `role` (see release_role), then drop it. A grant another project made meanwhile (one not
    yet committed is invisible to the release, and holds the role) is released once more."""
    for attempt in (1, 2):
        release_role(instance, conn, role, heir)
        with _bounded(role, "another project"):
            try:
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                return
            except psycopg.errors.DependentObjectsStillExist:
                if attempt == 2:
                    raise Conflict("release", f"role {role!r}", "another project granted it something again meanwhile",
                                   "run it again") from None


@contextmanager
def _bounded(role: str, where: str) -> Iterator[None]:
    """Releasing `role`, under a wait of at most TENANT_LOCK_WAIT for a lock (ddl_lock's, or set on a
    connection of its own): another project holding one on `role`, or on what it owns or was granted in
    `where` (a transaction left open), and its catalog change racing ours, are a Conflict naming it."""
    hint = f"run it again once {where} lets it"
    try:
        yield
    except psycopg.errors.LockNotAvailable:
        raise Conflict("release", f"role {role!r}", f"a session of {where} held a lock on it, or on what it owns or "
                       f"was granted there, for over {TENANT_LOCK_WAIT}", hint) from None
    except psycopg.errors.InternalError_ as err:
        if "concurrently updated" not in str(err):
            raise
        raise Conflict("release", f"role {role!r}", f"{where} changed the role's grants meanwhile", hint) from None


def _reassign_and_drop_owned(conn: psycopg.Connection, role: str, heir: str | None) -> None:
    if heir is not None:
        conn.execute(sql.SQL("REASSIGN OWNED BY {} TO {}").format(sql.Identifier(role), sql.Identifier(heir)))
    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))


def database_owner(marker: str | None, owner_role: str, role_marker: str | None) -> str | None:
    """The project a database belongs to: its owning role's when that is a project's own role, else the
    one its COMMENT names. Only the admin may comment on a role, while the database's owner (the tenant)
    may rewrite the database's comment to anything, another project included; and a create cut between
    CREATE DATABASE and its COMMENT leaves none (a project role is only ever made with its marker)."""
    owner = marker_owner(role_marker)
    if owner and marker_kind(role_marker) == PROJECT_ROLE and owner_role == tenant_role(owner):
        return owner
    return marker_owner(marker)


class ProjectRoleKind(KindProvider):
    """What `role` and `user` share: the `<owner>_<name>` namespace, the kind marker, the release on drop."""

    engine = ENGINE_NAME
    # Roles and users are one PostgreSQL namespace: a role and a user of one name are one object.
    namespace = ROLE_NAMESPACE
    logins = True

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return namespaced_role(name, owner, naming=naming)

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        with admin_connection(instance) as conn, ddl_lock(conn, shared=True):
            row = role_row(conn, self.engine_name(ident.name, ident.owner, naming=ident.naming))
        return None if row is None else self._observed(row)

    def _observed(self, row: RoleRow) -> Observed:
        raise NotImplementedError

    def _claim(self, conn: psycopg.Connection, ident: Identity, name: str, verb: str = "create") -> RoleRow | None:
        """The existing role `name` when it is ours and of this kind; None when free; Conflict otherwise."""
        row, kind = role_row(conn, name), self.kind
        if row is None:
            return None
        if row.owner != ident.owner:
            raise self._conflict(verb, ident, Observed(owner=row.owner))
        if row.marker_kind != kind:
            raise Conflict(
                verb, f"{self.kind} {ident}",
                f"{name!r} already exists as project {ident.owner!r}'s {row.marker_kind}, not as a {kind}",
                f"give one of the two declarations another `name`, or, if this declaration was that {row.marker_kind} "
                f"before its kind changed, drop the {row.marker_kind} first: declare it again with `purge: true` and "
                f"run `pulumi up`, remove it and run `pulumi up`, then add the {kind}; nothing was changed",
            )
        return row

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        name, project = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        with admin_connection(instance) as conn, ddl_lock(conn):
            if self._claim(conn, ident, name, "drop") is None:
                raise NotFound("drop", f"{self.kind} {ident}", "it does not exist")
            heir = project if project_role_is_ours(conn, ident) else None
            with acting_as(conn, name, heir):  # REASSIGN and DROP OWNED act as both
                drop_role(instance, conn, name, heir)
            _drop_unused_placeholder(conn, ident)


def project_role_is_ours(conn: psycopg.Connection, ident: Identity) -> bool:
    row = role_row(conn, tenant_role(ident.owner))
    return row is not None and row.owner == ident.owner and row.marker_kind == PROJECT_ROLE


def _drop_unused_placeholder(conn: psycopg.Connection, ident: Identity) -> None:
    """Drop the project role a `user` created ahead of its `database` once nothing uses it.

    A placeholder is NOLOGIN (a `database` makes it LOGIN when it adopts it),
    owns no database and has no members left.
    """
    project = tenant_role(ident.owner)
    row = role_row(conn, project)
    if row is None or row.login or row.owner != ident.owner or row.marker_kind != PROJECT_ROLE:
        return
    in_use = conn.execute(
        """
        SELECT 1 FROM pg_roles r WHERE r.rolname = %s AND (
            EXISTS (SELECT 1 FROM pg_database d WHERE d.datdba = r.oid)
            OR EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.roleid = r.oid)
            OR EXISTS (SELECT 1 FROM pg_shdepend s WHERE s.refobjid = r.oid AND s.refclassid = 'pg_authid'::regclass))
        """,
        (project,),
    ).fetchone()
    if not in_use:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(project)))
