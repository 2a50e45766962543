"""The `lifecycle` kind: one expiration rule on a bucket of the same project (MinIO)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict, Field


from providers.description import referenced_name
from providers.errors import Conflict, InvalidSpec, NotFound
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.s3.bucket import bucket_exists, bucket_tags
from providers.s3.client import aws_client, boto_errors, error_code
from providers.s3.guarded import GuardedKind
from providers.s3.names import bucket_name, rule_id
from providers.s3.rules import bucket_lock, expiry_rule, put_rules, rule_params, rules_of
from providers.s3.tags import tags_owner
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.client import BaseClient


class LifecycleSpec(BaseModel):
    """Params of a `lifecycle`: one expiration rule on a bucket of the same project."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    bucket: str | None = Field(default=None, min_length=1, description="the declaration name of a bucket of this "
                               "project; left out, the bucket declared under the lifecycle's own name")
    expire_days: int = Field(alias="expireDays", ge=1, le=36500)
    prefix: str = Field(default="", max_length=1024)
    enabled: bool = True


class Lifecycle(GuardedKind):
    """One expiration rule, id `devstack:<owner>:<name>`, on one of the owner's buckets.

    The bucket is `params.bucket`, or, left out, the bucket declared under the
    lifecycle's own name (spec 27: `name: acme-uploads`, `params: {expireDays: 7}`).
    Other rules of the bucket (other declarations', or not devstack's) are
    kept; dropping the rule leaves the bucket and them alone.
    """

    kind = "lifecycle"
    Spec = LifecycleSpec
    create_only = frozenset({"bucket"})
    retained_replacement_moves = True  # a retained rule moves to its new bucket (its params hold no bucket)
    attributes = ("bucket", "rule")
    references: ClassVar[dict[str, str]] = {"bucket": "bucket"}

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return rule_id(name, owner, naming=naming)

    @classmethod
    def referenced(cls, params: Mapping[str, Any], owner: str, name: str | None = None) -> dict[str, str]:
        return {"bucket": params.get("bucket") or name or owner}

    @classmethod
    def normalized_params(cls, params: dict[str, Any] | None, name: str, owner: str) -> dict[str, Any]:
        # Stored with the bucket filled in: the rule's bucket is create-only, and a default that
        # followed some other rule later would move it.
        normalized = super().normalized_params(params, name, owner)
        normalized["bucket"] = normalized.get("bucket") or name or None
        return normalized

    @classmethod
    def defaults(cls, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        return {**super().defaults(params, name, owner), **({"bucket": name} if "bucket" in params else {})}

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, LifecycleSpec)
        try:
            bucket_name(spec.bucket or name, owner, naming=naming)
        except InvalidSpec as err:
            return [("params.bucket", err.cause)]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        """Find the rule among the owner's buckets (the bucket param is not part of the identity)."""
        rule, s3 = rule_id(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        located = self._locate(s3, ident, rule)
        if not located:
            return None
        bucket, found = located[0]
        params = rule_params(found)
        # Anything written beside what those params say (a tag filter, non-current versions expired...)
        # changes what the rule deletes.
        in_sync = found == expiry_rule(rule, **params)
        # No marker of its own, so no workspace: its bucket's is the other rules' too, in any workspace.
        return Observed(owner=ident.owner, params=params, attributes={"bucket": bucket, "rule": rule, "ruleInSync": in_sync})

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["ruleInSync"] if olds.get("ruleInSync") is False else []

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, LifecycleSpec)
        self.enforce("create", ident, spec)
        return self._apply(instance, ident, spec, "create", referenced_name(props, "bucket"))

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        return self._apply(instance, ident, LifecycleSpec.model_validate(new.get("params") or {}), "update",
                           referenced_name(new, "bucket") or old.get("bucket"))

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        bucket, rule, s3 = observed.attributes["bucket"], rule_id(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        with bucket_lock(instance, bucket):
            put_rules(s3, bucket, [r for r in rules_of(s3, bucket) if r.get("ID") != rule])

    # --- steps -----------------------------------------------------------

    def _apply(self, instance: SharedInstance, ident: Identity, spec: LifecycleSpec, verb: str,
               bucket: str | None) -> dict[str, Any]:
        """Put this rule (replacing an older version of it) into its bucket's configuration.

        A copy left in another of the owner's buckets (a replacement after
        `bucket` changed, with the old rule retained) is moved, not doubled:
        one rule id names one rule. `bucket`: the referenced bucket's name as its resource records it
        (None: as this rule's naming maps its declaration).
        """
        bucket = bucket or bucket_name(spec.bucket or ident.name, ident.owner, naming=ident.naming)
        rule = rule_id(ident.name, ident.owner, naming=ident.naming)
        s3 = aws_client(instance, "s3")
        self._require_bucket(s3, ident, bucket, verb)
        wanted = expiry_rule(rule, spec.expire_days, spec.prefix, spec.enabled)
        for elsewhere, _ in self._locate(s3, ident, rule):
            if elsewhere != bucket:
                with bucket_lock(instance, elsewhere):
                    put_rules(s3, elsewhere, [r for r in rules_of(s3, elsewhere) if r.get("ID") != rule])
        with bucket_lock(instance, bucket):
            rules = [r for r in rules_of(s3, bucket) if r.get("ID") != rule]
            put_rules(s3, bucket, rules + [wanted])
        return {"bucket": bucket, "rule": rule, "ruleInSync": True}

    def _require_bucket(self, s3: BaseClient, ident: Identity, bucket: str, verb: str) -> None:
        if not bucket_exists(s3, bucket):
            raise NotFound(
                verb, f"lifecycle {ident}", f"its bucket {bucket!r} does not exist in {self.engine} instance {ident.instance!r}",
                "declare the bucket in the same project (params.bucket names its declaration, by default the "
                "lifecycle's own name) and apply again",
            )
        holder = tags_owner(bucket_tags(s3, bucket))
        if holder != ident.owner:
            who = f"project {holder!r}" if holder else "something devstack does not manage"
            raise Conflict(verb, f"lifecycle {ident}", f"bucket {bucket!r} belongs to {who}",
                           "a lifecycle rule goes only on a bucket of its own project; nothing was changed")

    @staticmethod
    def _locate(s3: BaseClient, ident: Identity, rule: str) -> list[tuple[str, dict[str, Any]]]:
        """(bucket, rule) for each of the owner's buckets that holds `rule` (normally one).

        Owner-prefixed buckets first; a rule named by sanitized names may sit on any bucket of the owner,
        so the others are looked at only when those hold it nowhere."""
        owner, names = ident.owner, [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
        prefixed_names = [name for name in names if name == owner or name.startswith(owner + "-")]
        found = Lifecycle._rules_in(s3, owner, rule, prefixed_names)
        if found or ident.naming == PREFIXED:
            return found
        return Lifecycle._rules_in(s3, owner, rule, [name for name in names if name not in prefixed_names])

    @staticmethod
    def _rules_in(s3: BaseClient, owner: str, rule: str, buckets: list[str]) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for bucket in buckets:
            try:
                if tags_owner(bucket_tags(s3, bucket)) != owner:
                    continue
                found += [(bucket, r) for r in rules_of(s3, bucket) if r.get("ID") == rule]
            except boto_errors.ClientError as err:
                if error_code(err) != "NoSuchBucket":  # dropped while we looked: nothing there
                    raise
        return found
