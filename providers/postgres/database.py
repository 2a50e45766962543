"""The `database` kind: a tenant database owned by its project's LOGIN role, closed to everyone else.

Every database of a project logs in as one role named after the project, made
with the first of them and dropped with the last. Ownership is judged by that
role's marker first (only an admin may comment on a role; the tenant may
rewrite its database's COMMENT), and the workspace is recorded in a setting
only an admin can write.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from providers import naming as naming_rules
from providers.base import KindProvider
from providers.credentials import Rotation, hashed_password, login_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound, first_line
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.markers import Observed, marker_field, marker_owner, ownership_marker
from providers.postgres import roles
from providers.postgres.client import (
    ENGINE_NAME, FEATURES, INT4_MAX, admin_connection, ddl_lock, is_superuser, password_works, psycopg, refusal,
    server_major, sql,
)
from providers.postgres.extensions import (
    EXTENSIONS_FIX, check_extensions, create_extensions, drop_extensions, extension_problems, managed_extensions,
)
from providers.postgres.names import identifier, tenant_role
from providers.postgres.role import Role

_EXTENSION = re.compile(r"[a-z0-9_][a-z0-9_-]*")


#: The encodings a PostgreSQL database can have (the server-side ones), as the server names them.
SERVER_ENCODINGS = (
    "SQL_ASCII EUC_JP EUC_CN EUC_KR EUC_TW EUC_JIS_2004 UTF8 MULE_INTERNAL LATIN1 LATIN2 LATIN3 LATIN4 LATIN5 "
    "LATIN6 LATIN7 LATIN8 LATIN9 LATIN10 WIN1256 WIN1258 WIN866 WIN874 KOI8R WIN1251 WIN1252 ISO_8859_5 "
    "ISO_8859_6 ISO_8859_7 ISO_8859_8 WIN1250 WIN1253 WIN1254 WIN1255 WIN1257 KOI8U"
).split()


def _spelling(name: str) -> str:
    # How the server compares encoding names: case and punctuation do not count ("utf-8" is UTF8).
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ENCODINGS = {_spelling(name): name for name in SERVER_ENCODINGS} | {"unicode": "UTF8"}


class DatabaseSpec(BaseModel):
    """Params of a `database`. Encoding and locale are fixed at creation; the rest updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    encoding: str = "UTF8"
    locale: str = "C.UTF-8"
    connection_limit: int = Field(default=-1, ge=-1, le=INT4_MAX, alias="connectionLimit")
    #: Extensions devstack installs (as admin) inside the database; sorted and unique.
    extensions: list[str] = Field(default_factory=list)
    #: Change it to change the project role's password in place (a new random one, or a new derivation).
    rotation: Rotation = None

    @field_validator("encoding")
    @classmethod
    def _server_encoding(cls, value: str) -> str:
        # Stored as the server reports it, so a refresh of `encoding: utf-8` reads no change
        # (which, encoding being fixed at creation, would mean a replace).
        try:
            return _ENCODINGS[_spelling(value)]
        except KeyError:
            raise ValueError(f"{value!r} is not a PostgreSQL server encoding (e.g. UTF8, LATIN1, SQL_ASCII)") from None

    @model_validator(mode="after")
    def _encoding_fits_locale(self) -> "DatabaseSpec":
        # The server refuses CREATE DATABASE when the locale's codeset is another encoding (C and
        # POSIX fit any; SQL_ASCII, for a superuser, any locale): said here, before a replacement
        # has dropped the old database.
        codeset = self.locale.partition(".")[2].partition("@")[0]
        wanted = _ENCODINGS.get(_spelling(codeset))
        if wanted and wanted != self.encoding and self.encoding != "SQL_ASCII":
            raise ValueError(f"encoding {self.encoding!r} does not fit locale {self.locale!r}, whose codeset is "
                             f"{wanted}: set locale: C (it fits any encoding), or encoding: {wanted}")
        return self

    @field_validator("extensions")
    @classmethod
    def _extension_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _EXTENSION.fullmatch(name):
                raise ValueError(f"{name!r} is not an extension name (lowercase letters, digits, '_' and '-')")
        return sorted(set(value))


