"""NATS operator mode: the keys and JWTs that let devstack make an account per project.

A NATS server in operator mode trusts an operator key; accounts are JWTs that
key signs, users are JWTs an account key signs, and the server checks each
connection against them (nats-server's decentralized JWT auth). devstack holds
one secret per instance, the admin secret of the stack config, and everything
else follows from it:

- `SO... SA...` (an operator seed, or one of its signing keys' seeds, and the
  system account's seed): the keys of a server set up elsewhere (nsc).
- any other text: the operator and system account keys are derived from it
  (HMAC-SHA256), which is what `python -m tools.engines start nats` does.

A project's account key is derived from the operator seed and the project's
name, so every verb of every process finds the same account without storing a
key; a user's key is random (`generated`) or derived from the project
(`predictable`), as spec 27's credential policy says.

The JWTs are the three-part encoding nats-server reads (header, claims,
ed25519 signature by an nkey); nkeys signs them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

import nkeys

OPERATOR_NAME = "devstack"
SYSTEM_ACCOUNT_NAME = "SYS"
_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
_VERSION = 2
#: The user devstack signs in each account to manage its JetStream (and in the system account, its accounts).
ADMIN_USER = "devstack-admin"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def derived_key(secret: bytes, purpose: str, prefix: int) -> nkeys.KeyPair:
    """An nkey pair whose seed is HMAC-SHA256(secret, purpose): the same for the same two every time."""
    raw = hmac.new(secret, purpose.encode(), hashlib.sha256).digest()
    return nkeys.from_seed(nkeys.encode_seed(raw, prefix))


def random_key(prefix: int) -> nkeys.KeyPair:
    return nkeys.from_seed(nkeys.encode_seed(secrets.token_bytes(32), prefix))


def public(key: nkeys.KeyPair) -> str:
    return key.public_key.decode()


def seed(key: nkeys.KeyPair) -> str:
    return key.seed.decode()


def encode(claims: dict[str, Any], issuer: nkeys.KeyPair) -> str:
    """A JWT of `claims` signed by `issuer` (its `iss`), with `iat` and a `jti` naming its content."""
    body = {**claims, "iat": int(time.time()), "iss": public(issuer)}
    body.pop("jti", None)
    body["jti"] = base64.b32encode(hashlib.sha512(json.dumps(body, sort_keys=True).encode()).digest()[:32]) \
        .decode().rstrip("=")
    signing_input = f"{_b64(json.dumps(_HEADER).encode())}.{_b64(json.dumps(body).encode())}"
    return f"{signing_input}.{_b64(issuer.sign(signing_input.encode()))}"


def decode(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified: the server that handed it over verified it."""
    try:
        return json.loads(_unb64(token.split(".")[1]))
    except (IndexError, ValueError) as err:
        raise ValueError("not a NATS JWT") from err


@dataclass(frozen=True)
class Operator:
    """The keys of one NATS instance's trust chain, from the instance's admin secret."""

    signing: nkeys.KeyPair
    system: nkeys.KeyPair

    def __repr__(self) -> str:  # seeds never reach a log
        return f"Operator({public(self.signing)}, system={public(self.system)})"

    @classmethod
    def from_secret(cls, secret: str) -> Operator:
        parts = secret.split()
        if len(parts) == 2 and parts[0].startswith("SO") and parts[1].startswith("SA"):
            return cls(signing=nkeys.from_seed(parts[0].encode()), system=nkeys.from_seed(parts[1].encode()))
        return cls(signing=derived_key(secret.encode(), "operator", nkeys.PREFIX_BYTE_OPERATOR),
                   system=derived_key(secret.encode(), "account:$SYS", nkeys.PREFIX_BYTE_ACCOUNT))

    def account_key(self, owner: str) -> nkeys.KeyPair:
        """Project `owner`'s account key: derived, so any process finds the same account."""
        return derived_key(self.signing.seed, f"account:{owner}", nkeys.PREFIX_BYTE_ACCOUNT)

    def operator_jwt(self) -> str:
        """The operator's self-signed JWT, naming the system account (the server config's `operator`)."""
        return encode({"sub": public(self.signing), "name": OPERATOR_NAME,
                       "nats": {"type": "operator", "version": _VERSION, "system_account": public(self.system)}},
                      self.signing)

    def system_account_jwt(self) -> str:
        return self.account_jwt(self.system, SYSTEM_ACCOUNT_NAME, description="", jetstream=None)

    def account_jwt(self, account: nkeys.KeyPair, name: str, *, description: str,
                    jetstream: dict[str, int] | None, revocations: dict[str, int] | None = None) -> str:
        """An account JWT: JetStream limits (None: no JetStream), the marker in its description,
        revoked user keys (public key -> revoked before this time)."""
        limits: dict[str, Any] = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                                  "wildcards": True, "conn": -1, "leaf": -1}
        limits.update(jetstream or {})
        nats: dict[str, Any] = {"type": "account", "version": _VERSION, "limits": limits}
        if description:
            nats["description"] = description
        if revocations:
            nats["revocations"] = revocations
        return encode({"sub": public(account), "name": name, "nats": nats}, self.signing)

    def deletion_jwt(self, accounts: list[str]) -> str:
        """The operator-signed request that makes a full resolver delete `accounts`."""
        return encode({"sub": public(self.signing), "name": "delete accounts",
                       "nats": {"type": "generic", "version": _VERSION, "accounts": accounts}}, self.signing)


def user_jwt(account: nkeys.KeyPair, user: nkeys.KeyPair, name: str,
             permissions: dict[str, Any] | None = None) -> str:
    """A user of `account`; no permissions: everything the account allows."""
    nats: dict[str, Any] = {"type": "user", "version": _VERSION, "subs": -1, "data": -1, "payload": -1}
    nats.update(permissions or {})
    return encode({"sub": public(user), "name": name, "nats": nats}, account)


def signer(user: nkeys.KeyPair):
    """nats-py's `signature_cb`: the server's nonce signed by the user key."""
    return lambda nonce: base64.b64encode(user.sign(nonce.encode()))
