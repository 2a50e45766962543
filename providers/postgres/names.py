"""PostgreSQL engine names of devstack declarations: pure, and explicit about the rule a name breaks.

Databases are named after their declaration; a project's LOGIN role after the
project; its group roles and login users `<owner>_<name>`.
"""

from __future__ import annotations

import re

from providers import naming as naming_rules
from providers.errors import InvalidSpec
from providers.identity import PREFIXED

MAX_IDENTIFIER_BYTES = 63
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def identifier(name: str) -> str:
    """Map a devstack name to a PostgreSQL identifier, or raise InvalidSpec saying which rule it breaks."""
    mapped = name.replace("-", "_")
    if not mapped:
        raise InvalidSpec("map", repr(name), "a PostgreSQL identifier cannot be empty")
    if len(mapped.encode()) > MAX_IDENTIFIER_BYTES:
        raise InvalidSpec("map", repr(name), f"PostgreSQL identifiers are at most {MAX_IDENTIFIER_BYTES} bytes")
    if not _IDENTIFIER.fullmatch(mapped):
        raise InvalidSpec(
            "map", repr(name), "use lowercase letters, digits, '-' and '_', starting with a letter or '_'"
        )
    return mapped


def role_identifier(name: str) -> str:
    """`identifier`, for a role: PostgreSQL reserves `public`, `none` and every `pg_*` role name."""
    mapped = identifier(name)
    if mapped in ("public", "none") or mapped.startswith("pg_"):
        raise InvalidSpec("map", repr(name), f"PostgreSQL reserves the role name {mapped!r} "
                          "('public', 'none' and every 'pg_*' name)")
    return mapped


def tenant_role(owner: str) -> str:
    """The LOGIN role that owns a project's databases: the project name, mapped (`shop-x` is `shop_x`)."""
    return naming_rules.postgres_role(owner)


def namespaced_role(name: str, owner: str, *, naming: int) -> str:
    """The engine name of a project's group role or login user: `<owner>_<name>` (PREFIXED); SANITIZED:
    the name itself, sanitized, and `<owner>_<owner>` for the one named after the project, as `<owner>`
    is the login role of the project's databases."""
    project = tenant_role(owner)  # a broken owner is reported as such, not as a broken combined name
    if naming == PREFIXED:
        return role_identifier(f"{owner}_{name}")
    return naming_rules.postgres_role(f"{project}_{project}" if name == owner else name)

