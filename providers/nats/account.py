"""The `account` kind: the project's own NATS account, which everything else of the project lives in."""

from __future__ import annotations

from typing import Any, Mapping

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel


from providers.errors import Conflict, NotFound
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed, marker_field, marker_owner
from providers.nats.claims import (AccountSpec, account_claims, account_description, account_jwt, account_key,
                                   account_marker, account_params, auth, claims_request, operator_of, push_account,
                                   revocations_of)
from providers.nats.jetstream import all_streams, api_errors, metadata_owner
from providers.nats.kind import NatsKind
from providers.nats.session import SESSIONS, Session, observed, push_new_account, run


class Account(NatsKind):
    """The project's own NATS account: its streams, consumers, kv buckets and users live in it, and no
    other project's credential reaches into it (the server keeps accounts apart).

    One per project and instance, named after the project; the program adds it when the project declares
    anything on a NATS instance, and a declaration of its own sets its limits. Its JWT, signed by the
    operator key the stack's admin secret gives, carries the ownership marker in its description and the
    revocations of the project's dropped users; a purge drops everything in it and deletes it.
    """

    kind = "account"
    implied = True
    Spec = AccountSpec
    attributes = ("host", "port", "servers", "account")

    @classmethod
    def check_params(cls, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        if name != owner:
            return [CheckFailure("name", f"{name!r} is not the project's name: a project has one account per NATS "
                                         f"instance, called after it (leave `name` out)")]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        account = account_key(instance, ident.owner)
        claims = run(instance, lambda system: account_claims(system.nc, account))
        if claims is None:
            return None
        marker = account_description(claims)
        return Observed(owner=marker_owner(marker), workspace=marker_field(marker, "stack"),
                        params=account_params(claims), attributes={"account": account})

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, AccountSpec)
        return self._push(instance, ident, spec, props.get("stack", ""))

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return self._push(instance, ident, AccountSpec.model_validate(new.get("params") or {}), new.get("stack", ""))

    def drop(self, instance: SharedInstance, ident: Identity, found: Observed | None,
             props: dict[str, Any]) -> None:
        what, operator = f"account {ident}", operator_of(instance)
        account = auth.public(operator.account_key(ident.owner))

        async def empty(session: Session) -> None:
            streams = await all_streams(session.js)
            foreign = [info.config.name for info in streams if metadata_owner(info.config.metadata) != ident.owner]
            if foreign:
                raise Conflict("drop", what, f"it holds streams that carry no marker of this project: "
                               f"{', '.join(map(repr, foreign))}",
                               "nothing was dropped; move or delete those first, or remove the account from the "
                               "state with `pulumi state delete`")
            for info in streams:
                await session.js.delete_stream(info.config.name or "")

        async def delete(system: Session) -> None:
            claims = await account_claims(system.nc, account)
            if claims is None:
                raise NotFound("drop", what, "the server has no account of the project")
            if marker_owner(account_description(claims)) != ident.owner:
                raise Conflict("drop", what, "its JWT carries no marker of this project",
                               "nothing was dropped; remove it from the state with `pulumi state delete`")
            await claims_request(system.nc, "$SYS.REQ.CLAIMS.DELETE", operator.deletion_jwt([account]), what)
            await SESSIONS.forget(instance, ident.owner)

        with api_errors("drop", what):
            observed(instance, ident.owner, empty)  # its data goes with it; the server keeps files of deleted accounts
            run(instance, delete)

    def _push(self, instance: SharedInstance, ident: Identity, spec: AccountSpec, stack: str) -> dict[str, Any]:
        """Sign and push the account JWT with `spec`'s limits, keeping the users it has revoked."""
        operator = operator_of(instance)
        account = auth.public(operator.account_key(ident.owner))

        async def work(system: Session) -> None:
            async with SESSIONS.account_lock(instance, ident.owner):
                live = await account_claims(system.nc, account)
                if live is not None and account_params(live) == spec.model_dump() \
                        and account_description(live) == account_marker(ident.owner, stack):
                    return  # already converged: change nothing
                if live is None:
                    await push_new_account(system, instance, ident.owner,
                                           lambda: account_jwt(operator, ident.owner, stack, spec))
                else:
                    await push_account(system.nc, account_jwt(operator, ident.owner, stack, spec, revocations_of(live)),
                                       ident.owner)

        run(instance, work)
        return {**self._base_attributes(instance), "account": account}