class Database(KindProvider):
    """The project's LOGIN role plus a database owned by it, CONNECT revoked from PUBLIC.

    `read` reports in `isolated` whether PUBLIC and every other role are still kept out; a grant made
    outside Pulumi shows as drift, and the next update revokes it again.
    """

    engine = ENGINE_NAME
    kind = "database"
    Spec = DatabaseSpec
    login_per_owner = True  # every database of a project owns (and logs in as) the project's role
    create_only = frozenset({"encoding", "locale"})
    refusable_in_place = frozenset({"extensions"})  # one the server lacks, or not trusted
    attributes = ("host", "port", "user", "database", "password")
    secret_outputs = ("password",)

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        tenant_role(owner)  # the owner must map too: it names the role
        mapped = identifier(name) if naming == PREFIXED else naming_rules.postgres_identifier(name)
        if mapped in naming_rules.POSTGRES_SERVER_DATABASES:
            raise InvalidSpec("map", repr(name), f"every PostgreSQL server has a database {mapped!r} of its own; "
                              "choose another name")
        return mapped

    @classmethod
    def owner_objects(cls, host: str, port: int, owner: str) -> tuple[tuple[str, str, int, str, str], ...]:
        return (Role.object_named(host, port, tenant_role(owner)),)

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        assert isinstance(spec, DatabaseSpec)
        with admin_connection(instance) as conn:
            try:
                # The server resolves a collation's locale as CREATE DATABASE does; pg_temp and the
                # rollback leave nothing behind.
                with conn.transaction(force_rollback=True):
                    conn.execute(sql.SQL("CREATE COLLATION pg_temp.devstack_locale_probe (LOCALE = {})")
                                 .format(sql.Literal(spec.locale)))
            except psycopg.errors.InvalidParameterValue as err:
                return [("locale", f"the server has no locale {spec.locale!r} ({first_line(err)})",
                         "set params.locale to one the server has: `locale -a` on its machine; C.UTF-8 always works")]
            problems = extension_problems(conn, spec.extensions)
        return [("extensions", "; ".join(problems), EXTENSIONS_FIX)] if problems else []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        database = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_connection(instance) as conn, ddl_lock(conn, shared=True):
            row = conn.execute(
                """
                SELECT r.rolname, shobj_description(d.oid, 'pg_database'), shobj_description(r.oid, 'pg_authid'),
                       pg_encoding_to_char(d.encoding), d.datcollate, d.datconnlimit,
                       -- No ACL at all means the defaults, which let PUBLIC connect. Anyone but the
                       -- owner (PUBLIC, another project's role) let in is a breach. So is a template,
                       -- which any role that may create databases can copy, data and all.
                       NOT d.datistemplate AND
                       NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                                   WHERE a.grantee <> d.datdba AND a.privilege_type IN ('CONNECT', 'TEMPORARY')
                                     AND NOT {admins_connect}),
                       d.datallowconn, has_database_privilege(d.oid, 'CONNECT'), {recorded}
                FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba
                WHERE d.datname = %s
                """.format(recorded=RECORDED_WORKSPACES, admins_connect=ADMINS_CONNECT),
                (database,),
            ).fetchone()
            if row is None:
                return None
            (owner_role, marker, role_marker, encoding, collate, connection_limit, isolated, allows_sessions,
             admin_may_connect, recorded) = row
            owner = roles.database_owner(marker, owner_role, role_marker)
            params = {"encoding": encoding, "locale": collate, "connection_limit": connection_limit}
            logs_in = True
            if owner is not None:  # never open sessions in a database we do not manage
                # Its owner may turn ALLOW_CONNECTIONS off: then nobody gets in, admin too. An admin that is not
                # a superuser gets in by the CONNECT _converge grants it; without, the extensions stay as recorded.
                extensions = self._extensions(instance, conn, database) if allows_sessions and admin_may_connect else None
                if extensions is not None:
                    params["extensions"] = extensions
                row = roles.role_row(conn, owner_role)
                isolated = isolated and not row.breached(owner)
                # The login of the database's DSN: NOLOGIN, an expired password or a limit of the role's
                # own (0 refuses every session) break it while the password still matches.
                logs_in = allows_sessions and row.logs_in and row.connection_limit == -1
        # Its owner may remove or rewrite the comment: still the project's by its role, but a scan reads it.
        # Made before its workspace was recorded apart (or the record removed): the next up writes both.
        workspace = database_workspace(recorded)
        attributes = {"user": owner_role, "isolated": isolated, "login": logs_in,
                      "marked": owner is not None and marker_owner(marker) == owner and workspace is not None}
        return Observed(owner=owner, params=params, attributes=attributes, workspace=workspace)

    @staticmethod
    def _extensions(instance: SharedInstance, conn: psycopg.Connection, database: str) -> list[str] | None:
        """The extensions devstack installed there; None when its connection limit is reached, which holds
        an admin that is not a superuser out too (a purge cut short leaves it 0): then they stay as recorded."""
        try:
            return managed_extensions(instance, database)
        except EngineUnavailable as err:
            if is_superuser(conn) or "too many connections for database" not in str(err):
                raise
            return None

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, DatabaseSpec)
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        marker = ownership_marker(ident, props.get("stack", ""))
        with admin_connection(instance) as conn, ddl_lock(conn):
            # Re-checked under the lock: another stack may have taken the name since observe.
            self._check_database_owner(conn, ident, database)
            check_extensions(conn, ident, spec.extensions)
            password = self._joining_password(instance, conn, ident, role, props)
            made_role = self._ensure_role(conn, ident, role, password, marker)
            adopted = _database_exists(conn, database)
            with roles.acting_as(conn, role, _owner_role(conn, database)):
                self._create_database(instance, conn, ident, database, role, spec, marker, adopted, made_role)
        return self._attributes(instance, database, role, password)

    def _create_database(self, instance: SharedInstance, conn: psycopg.Connection, ident: Identity, database: str,
                         role: str, spec: DatabaseSpec, marker: str, adopted: bool, made_role: bool) -> None:
        """CREATE DATABASE (unless adopted), then converge it and its extensions; as its owner (acting_as)."""
        if not adopted:
            try:
                conn.execute(
                    sql.SQL(
                        "CREATE DATABASE {} OWNER {} ENCODING {} LOCALE {} TEMPLATE template0"
                    ).format(
                        sql.Identifier(database),
                        sql.Identifier(role),
                        sql.Literal(spec.encoding),
                        sql.Literal(spec.locale),
                    )
                )
            except (psycopg.errors.WrongObjectType, psycopg.errors.InvalidParameterValue) as err:
                if made_role:  # a role without its database would be left to nobody
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                raise InvalidSpec(
                    "create", f"database {ident}",
                    f"the server refused params.locale {spec.locale!r} with params.encoding {spec.encoding!r}: "
                    f"{first_line(err)}",
                    "set params.locale to a locale the server has (`locale -a` on its machine; C.UTF-8 always "
                    "works) whose codeset is the encoding; nothing was created",
                ) from err
        self._converge(conn, database, role, spec, marker, ident.owner)
        if adopted:  # what an earlier declaration had installed and this one no longer lists goes, as on update
            unlisted = set(managed_extensions(instance, database)) - set(spec.extensions)
            drop_extensions(instance, ident, database, sorted(unlisted), "create")
        create_extensions(instance, database, spec.extensions)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        password = login_password(ident, role, new, old)
        marker = ownership_marker(ident, new.get("stack", ""))
        spec = DatabaseSpec.model_validate(new.get("params") or {})
        removed = set((old.get("params") or {}).get("extensions") or []) - set(spec.extensions)
        with admin_connection(instance) as conn, ddl_lock(conn):
            # Re-checked under the lock: dropped (and maybe made anew by another project) since the observe.
            if not _database_exists(conn, database):
                raise NotFound("update", f"database {ident}", "it no longer exists",
                               "run `pulumi refresh`, then `pulumi up` to create it again")
            self._check_database_owner(conn, ident, database, "update")
            check_extensions(conn, ident, spec.extensions, "update")
            if password != old.get("password") or False in (old.get("passwordInSync"), old.get("login")):
                roles.set_password(conn, role, password)
            with roles.acting_as(conn, role, _owner_role(conn, database)):
                self._converge(conn, database, role, spec, marker, ident.owner)
                drop_extensions(instance, ident, database, sorted(removed))
                create_extensions(instance, database, spec.extensions)
        return self._attributes(instance, database, role, password)

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        database, role = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        with admin_connection(instance) as conn, ddl_lock(conn):
            if not _database_exists(conn, database):
                # A drop cut short after DROP DATABASE: its LOGIN role (with a password) must go too,
                # and then the drop is done (gc lists such a role as the database).
                if roles.project_role_is_ours(conn, ident) and not _owns_a_database(conn, role):
                    with roles.acting_as(conn, role):
                        roles.drop_role(instance, conn, role, None)
                    return
                raise NotFound("drop", f"database {ident}", "it does not exist")
            # Re-created by someone else since the last refresh: never drop theirs.
            self._check_database_owner(conn, ident, database, "drop")
            with roles.acting_as(conn, role, _owner_role(conn, database)):
                self._drop_database(instance, conn, ident, database, role)

    def _drop_database(self, instance: SharedInstance, conn: psycopg.Connection, ident: Identity, database: str,
                       role: str) -> None:
        """Drop a database of ours and, with the last one, its project's role; as its owner (acting_as)."""
        # The role goes with the last database it owns. Another project may have granted it something
        # in its own database: that goes first, so when that project keeps it from going (a lock held,
        # sessions refused) the database and its role are left whole for the next try.
        last = not _owns_a_database(conn, role, besides=database)
        if last:
            try:
                roles.release_role(instance, conn, role, None, spare=database)
            except Conflict as err:
                raise Conflict(err.verb, err.what, err.cause, err.hint + "; nothing was dropped") from None
        # Block new sessions, end only this database's sessions, then drop (a template cannot be dropped).
        conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false CONNECTION LIMIT 0").format(sql.Identifier(database)))
        with roles.acting_as(conn, *_project_sessions(conn, database, ident.owner)):
            conn.execute(_END_SESSIONS, (database,))
            force = sql.SQL(" WITH (FORCE)") if FEATURES["drop_database_force"](server_major(conn)) else sql.SQL("")
            try:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)) + force)
            except psycopg.errors.InsufficientPrivilege as err:  # a session an admin that is not a superuser may not end
                raise Conflict("drop", f"database {ident}", f"{refusal(err)}: a session there is not one the admin "
                               f"{conn.info.user!r} may end", "end it (pg_stat_activity names it), or GRANT "
                               f"pg_signal_backend TO {conn.info.user} (any but a superuser's), then run it again; the "
                               "database refuses new sessions meanwhile") from None
        if last and roles.role_row(conn, role) is not None:
            try:
                roles.drop_role(instance, conn, role, None)
            except Conflict as err:
                raise Conflict(err.verb, err.what, err.cause,
                               f"{err.hint}; the database was dropped and its login role is left until then: "
                               "`pulumi up` again drops it") from None

    def drift(self, olds: dict[str, Any]) -> list[str]:
        expected_user = tenant_role(olds["owner"]) if olds.get("owner") else None
        drifted = ["user"] if olds.get("user") not in (None, expected_user) else []
        # CONNECT or TEMPORARY granted to PUBLIC again: other projects' logins could get in.
        return drifted + [attribute for attribute in ("isolated", "login", "marked") if olds.get(attribute) is False]

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool:
        return password_works(instance, user, password)

    # --- steps -----------------------------------------------------------

    def _check_database_owner(self, conn: psycopg.Connection, ident: Identity, database: str, verb: str = "create") -> None:
        """Conflict when `database` exists with another project's marker (or none); under the DDL lock."""
        row = conn.execute(
            "SELECT shobj_description(d.oid, 'pg_database'), r.rolname, shobj_description(r.oid, 'pg_authid') "
            "FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = %s", (database,)
        ).fetchone()
        if row is not None and roles.database_owner(*row) != ident.owner:
            raise self._conflict(verb, ident, Observed(owner=roles.database_owner(*row)))

    @staticmethod
    def _joining_password(instance: SharedInstance, conn: psycopg.Connection, ident: Identity, role: str,
                          props: dict[str, Any]) -> str:
        """The password of the project's role as a database joins it: every database of the project logs
        in as that role, so one that has a legacy hashed password keeps it (the services of
        the other databases hold it) until a `rotation` or `credentials` says otherwise."""
        password = login_password(ident, role, props)
        unrotated = (props.get("params") or {}).get("rotation") is None  # a role with a legacy hash has none
        if props.get("credentials", "predictable") != "predictable" or not unrotated or roles.role_row(conn, role) is None:
            return password
        hashed = hashed_password(ident, role)
        return hashed if password_works(instance, role, hashed) else password

    def _ensure_role(self, conn: psycopg.Connection, ident: Identity, role: str, password: str, marker: str) -> bool:
        """Create the project's LOGIN role, or take over its existing one; True when it was created."""
        row = roles.role_row(conn, role)
        if row is not None and (row.owner != ident.owner or row.marker_kind != roles.PROJECT_ROLE):
            holder = (f"project {row.owner!r}" if row.owner and row.owner != ident.owner
                      else f"project {row.owner!r} as a {row.marker_kind}" if row.owner
                      else "something devstack does not manage")
            raise Conflict("create", f"database {ident}",
                           f"its project's login role {role!r} already exists in postgres instance "
                           f"{ident.instance!r} and belongs to {holder}",
                           "every database of a project logs in as a role named after the project, so the project "
                           "needs another name on this server; nothing was changed")
        roles.refuse_superuser_powers(conn, row)
        if row is not None:  # its password is the login of the databases it owns, whichever workspace's
            # Their own markers say whose they are (each update re-marks a database, never the role).
            for sibling, recorded in conn.execute(
                    "SELECT d.datname, {recorded} FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
                    "WHERE r.rolname = %s ORDER BY 1".format(recorded=RECORDED_WORKSPACES), (role,)).fetchall():
                self._refuse_elsewhere("create", ident, Observed(owner=ident.owner, workspace=database_workspace(recorded)),
                                       marker_field(marker, "stack"),
                                       held=f"its project's login role {role!r}, the login of database {sibling!r},")
        with conn.transaction():  # never a role without its marker, whatever cuts the call short
            if row is None:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), roles.password_literal(conn, role, password)
                    )
                )
            else:
                roles.set_password(conn, role, password)  # also turns a placeholder made by `user` into a LOGIN role
            roles.comment_role(conn, role, marker)
        return row is None

    def _converge(self, conn: psycopg.Connection, database: str, role: str, spec: DatabaseSpec, marker: str,
                  owner: str) -> None:
        """Bring owner, connection limit, grants, the owner role's reach and marker in line; each step is idempotent."""
        db = sql.Identifier(database)
        with conn.transaction():
            roles.contain(conn, roles.role_row(conn, role), owner)
            conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, sql.Identifier(role)))
            # Its owner may set both (a tenant can): a template others can copy, a database nobody can open.
            conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false ALLOW_CONNECTIONS true").format(db))
            conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(db, sql.Literal(spec.connection_limit)))
            conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
            for (grantee,) in conn.execute(_LET_IN, (database,)).fetchall():  # granted outside devstack
                conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM {}").format(db, sql.Identifier(grantee)))
            if not is_superuser(conn):  # it connects, to read and install extensions, by a grant of its own
                conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO CURRENT_USER").format(db))
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(db, sql.Literal(marker)))
            # Its workspace where only an admin writes: a setting of the admin's own role in the database.
            # Only a superuser may set a custom one; another admin records it in application_name, which
            # every admin session pins at login (ADMIN_SETTINGS), so it steers nothing.
            workspace = marker_field(marker, "stack") or ""
            setting, value = ((WORKSPACE_SETTING, workspace) if is_superuser(conn)
                              else ("application_name", f"{WORKSPACE_SETTING}={workspace}"))
            conn.execute(sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET {} = {}")
                         .format(db, sql.SQL(setting), sql.Literal(value)))

    @staticmethod
    def _attributes(instance: SharedInstance, database: str, role: str, password: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "user": role, "database": database, "password": password,
                "isolated": True, "login": True, "marked": True, "passwordInSync": True}


