"""MinIO's `access_key`: a MinIO user whose policy reaches only the project's buckets."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from pulumi.dynamic import ReadResult
from pydantic import BaseModel, ConfigDict, Field

from providers import naming as naming_rules

from providers.description import REACH
from providers.errors import Conflict, NotFound
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.markers import Observed, marker_field, marker_owner
from providers.minio.bucket import MinioBucket
from providers.minio.client import ENGINE_NAME, admin_client, policy_document, user_info
from providers.minio.keys import (converge_key, key_secret, key_state, policy_buckets, policy_name, remove_key,
                                  remove_marked_key, secret_works, tenant_policy, within_reach)
from providers.s3.bucket import bucket_tags
from providers.s3.client import aws_client, boto_errors, error_code
from providers.s3.guarded import GuardedKind
from providers.s3.names import prefixed_name
from providers.s3.tags import tags_owner

if TYPE_CHECKING:
    from minio.minioadmin import MinioAdmin

_ACCESS_KEY = re.compile(r"[a-z0-9][a-z0-9._-]*")


def access_key_name(name: str, owner: str, *, naming: int) -> str:
    """The MinIO user (its access key id): the name sanitized, or owner-prefixed (PREFIXED, where
    InvalidSpec names the rule it breaks)."""
    if naming != PREFIXED:
        return naming_rules.minio_access_key(name)
    return prefixed_name(name, owner, service="MinIO access key", length=(3, 128), charset=_ACCESS_KEY,
                         allowed="lowercase letters, digits, '-', '_' and '.', starting with a letter or digit")


class AccessKeySpec(BaseModel):
    """Params of an `access_key`. Bumping `rotation` issues a new secret key in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    rotation: int = Field(default=0, ge=0)


