"""The `user` kind: a LOGIN role `<owner>_<name>`, a member of its project's role and of at most one
group `role`, with its own password and a DSN on one of the project's databases."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict, Field


from providers.description import referenced_name
from providers.credentials import Rotation, login_password
from providers.errors import Conflict, InvalidSpec
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed, ownership_marker
from providers.postgres import roles
from providers.postgres.client import INT4_MAX, admin_connection, ddl_lock, password_works, psycopg, sql
from providers.postgres.database import Database
from providers.postgres.names import namespaced_role, tenant_role


class UserSpec(BaseModel):
    """Params of a `user` (a LOGIN role). Everything updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The `name` of a `role` declaration of the same project this user joins.
    role: str | None = None
    #: The `name` of the project's database declaration the DSN points at (default: the project's name).
    database: str | None = None
    connection_limit: int = Field(default=-1, ge=-1, le=INT4_MAX, alias="connectionLimit")
    #: Change it to change the password in place (a new random one, or a new derivation).
    rotation: Rotation = None


class User(roles.ProjectRoleKind):
    """A LOGIN role `<owner>_<name>`, member of the project's role and optionally of a group `role`."""

    kind = "user"
    Spec = UserSpec
    attributes = ("host", "port", "user", "password", "database")
    secret_outputs = ("password",)
    references: ClassVar[dict[str, str]] = {"role": "role", "database": "database"}
    default_references = frozenset({"database"})  # the DSN points at the project's database

    def _observed(self, row: roles.RoleRow) -> Observed:
        return Observed(
            owner=row.owner,
            params={"connection_limit": row.connection_limit},
            attributes={"user": row.name, "login": row.logs_in, "member_of": list(row.member_of),
                        "isolated": not row.breached(row.owner or "")},
            workspace=row.workspace,
        )

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, UserSpec)
        return self._apply(instance, ident, spec, self._password(ident, props), props.get("stack", ""),
                           self._role(ident, props))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = UserSpec.model_validate(new.get("params") or {})
        return self._apply(instance, ident, spec, self._password(ident, new, old), new.get("stack", ""),
                           self._role(ident, new))

    def drift(self, olds: dict[str, Any]) -> list[str]:
        changed = ([] if olds.get("login", True) else ["login"]) + (["isolated"] if olds.get("isolated") is False else [])
        if "member_of" in olds and olds.get("owner"):
            try:
                expected = self._groups(olds["owner"], UserSpec.model_validate(olds.get("params") or {}),
                                        self._role(Identity.from_props(olds), olds))
            except (InvalidSpec, ValueError):
                return changed  # a broken spec is reported by create/update, not by a pure diff
            changed += [] if sorted(olds["member_of"]) == expected else ["member_of"]
        return changed

    def _password(self, ident: Identity, new: dict[str, Any], old: dict[str, Any] | None = None) -> str:
        return login_password(ident, self.engine_name(ident.name, ident.owner, naming=ident.naming), new, old)

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool:
        return password_works(instance, user, password)

    @staticmethod
    def _groups(owner: str, spec: UserSpec, role: str | None) -> list[str]:
        return sorted([tenant_role(owner), *([role] if role else [])])

    @staticmethod
    def _database(ident: Identity, spec: UserSpec) -> str:
        """The database the user's DSN names, as this user's naming maps its declaration."""
        return Database.engine_name(spec.database or ident.owner, ident.owner, naming=ident.naming)

    @staticmethod
    def _role(ident: Identity, props: Mapping[str, Any]) -> str | None:
        """The group role the user is a member of: as its resource records it, else as this user's naming maps it."""
        role = (props.get("params") or {}).get("role")
        if not role:
            return None
        return referenced_name(props, "role") or namespaced_role(role, ident.owner, naming=ident.naming)

    def _apply(
        self, instance: SharedInstance, ident: Identity, spec: UserSpec, password: str, stack: str, role: str | None
    ) -> dict[str, Any]:
        """Check everything first (nothing changes on a conflict), then create or converge."""
        name, project = self.engine_name(ident.name, ident.owner, naming=ident.naming), tenant_role(ident.owner)
        database = self._database(ident, spec)
        groups = self._groups(ident.owner, spec, role)
        with admin_connection(instance) as conn, ddl_lock(conn):
            row = self._claim(conn, ident, name)
            roles.refuse_superuser_powers(conn, row)
            project_row = self._check_project_role(conn, ident, project)
            if spec.role:
                self._check_group(conn, ident, spec.role, role)
            # One transaction: a role never exists without its marker, nor a login with the project's grants
            # but none of devstack's (a call cut short would leave one that every later up refuses).
            with conn.transaction():
                if project_row is None:
                    # The `database` that owns this role may not exist yet (Pulumi creates in parallel):
                    # a NOLOGIN placeholder it adopts later, under the same marker.
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(project)))
                    roles.comment_role(conn, project, ownership_marker(ident, stack))
                if row is None:
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
                conn.execute(
                    sql.SQL("ALTER ROLE {} WITH LOGIN INHERIT CONNECTION LIMIT {} VALID UNTIL 'infinity' PASSWORD {}").format(
                        sql.Identifier(name), sql.Literal(spec.connection_limit), roles.password_literal(conn, name, password)
                    )
                )
                roles.set_memberships(conn, roles.role_row(conn, name), groups)
                roles.comment_role(conn, name, roles.kind_marker(ident, stack))
                roles.contain(conn, roles.role_row(conn, name), ident.owner)
        return {
            "host": instance.host, "port": instance.port, "user": name, "password": password,
            "database": database, "login": True, "member_of": groups, "passwordInSync": True, "isolated": True,
        }

    def _check_project_role(self, conn: psycopg.Connection, ident: Identity, project: str) -> roles.RoleRow | None:
        row = roles.role_row(conn, project)
        if row is not None and (row.owner != ident.owner or row.marker_kind != roles.PROJECT_ROLE):
            raise Conflict(
                "create", f"{self.kind} {ident}",
                f"the project's role {project!r} exists but belongs to "
                + (f"project {row.owner!r}" if row.owner else "something devstack does not manage"),
                "rename the project or that role; nothing was changed",
            )
        return row

    def _check_group(self, conn: psycopg.Connection, ident: Identity, declared: str, group: str) -> None:
        row = roles.role_row(conn, group)
        if row is None or row.owner != ident.owner or row.marker_kind != "role":
            cause = "it does not exist" if row is None else "it is not a `role` of this project"
            raise InvalidSpec(
                "create", f"{self.kind} {ident}", f"params.role names {declared!r} (postgres role {group!r}) but {cause}",
                f"declare `kind: role, name: {declared}` on this instance in project {ident.owner!r}",
            )
