"""Tenant credential policies: `predictable` and `generated`.

predictable: the dev-credential model of spec 27. The password of every login
devstack makes (a PostgreSQL database's role and every `user`, a Redis
`acl_user`, a Kafka `acl` principal, a MinIO access key's secret; a NATS
`user`'s nkey is derived from it) is the
project's name as devstack.yaml's `name:` writes it, so the documented DSN
`postgres://acme:acme@<host>:<port>/acme` logs in, and nothing secret is
stored. They are shared dev credentials: anyone who knows the project's name
logs in as it; isolation between projects needs `generated`. Two rules
complete it, both computable by hand:

- rotation: a login's `rotation` param, when set to anything but 0, is
  appended after a '-': `rotation: 2` gives `acme-2`, `rotation: 2025-q3`
  gives `acme-2025-q3`; absent or 0, the bare project name.
- padding: where the engine demands a longer secret (a MinIO secret key:
  at least 8 characters), the password is written out again and again until
  it is long enough: `acme` -> `acmeacme`, `app` -> `appappapp`, `acme-2` ->
  `acme-2acme-2`. PostgreSQL, Redis and Kafka SCRAM take any non-empty
  password, so they get it unpadded.

Earlier releases derived `dev-` and 24 hex digits of a SHA-256 instead
(`hashed_password`). A login holding such a password keeps it while its
`credentials` and `rotation` stay as they are, for the services hold it, and
so does a new PostgreSQL database whose project role has one (the role is the
login of all its databases). A new `rotation` value moves it to the
project-name password: `rotation: 0` where the param was absent (on every
database of the project on that instance: they share the role), `rotation: 1`
on a MinIO access key (its rotation is 0 already).

generated: random, made once by the provider, returned as a secret output and
kept encrypted in the state.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated, Any, Mapping

from pydantic import BeforeValidator

from providers.identity import Identity

#: The shortest secret key MinIO takes.
MINIO_SECRET_MINIMUM = 8


def predictable_password(project: str, rotation: Any = None, minimum: int = 0) -> str:
    """`<project>`, or `<project>-<rotation>`, repeated until it has `minimum` characters (module docstring)."""
    rotation = rotation_of(rotation)  # `acme-1` for `rotation: 1`, though Pulumi hands the provider 1.0
    password = project if rotation in (None, 0) else f"{project}-{rotation}"
    return password * -(-minimum // len(password)) if len(password) < minimum else password


def hashed_password(ident: Identity, principal: str) -> str:
    """The legacy hashed form of a predictable password: recognised, and kept, on a login that holds it."""
    digest = hashlib.sha256(f"devstack/{ident.engine}/{ident.instance}/{principal}".encode()).hexdigest()
    return f"dev-{digest[:24]}"


def password_for(ident: Identity, principal: str, policy: str, previous: str | None = None, *,
                 rotation: Any = None, minimum: int = 0) -> str:
    """The password of the login of `ident` under `policy` and `rotation`.

    `previous`: its password, when neither the policy nor the rotation changed
    (None otherwise). A generated one is kept, so a re-up never rotates it by
    accident; so is a legacy hashed password (`hashed_password`) for
    `principal` (its engine-level login, with the rotation as the hash spells
    it). Anything else is derived (predictable) or drawn (generated) anew.
    """
    derived, hashed = predictable_password(ident.owner, rotation, minimum), hashed_password(ident, principal)
    if policy == "predictable":
        return previous if previous == hashed else derived
    if previous and previous not in (derived, hashed):  # a login just moved from predictable never keeps that one
        return previous
    return secrets.token_urlsafe(24)


def rotation_of(value: Any) -> Any:
    """One clear message instead of one per member of the union."""
    if isinstance(value, float) and value.is_integer():
        return int(value)  # Pulumi carries every number as a float: `rotation: 2` arrives as 2.0
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and 0 < len(value) <= 64:
        return value
    raise ValueError("must be an integer or a non-empty string of at most 64 characters")


#: A credential rotation counter (a login's `rotation` param): any change to it changes the password in place.
Rotation = Annotated[int | str | None, BeforeValidator(rotation_of)]


def login_password(ident: Identity, login: str, new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str:
    """The password of `login` for inputs `new` (after outputs `old`, on an update).

    Kept across updates unless the policy or the `rotation` param changed; a
    new rotation value derives (predictable) or draws (generated) a new one.
    """
    rotation = rotation_of((new.get("params") or {}).get("rotation"))  # `1`, never Pulumi's `1.0`: anyone can derive it
    principal = login if rotation is None else f"{login}#rotation={rotation}"
    same = old is not None and old.get("credentials") == new.get("credentials") and (
        (old.get("params") or {}).get("rotation") == rotation
    )
    previous = old.get("password") if same else None
    if isinstance(rotation, int) and previous == hashed_password(ident, f"{principal}.0"):
        return str(previous)  # the legacy hash of `rotation: 1` as Pulumi's `1.0`: kept as well
    return password_for(ident, principal, new.get("credentials", "predictable"), previous, rotation=rotation)
