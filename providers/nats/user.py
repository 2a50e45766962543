"""The `user` kind: a user of the project's account, for services, with its JWT and nkey seed."""

from __future__ import annotations

import hashlib
import time
from typing import Any, Mapping

from pulumi.dynamic import ReadResult
from pydantic import BaseModel, ConfigDict

from providers import naming as naming_rules

from providers.credentials import Rotation, predictable_password, rotation_of
from providers.identity import CURRENT_NAMING, Identity
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.markers import Observed
from providers.nats.account import Account
from providers.nats.claims import (AccountSpec, account_claims, account_description, account_jwt, account_params,
                                   auth, operator_of, push_account, revocations_of)
from providers.nats.kind import NatsKind
from providers.nats.names import owner_subjects
from providers.nats.session import (CONNECT_TIMEOUT, SESSIONS, Session, nats, nats_errors, nkeys, push_new_account,
                                    run, run_private, servers)


class UserSpec(BaseModel):
    """Params of a NATS `user` of the project's account."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Change it to give the user a new key in place (the old one is revoked).
    rotation: Rotation = None


def user_permissions(owner: str) -> dict[str, Any]:
    """What a project's user may do in its account: publish and subscribe on the project's subjects and
    its kv buckets, use its streams and consumers, but not make, change or delete streams (devstack
    does, from the declarations)."""
    own = owner_subjects(owner)
    return {
        "pub": {"allow": [own, "$KV.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "_INBOX.>"],
                "deny": ["$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>"]},
        "sub": {"allow": [own, "$KV.>", "_INBOX.>"]},
    }


def user_seed(ident: Identity, name: str, new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str:
    """The user's nkey seed: kept across updates while the policy and rotation stay; else derived from the
    project's predictable password (predictable) or drawn anew (generated)."""
    rotation = rotation_of((new.get("params") or {}).get("rotation"))
    if old and old.get("seed") and old.get("credentials") == new.get("credentials") \
            and (old.get("params") or {}).get("rotation") == rotation:
        return str(old["seed"])
    if new.get("credentials", "predictable") == "predictable":
        raw = hashlib.sha256(f"nats-user/{name}/{predictable_password(ident.owner, rotation)}".encode()).digest()
        return nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER).decode()
    return auth.seed(auth.random_key(nkeys.PREFIX_BYTE_USER))


class User(NatsKind):
    """A user of the project's account, for services: its JWT (signed by the account key) and nkey seed.

    The server stores no users: it checks each connection's JWT against the account. So the user exists
    while its account does and has not revoked its key; `read` connects with the stored credential to
    tell (`loginInSync`), and a drop or a new rotation revokes the key in the account's JWT.
    """

    kind = "user"
    after_kinds = ("account",)
    listed = False
    Spec = UserSpec
    logins = True
    attributes = ("host", "port", "servers", "account", "user", "jwt", "seed")
    secret_outputs = ("jwt", "seed")

    @classmethod
    def engine_object(cls, host: str, port: int, name: str, owner: str, *,
                      naming: int = CURRENT_NAMING) -> tuple[str, str, int, str, str]:
        # Users live in their project's account: two projects' users of one name never meet.
        return cls.object_named(host, port, f"{naming_rules.nats(owner)}/{cls.engine_name(name, owner, naming=naming)}")

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        # A user lives while its account does; the account's limits are not the user's params.
        account = Account().observe(instance, ident)
        return None if account is None else Observed(account.owner, attributes=account.attributes,
                                                     workspace=account.workspace)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if not is_stale(result.outs) and props.get("jwt") and props.get("seed"):
            result.outs["loginInSync"] = self._logs_in(self._instances[str(props["instance"])],
                                                       str(props["jwt"]), str(props["seed"]))
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["loginInSync"] if olds.get("loginInSync") is False else []

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        return self._issue(instance, ident, props, None)

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return self._issue(instance, ident, new, old)

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        if props.get("user"):
            self._revise(instance, ident, str(props.get("stack", "")), revoke=str(props["user"]))

    def _issue(self, instance: SharedInstance, ident: Identity, new: Mapping[str, Any],
               old: Mapping[str, Any] | None) -> dict[str, Any]:
        """Sign the user's JWT; revoke the key it replaces, make sure its own is not revoked."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        key = nkeys.from_seed(user_seed(ident, name, new, old).encode())
        replaced = str(old["user"]) if old and old.get("user") and old["user"] != auth.public(key) else None
        self._revise(instance, ident, str(new.get("stack", "")), revoke=replaced, keep=auth.public(key))
        account = operator_of(instance).account_key(ident.owner)
        return {**self._base_attributes(instance), "account": auth.public(account),
                "user": auth.public(key), "seed": auth.seed(key), "loginInSync": True,
                "jwt": auth.user_jwt(account, key, name, user_permissions(ident.owner))}

    def _revise(self, instance: SharedInstance, ident: Identity, stack: str, *, revoke: str | None = None,
                keep: str | None = None) -> None:
        """Revoke user key `revoke` and lift a revocation of `keep` in the account's JWT, making the account
        if it is missing (a user declared before any account); nothing when that changes nothing."""
        operator = operator_of(instance)
        account = auth.public(operator.account_key(ident.owner))

        async def work(system: Session) -> None:
            async with SESSIONS.account_lock(instance, ident.owner):
                live = await account_claims(system.nc, account)
                if live is None and revoke and not keep:
                    return  # no account: no key of it works anyway
                revocations = revocations_of(live)
                changed = live is None or (keep in revocations) or (revoke and revoke not in revocations)
                if not changed:
                    return
                revocations.pop(keep or "", None)
                if revoke:
                    revocations[revoke] = int(time.time())
                if live is None:  # a user declared before any account: the account, with default limits
                    await push_new_account(system, instance, ident.owner,
                                           lambda: account_jwt(operator, ident.owner, stack))
                    return
                await push_account(system.nc, account_jwt(
                    operator, ident.owner, stack, AccountSpec.model_validate(account_params(live)), revocations,
                    marker=account_description(live)), ident.owner)

        run(instance, work)

    def _logs_in(self, instance: SharedInstance, token: str, seed: str) -> bool:
        """Whether the server takes the stored credential now (revoked, or its account gone: it does not)."""
        key = nkeys.from_seed(seed.encode())

        async def attempt() -> bool:
            try:
                client = await nats.connect(**servers(instance), user_jwt_cb=lambda: token.encode(),
                                            signature_cb=auth.signer(key), allow_reconnect=False,
                                            max_reconnect_attempts=1, connect_timeout=CONNECT_TIMEOUT)
            except nats_errors.Error:
                return False
            await client.close()
            return True

        return run_private(attempt())
