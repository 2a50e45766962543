"""Tenant credential policies: `predictable` and `generated`.

predictable: the dev-credential model. The password is derived from the
engine, instance and project name, so anyone with the workspace can compute
it and nothing secret has to be stored. generated: random, made once by the
provider, returned as a secret output and kept encrypted in the state.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated, Any, Mapping

from pydantic import BeforeValidator

from providers.identity import Identity


def predictable_password(ident: Identity, principal: str) -> str:
    digest = hashlib.sha256(f"devstack/{ident.engine}/{ident.instance}/{principal}".encode()).hexdigest()
    return f"dev-{digest[:24]}"


def password_for(ident: Identity, principal: str, policy: str, previous: str | None = None) -> str:
    """The password `principal` should have under `policy`.

    A generated password is kept across updates (`previous`) and only made
    anew when there is none yet, so a re-up never rotates it by accident.
    """
    if policy == "predictable":
        return predictable_password(ident, principal)
    if previous and previous != predictable_password(ident, principal):
        return previous
    return secrets.token_urlsafe(24)


def _rotation(value: Any) -> Any:
    """One clear message instead of one per member of the union."""
    if isinstance(value, float) and value.is_integer():
        return int(value)  # Pulumi carries every number as a float: `rotation: 2` arrives as 2.0
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and 0 < len(value) <= 64:
        return value
    raise ValueError("must be an integer or a non-empty string of at most 64 characters")


#: A credential rotation counter (a login's `rotation` param): any change to it changes the password in place.
Rotation = Annotated[int | str | None, BeforeValidator(_rotation)]


def login_password(ident: Identity, login: str, new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str:
    """The password of `login` for inputs `new` (after outputs `old`, on an update).

    Kept across updates unless the policy or the `rotation` param changed; a
    new rotation value derives (predictable) or draws (generated) a new one.
    """
    rotation = _rotation((new.get("params") or {}).get("rotation"))  # `1`, never Pulumi's `1.0`: anyone can derive it
    principal = login if rotation is None else f"{login}#rotation={rotation}"
    same = old is not None and old.get("credentials") == new.get("credentials") and (
        (old.get("params") or {}).get("rotation") == rotation
    )
    if same and isinstance(rotation, int) and old.get("password") == predictable_password(ident, f"{principal}.0"):
        # Derived from `1.0` by releases before 2026-11-30: kept until the rotation changes, as the running
        # services hold it; an upgrade must not change a password behind an update that shows none.
        return str(old["password"])
    return password_for(ident, principal, new.get("credentials", "predictable"), old.get("password") if same else None)
