"""Tenant credential policies: `predictable` and `generated`.

predictable: the dev-credential model. The password is derived from the
engine, instance and project name, so anyone with the workspace can compute
it and nothing secret has to be stored. generated: random, made once by the
provider, returned as a secret output and kept encrypted in the state.
"""

from __future__ import annotations

import hashlib
import secrets

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