#: A grant of CONNECT to an admin (a superuser, or a role with CREATEDB and CREATEROLE, which may make itself a
#: member of any project's role anyway): how an admin that is not a superuser gets into a project's database.
ADMINS_CONNECT = """(a.privilege_type = 'CONNECT' AND EXISTS (
    SELECT 1 FROM pg_roles g WHERE g.oid = a.grantee AND (g.rolsuper OR (g.rolcreaterole AND g.rolcreatedb))))"""

#: Roles other than the owner granted CONNECT or TEMPORARY on a database: devstack grants none but an admin's CONNECT.
_LET_IN = """
    SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_database d, aclexplode(d.datacl) a
    WHERE d.datname = %s AND a.grantee NOT IN (0, d.datdba) AND a.privilege_type IN ('CONNECT', 'TEMPORARY')
      AND NOT {admins_connect}
""".format(admins_connect=ADMINS_CONNECT)

#: Ends the sessions in a database the admin may end: all for a superuser; else those of roles it acts as
#: (acting_as), or with pg_signal_backend any but a superuser's. DROP DATABASE ... WITH (FORCE) ends the
#: rest, or refuses.
_END_SESSIONS = """
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = %s AND pid <> pg_backend_pid()
      AND (current_setting('is_superuser') = 'on' OR pg_has_role(usesysid, 'USAGE')
           OR (pg_has_role('pg_signal_backend', 'USAGE')
               AND NOT EXISTS (SELECT 1 FROM pg_roles WHERE oid = usesysid AND rolsuper)))
"""


