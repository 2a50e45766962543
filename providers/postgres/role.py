"""The `role` kind: a NOLOGIN group role `<owner>_<name>` a project's users can join."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


from providers.identity import Identity
from providers.instances import SharedInstance
from providers.postgres import roles
from providers.postgres.client import admin_connection, ddl_lock, sql
from providers.markers import Observed


class RoleSpec(BaseModel):
    """Params of a `role` (a NOLOGIN group role). Everything updates in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Whether the group itself inherits privileges of roles it is granted.
    inherit: bool = True


class Role(roles.ProjectRoleKind):
    """A NOLOGIN group role `<owner>_<name>` that a project's users can be members of."""

    kind = "role"
    Spec = RoleSpec
    attributes = ("host", "port", "role")
    name_attribute = "role"

    def _observed(self, row: roles.RoleRow) -> Observed:
        return Observed(owner=row.owner, params={"inherit": row.inherit}, workspace=row.workspace,
                        attributes={"role": row.name, "login": row.login, "isolated": not row.breached(row.owner or "")})

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, RoleSpec)
        return self._apply(instance, ident, spec, props.get("stack", ""))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        return self._apply(instance, ident, RoleSpec.model_validate(new.get("params") or {}), new.get("stack", ""))

    def drift(self, olds: dict[str, Any]) -> list[str]:
        # A group role that can log in, or reaches past the project, was changed out of band.
        return (["login"] if olds.get("login") else []) + (["isolated"] if olds.get("isolated") is False else [])

    def _apply(self, instance: SharedInstance, ident: Identity, spec: RoleSpec, stack: str) -> dict[str, Any]:
        """Create the group role when missing, then converge its settings and marker (idempotent)."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        with admin_connection(instance) as conn, ddl_lock(conn):
            claimed = self._claim(conn, ident, name)
            roles.refuse_superuser_powers(conn, claimed)
            with conn.transaction():  # never a role without its marker
                if claimed is None:
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
                inherit = sql.SQL("INHERIT" if spec.inherit else "NOINHERIT")
                conn.execute(sql.SQL("ALTER ROLE {} WITH NOLOGIN {}").format(sql.Identifier(name), inherit))
                roles.comment_role(conn, name, roles.kind_marker(ident, stack))
                roles.contain(conn, roles.role_row(conn, name), ident.owner)
        return {"host": instance.host, "port": instance.port, "role": name, "login": False, "isolated": True}