class AccessKey(GuardedKind):
    """A MinIO user whose policy reaches only the project's buckets.

    The secret key follows the resource's credential policy (`predictable`:
    the project's name with the rotation, repeated up to MinIO's 8
    characters, see providers.credentials; `generated`: random, kept across
    updates until `rotation` changes) and is always a secret output. `read`
    reports out-of-band changes (user disabled, policy detached or edited,
    secret reset, added to a group, service accounts made for it) in
    `outOfBand`, which the next diff turns into an update.
    """

    engine = ENGINE_NAME
    kind = "access_key"
    logins = True
    Spec = AccessKeySpec
    # The project's own buckets first: one still being made (not yet tagged) would look foreign.
    after_kinds = (MinioBucket.kind,)
    attributes = ("host", "port", "accessKey", "secretKey", "policy")
    secret_outputs = ("secretKey",)
    # 2: the policy denies setting a bucket's encryption, notifications and replication.
    access_rules = 2
    # The project's buckets named otherwise than `<owner>`/`<owner>-*` are listed in the policy by name.
    reach_kind = MinioBucket.kind

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return access_key_name(name, owner, naming=naming)

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        owner = str(props.get("owner") or "")
        return sorted({str(bucket) for bucket in props.get(REACH) or [] if not within_reach(str(bucket), owner)})

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        key, admin = access_key_name(ident.name, ident.owner, naming=ident.naming), admin_client(instance)
        # The buckets it lists by name are checked to be the project's own, whichever they are: the
        # declarations that put them there are not known here.
        info, document, out_of_band = key_state(
            instance, admin, key, lambda document: tenant_policy(ident, None, policy_buckets(document, ident.owner)))
        if info is None:
            return None
        if "policy" not in out_of_band and self._foreign(instance, ident, policy_buckets(document, ident.owner)):
            out_of_band.append("policy")
        owner = marker_owner(document.get("ID")) if document else None
        return Observed(owner=owner, workspace=marker_field(document.get("ID"), "stack") if document else None,
                        attributes={"accessKey": key, "policy": policy_name(key), "outOfBand": out_of_band})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        # A disabled user rejects every key anyway: the status drift says enough then.
        if not is_stale(result.outs) and props.get("secretKey") and "status" not in result.outs.get("outOfBand", []):
            ident = Identity.from_props(props)
            instance, key = self._instance(ident, "read"), access_key_name(ident.name, ident.owner, naming=ident.naming)
            with self.engine_errors(props):
                if not secret_works(instance, key, props["secretKey"]):
                    result.outs["outOfBand"] = [*result.outs["outOfBand"], "secretKey"]
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return list(olds.get("outOfBand") or [])

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        conflict = super()._conflict(verb, ident, observed)
        if observed.owner is not None:
            return conflict
        # The marker lives in the key's policy: a user without it may be ours with the policy deleted.
        key = access_key_name(ident.name, ident.owner, naming=ident.naming)
        # The user first: MinIO refuses to remove a policy that is still attached.
        return Conflict(conflict.verb, conflict.what, conflict.cause,
                        f"the user has no devstack policy ({policy_name(key)}: missing, or rewritten without its "
                        f"marker); if it is this project's key, remove the user (`mc admin user rm ALIAS {key}`) and "
                        f"any such policy (`mc admin policy rm ALIAS {policy_name(key)}`), then apply again; "
                        f"nothing was changed")

    def _policy_taken(self, ident: Identity, key: str, owner: str | None) -> Conflict:
        """The user is free but its policy's name is taken: another project's, or one without a marker."""
        if owner is not None:
            return self._conflict("create", ident, Observed(owner=owner))
        return Conflict("create", f"{self.kind} {ident}",
                        f"the policy {policy_name(key)!r} exists in {self.engine} instance {ident.instance!r} without "
                        f"devstack's marker (written outside devstack), so nothing says whose key it was",
                        f"if it was this project's key, remove the policy (`mc admin policy rm ALIAS "
                        f"{policy_name(key)}`) and apply again; nothing was changed")

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, AccessKeySpec)
        key = access_key_name(ident.name, ident.owner, naming=ident.naming)
        admin = admin_client(instance)
        document = policy_document(admin, policy_name(key))
        if document is not None and marker_owner(document.get("ID")) != ident.owner:
            # Another project's policy, or one without a marker: not ours to rewrite.
            raise self._policy_taken(ident, key, marker_owner(document.get("ID")))
        self._refuse_foreign_buckets_in_reach(instance, ident)
        made = user_info(instance, admin, key) is None
        secret = key_secret(ident, key, spec.rotation, props.get("credentials", "predictable"))
        # No session minted before this create is the ledger's: a new user's are an earlier one's.
        self._converge(instance, admin, ident, key, secret, props.get("stack"), self._reach(instance, ident, props),
                       end_sessions=True)
        # Checked again now that the policy (which marks the key) stands: see MinioBucket.create_resource.
        try:
            self._refuse_foreign_buckets_in_reach(instance, ident)
        except Conflict:
            if made:
                self.remove(instance, ident, Observed(owner=ident.owner))
            raise
        return self._attributes(instance, key, secret)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        key = access_key_name(ident.name, ident.owner, naming=ident.naming)
        spec = AccessKeySpec.model_validate(new.get("params") or {})
        old_rotation = (old.get("params") or {}).get("rotation")
        # A generated secret survives any update but a new rotation or credential policy.
        unchanged = (old.get("credentials"), old_rotation) == (new.get("credentials"), spec.rotation)
        secret = key_secret(ident, key, spec.rotation, new.get("credentials", "predictable"),
                            old.get("secretKey") if unchanged else None)
        # A new secret ends the sessions the old one minted, as it ends the old secret.
        self._converge(instance, admin_client(instance), ident, key, secret, new.get("stack"),
                       self._reach(instance, ident, new), end_sessions=secret != old.get("secretKey"))
        return self._attributes(instance, key, secret)

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, observed, props)
        except NotFound:
            # A drop cut after the user went, run again: its policy goes too, or it would keep every
            # `<owner>-*` bucket of another project out of reach of creation, with nothing to remove it.
            remove_marked_key(admin_client(instance), access_key_name(ident.name, ident.owner, naming=ident.naming), ident.owner)
            raise

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        remove_key(admin_client(instance), access_key_name(ident.name, ident.owner, naming=ident.naming))

    # --- steps -----------------------------------------------------------

    def _refuse_foreign_buckets_in_reach(self, instance: SharedInstance, ident: Identity) -> None:
        """The key would reach `<owner>-*`: no bucket of another project (or none of ours) may sit there."""
        listed = [b["Name"] for b in aws_client(instance, "s3").list_buckets().get("Buckets", [])]
        foreign = self._foreign(instance, ident, [bucket for bucket in listed if within_reach(bucket, ident.owner)])
        if foreign:
            bucket, holder = foreign[0]
            who = f"project {holder!r}" if holder else "something devstack does not manage"
            raise Conflict(
                "create", f"access_key {ident}",
                f"bucket {bucket!r} is within the key's reach ({ident.owner}-*) but belongs to {who}",
                "a key reaches every bucket named after its project; move or rename that bucket; nothing was changed",
            )

    def _reach(self, instance: SharedInstance, ident: Identity, props: Mapping[str, Any]) -> list[str]:
        """The buckets `props` ask the key to reach by name; Conflict when one is not the project's."""
        exact = self.exact_reach(props)
        foreign = self._foreign(instance, ident, exact)
        if foreign:
            raise Conflict("grant", f"access_key {ident}", f"bucket {foreign[0][0]!r} does not belong to project {ident.owner!r}",
                           "a key reaches only its project's buckets; nothing was changed")
        return exact

    @staticmethod
    def _foreign(instance: SharedInstance, ident: Identity, buckets: Iterable[str]) -> list[tuple[str, str | None]]:
        """(bucket, the owner its marker names) for those of `buckets` that exist without this project's marker."""
        admin_s3, foreign = aws_client(instance, "s3"), []
        for bucket in buckets:
            try:
                holder = tags_owner(bucket_tags(admin_s3, bucket))
            except boto_errors.ClientError as err:
                if error_code(err) == "NoSuchBucket":  # gone since it was named: nothing to reach there
                    continue
                raise
            if holder != ident.owner:
                foreign.append((bucket, holder))
        return foreign

    @staticmethod
    def _converge(instance: SharedInstance, admin: MinioAdmin, ident: Identity, key: str, secret: str,
                  stack: str | None, exact: Iterable[str] = (), *, end_sessions: bool = False) -> None:
        converge_key(instance, admin, key, secret, tenant_policy(ident, stack, exact), end_sessions=end_sessions)

    @staticmethod
    def _attributes(instance: SharedInstance, key: str, secret: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "accessKey": key, "secretKey": secret,
                "policy": policy_name(key), "outOfBand": []}