#: The workspaces recorded for a database in a setting of an admin's own role there (`devstack.workspace`),
#: which only an admin can write: its owner, the tenant, may rewrite the database's COMMENT at will.
RECORDED_WORKSPACES = r"""
    (SELECT array_agg(DISTINCT substring(c from '^(?:application_name=)?devstack\.workspace=(.*)$'))
     FROM pg_db_role_setting s JOIN pg_roles a ON a.oid = s.setrole, unnest(s.setconfig) c
     WHERE s.setdatabase = d.oid AND (a.rolsuper OR (a.rolcreaterole AND a.rolcreatedb))
       AND c ~ '^(application_name=)?devstack\.workspace=')
"""
#: The setting's name, and the prefix of an application_name recording it (see _converge).
WORKSPACE_SETTING = "devstack.workspace"


def database_workspace(recorded: list[str] | None) -> str | None:
    """The workspace recorded for a database (RECORDED_WORKSPACES); None when none or two admins' differ
    ("" when the declaration had none: recorded, and proving nothing)."""
    return recorded[0] if recorded and len(recorded) == 1 else None


def _owns_a_database(conn: psycopg.Connection, role: str, besides: str = "") -> bool:
    return conn.execute(
        "SELECT 1 FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = %s AND d.datname <> %s",
        (role, besides),
    ).fetchone() is not None


def _database_exists(conn: psycopg.Connection, database: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is not None


def _owner_role(conn: psycopg.Connection, database: str) -> str | None:
    """The role that owns `database` now (None when there is none): an admin that is not a superuser acts
    as it to hand the database to the project's role."""
    row = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (database,)).fetchone()
    return row[0] if row else None


def _project_sessions(conn: psycopg.Connection, database: str, owner: str) -> list[str]:
    """The roles of project `owner` with a session in `database` (its own, its users'): the roles whose
    sessions an admin that is not a superuser may end once it acts as them."""
    rows = conn.execute(
        "SELECT DISTINCT r.rolname, shobj_description(r.oid, 'pg_authid') FROM pg_stat_activity a "
        "JOIN pg_roles r ON r.oid = a.usesysid WHERE a.datname = %s AND NOT r.rolsuper ORDER BY 1", (database,),
    ).fetchall()
    return [name for name, comment in rows if marker_owner(comment) == owner]
