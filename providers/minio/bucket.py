"""MinIO's `bucket`: the S3 bucket (providers.s3.bucket), kept out of reach of other projects' access
keys, with a key of its own: the user `<bucket>~key`, whose policy reaches that bucket alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from pulumi.dynamic import ReadResult
from pydantic import BaseModel

from providers import naming as naming_rules

from providers.errors import Conflict, InvalidSpec, NotFound
from providers.identity import CURRENT_NAMING, PREFIXED, Identity
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.markers import Observed, marker_owner
from providers.minio.client import ENGINE_NAME, admin_client, policy_document, user_info
from providers.minio.keys import (bucket_key_name, bucket_key_policy, converge_key, key_owners, key_secret,
                                  key_state, policy_name, remove_key, remove_marked_key, secret_works, within_reach)
from providers.s3.bucket import Bucket, BucketSpec
from providers.s3.names import bucket_name

if TYPE_CHECKING:
    from minio.minioadmin import MinioAdmin


class MinioBucket(Bucket):
    """An S3 bucket on MinIO, kept out of reach of other projects' access keys.

    A key of project P reaches every bucket named `P` or `P-*`, and project
    names may extend each other (`shop`, `shop-admin`): a bucket of
    `shop-admin` would sit within `shop`'s reach. Creating such a bucket is an
    identity conflict (and `AccessKey` refuses the converse).
    """

    engine = ENGINE_NAME
    attributes = (*Bucket.attributes, "accessKey", "secretKey")
    secret_outputs = ("secretKey",)
    # 1: every bucket gets its own key; the first up after the upgrade adds it to older buckets.
    access_rules = 1

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        bucket = super().engine_name(name, owner, naming=naming)
        if naming == PREFIXED and (".-" in bucket or "-." in bucket):  # MinIO's rule, not S3's: it answers 400 to the first call
            raise InvalidSpec("map", f"bucket name {bucket!r}", "MinIO bucket names must not have '-' next to '.'",
                              "buckets are named `<project>-<name>`, or after the project alone")
        return bucket

    @classmethod
    def reached_by(cls, name: str, owner: str,
                   holders: Mapping[str, Iterable[str]]) -> tuple[str, str, str] | None:
        reaching = _reaching(bucket_name(name, owner, naming=CURRENT_NAMING), owner, holders.get("access_key", ()))
        if not reaching:
            return None
        mapped = naming_rules.bucket(reaching[0])
        return "access_key", reaching[0], f"'{mapped}' or '{mapped}-*'"

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        observed = super().observe(instance, ident)
        if observed is not None:
            bucket = self.engine_name(ident.name, ident.owner, naming=ident.naming)
            key, admin = bucket_key_name(bucket), admin_client(instance)
            # Not its service accounts: every refresh would pay MinIO's Argon2 per bucket. Its policy
            # denies the key making any; an update after any other drift removes those an admin made.
            info, _, out_of_band = key_state(instance, admin, key, bucket_key_policy(ident, bucket, None),
                                             service_accounts=False)
            observed.attributes.update(accessKey=key, keyOutOfBand=out_of_band if info else ["accessKey"])
        return observed

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if not is_stale(result.outs) and props.get("secretKey") and not {"accessKey", "status"} & set(result.outs["keyOutOfBand"]):
            instance = self._instance(Identity.from_props(props), "read")
            with self.engine_errors(props):
                if not secret_works(instance, result.outs["accessKey"], props["secretKey"]):
                    result.outs["keyOutOfBand"] = [*result.outs["keyOutOfBand"], "secretKey"]
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return [*super().drift(olds), *(olds.get("keyOutOfBand") or [])]

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        bucket, admin = self.engine_name(ident.name, ident.owner, naming=ident.naming), admin_client(instance)
        # Before the bucket is made: a refusal then leaves nothing behind.
        fresh = not self._refuse_foreign_key(instance, admin, ident, bucket, props, "create")
        attributes = super().create_resource(instance, ident, spec, props)
        return {**attributes, **self._converge_key(instance, admin, ident, bucket, props, {}, fresh=fresh)}

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        bucket, admin = self.engine_name(ident.name, ident.owner, naming=ident.naming), admin_client(instance)
        self._refuse_foreign_key(instance, admin, ident, bucket, old, "update")
        attributes = super().update_resource(instance, ident, old, new)
        return {**attributes, **self._converge_key(instance, admin, ident, bucket, new, old)}

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, observed, props)
        except NotFound:
            # The bucket went (a drop cut short, or out of band): its key must not outlive it, or it
            # would reach the next bucket made under that name, whoever's it is.
            remove_marked_key(admin_client(instance), bucket_key_name(self.engine_name(ident.name, ident.owner, naming=ident.naming)),
                              ident.owner)
            raise

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        # The key first: a bucket whose drop fails stays, visible to gc; a key left alone would not be.
        remove_key(admin_client(instance), bucket_key_name(self.engine_name(ident.name, ident.owner, naming=ident.naming)))
        super().remove(instance, ident, observed)

    # --- the bucket's key ------------------------------------------------

    def _refuse_foreign_key(self, instance: SharedInstance, admin: MinioAdmin, ident: Identity, bucket: str,
                            stored: Mapping[str, Any], verb: str) -> bool:
        """Conflict when the bucket's key name is a user devstack did not make for this project: another
        project's, or one without our marker that the state (`stored`: outputs) does not say we made.
        Whether the user exists."""
        key = bucket_key_name(bucket)
        if user_info(instance, admin, key) is None:
            return False
        document = policy_document(admin, policy_name(key))
        holder = marker_owner(document.get("ID")) if document else None
        if holder == ident.owner or (holder is None and stored.get("accessKey") == key):
            return True
        who = f"project {holder!r}" if holder else "something devstack does not manage"
        raise Conflict(verb, f"bucket {ident}",
                       f"the user {key!r}, which would be the bucket's key, exists and belongs to {who}",
                       f"remove that user (`mc admin user rm ALIAS {key}`) and apply again; nothing was changed")

    def _converge_key(self, instance: SharedInstance, admin: MinioAdmin, ident: Identity, bucket: str,
                      new: Mapping[str, Any], old: Mapping[str, Any], fresh: bool = False) -> dict[str, Any]:
        """The bucket's key as `new` (inputs) asks; a generated secret is kept from `old` (outputs)
        while the credential policy stays. `fresh`: no such user existed."""
        key = bucket_key_name(bucket)
        previous = old.get("secretKey") if old.get("credentials") == new.get("credentials") else None
        secret = key_secret(ident, key, 0, new.get("credentials", "predictable"), previous)
        converge_key(instance, admin, key, secret, bucket_key_policy(ident, bucket, new.get("stack")),
                     end_sessions=secret != old.get("secretKey"), fresh=fresh)
        return {"accessKey": key, "secretKey": secret, "keyOutOfBand": []}

    def stands(self, instance: SharedInstance, ident: Identity, spec: BucketSpec, made: bool) -> None:
        # Checked once the bucket stands, not before: a key made meanwhile (another project of this up,
        # another stack) passed its own check before the bucket existed. Each side checks after its own
        # effect, so of a racing bucket and key at least one sees the other and undoes itself. Only
        # here: the check lists every policy on the server, which grows with the workspace.
        try:
            _refuse_keys_in_reach(admin_client(instance), ident, bucket_name(ident.name, ident.owner, naming=ident.naming))
        except Conflict:
            if made:
                self.remove(instance, ident, Observed(owner=ident.owner, params={"object_lock": spec.object_lock}))
            raise


def _reaching(bucket: str, owner: str, holders: Iterable[str]) -> list[str]:
    """The projects other than `owner` among `holders` (of access keys) whose keys would reach `bucket`."""
    return sorted(o for o in holders if o != owner and within_reach(bucket, o))


def _refuse_keys_in_reach(admin: MinioAdmin, ident: Identity, bucket: str) -> None:
    reaching = _reaching(bucket, ident.owner, key_owners(admin))
    if reaching:
        raise Conflict(
            "create", f"bucket {ident}",
            f"bucket {bucket!r} would be within reach of the access keys of project {reaching[0]!r} ({reaching[0]}-*)",
            "a project whose name extends another's with '-' cannot keep buckets on an instance where "
            "the other has access keys; nothing was changed",
        )
