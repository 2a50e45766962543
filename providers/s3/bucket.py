"""The `bucket` kind: an owner-prefixed S3 bucket tagged with the ownership marker, on MinIO or LocalStack.

Each engine's package names the engine (providers.minio.bucket, providers.localstack.bucket); the S3
calls are the same. The bucket's lifecycle rules other than the project's are drift (providers.s3.rules).
"""

from __future__ import annotations

import re
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator


from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import Observed
from providers.s3.client import DEFAULT_REGION, aws_client, boto_errors, error_code, http_status, region_of
from providers.s3.guarded import GuardedKind, cut_short_hint
from providers.s3.names import bucket_name
from providers.s3.rules import bucket_lock, foreign_rules, put_rules, rules_of
from providers.s3.tags import (MAX_USER_TAGS, RESERVED_TAGS, marker_tags, tag_dict, tag_list, tags_owner,
                               tags_workspace, user_tags)

if TYPE_CHECKING:
    from botocore.client import BaseClient

#: How many times a bucket's removal empties it and tries DeleteBucket.
REMOVE_ATTEMPTS = 3
_ALREADY_EXISTS = ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")
#: Seconds from tagging a bucket just made to looking at its tags again (see Bucket.create_resource).
_TAG_SETTLE = 0.1


def bucket_exists(s3: BaseClient, bucket: str) -> bool:
    try:
        s3.head_bucket(Bucket=bucket)
    except boto_errors.ClientError as err:
        if http_status(err) == 404 or error_code(err) in ("404", "NoSuchBucket"):
            return False
        raise
    return True


def bucket_tags(s3: BaseClient, bucket: str) -> dict[str, str]:
    try:
        return tag_dict(s3.get_bucket_tagging(Bucket=bucket).get("TagSet", []))
    except boto_errors.ClientError as err:
        if error_code(err) == "NoSuchTagSet":
            return {}
        raise


def _has_policy(s3: BaseClient, bucket: str) -> bool:
    try:
        s3.get_bucket_policy(Bucket=bucket)
    except boto_errors.ClientError as err:
        if error_code(err) == "NoSuchBucketPolicy":
            return False
        raise
    return True


def delete_bucket(s3: BaseClient, bucket: str, untag_first: bool) -> None:
    """DeleteBucket; with `untag_first`, its tags first, for an engine that keeps a deleted bucket's tags
    (moto) and gives them to the next bucket made under its name, which would then carry our marker (gc
    would drop someone's new bucket as our orphan, a create would adopt it). A bucket that refuses to go
    gets its tags back, if the engine still answers: elsewhere they stay on until the bucket goes."""
    tags = bucket_tags(s3, bucket) if untag_first else {}
    if tags:
        s3.delete_bucket_tagging(Bucket=bucket)
    try:
        s3.delete_bucket(Bucket=bucket)
    except Exception as err:  # a refusal, or no answer: the bucket may still stand either way
        gone = isinstance(err, boto_errors.ClientError) and error_code(err) == "NoSuchBucket"
        if tags and not gone:
            with suppress(Exception):  # the engine may be gone too: the first error says what happened
                s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tag_list(tags)})
        raise


def _versioning(s3: BaseClient, bucket: str) -> str | None:
    """"Enabled", "Suspended", or None for a bucket never versioned."""
    return s3.get_bucket_versioning(Bucket=bucket).get("Status")


def _object_lock(s3: BaseClient, bucket: str) -> bool:
    try:
        config = s3.get_object_lock_configuration(Bucket=bucket).get("ObjectLockConfiguration") or {}
    except boto_errors.ClientError as err:
        if error_code(err) == "ObjectLockConfigurationNotFoundError":
            return False
        raise
    return config.get("ObjectLockEnabled") == "Enabled"


def empty_bucket(s3: BaseClient, bucket: str, bypass_retention: bool) -> int:
    """Delete every object version, delete marker and unfinished upload; return how many objects went."""
    deleted = 0
    extra = {"BypassGovernanceRetention": True} if bypass_retention else {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        batch = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                 for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if not batch:
            continue
        # A page holds at most 1000 entries: exactly what one DeleteObjects takes.
        errors = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True}, **extra).get("Errors")
        if errors:
            first = errors[0]
            raise Unsupported("empty", f"bucket {bucket!r}", f"{len(errors)} object versions refused deletion, e.g. "
                              f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}".strip(),
                              "remove their retention or legal hold, then delete again")
        deleted += len(batch)
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for upload in page.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    return deleted


#: What S3 (and MinIO) take in a tag key or value.
_TAG_TEXT = re.compile(r"[\w .:/=+\-@]*")


class BucketSpec(BaseModel):
    """Params of a `bucket`. Object lock is fixed at creation; versioning and tags change in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    versioning: bool = False
    object_lock: bool = Field(default=False, alias="objectLock")
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("tags")
    @classmethod
    def _user_tags_only(cls, tags: dict[str, str]) -> dict[str, str]:
        reserved = sorted(set(tags) & RESERVED_TAGS)
        if reserved:
            raise ValueError(f"tag keys {', '.join(reserved)} are reserved for devstack's ownership marker")
        if len(tags) > MAX_USER_TAGS:
            raise ValueError(f"at most {MAX_USER_TAGS} tags (S3 allows 50, devstack's marker takes 3)")
        bad = [key for key, value in tags.items() if not 1 <= len(key) <= 128 or len(value) > 256]
        if bad:
            raise ValueError(f"tag keys are 1-128 and values at most 256 characters ({bad[0]!r} is not)")
        bad = [text for pair in tags.items() for text in pair if not _TAG_TEXT.fullmatch(text)]
        if bad:
            raise ValueError(f"tags hold letters, digits, spaces and _ . : / = + - @ only ({bad[0]!r} does not)")
        if any(key.lower().startswith("aws:") for key in tags):
            raise ValueError("tag keys starting with 'aws:' are reserved for AWS")
        return tags


class Bucket(GuardedKind):
    """An owner-prefixed S3 bucket tagged with the ownership marker (engine set by subclasses)."""

    kind = "bucket"
    Spec = BucketSpec
    create_only = frozenset({"object_lock"})
    attributes = ("host", "port", "region", "bucket")
    name_attribute = "bucket"
    #: Whether the engine gives a deleted bucket's tags to the next bucket of its name (see delete_bucket).
    keeps_deleted_tags: ClassVar[bool] = False

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return bucket_name(name, owner, naming=naming)

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, BucketSpec)
        if spec.object_lock and not spec.versioning:
            return [("params.versioning", "object lock needs versioning: true (locked objects are kept as versions)")]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        bucket, s3 = bucket_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        if not bucket_exists(s3, bucket):
            return None
        tags = bucket_tags(s3, bucket)
        return Observed(
            owner=tags_owner(tags),
            workspace=tags_workspace(tags),
            params={"versioning": _versioning(s3, bucket) == "Enabled", "object_lock": _object_lock(s3, bucket),
                    "tags": user_tags(tags)},
            attributes={**self._attributes(instance, bucket), "bucketPolicy": _has_policy(s3, bucket),
                        "foreignRules": sorted(str(r.get("ID") or "") for r in foreign_rules(rules_of(s3, bucket), ident.owner))},
        )

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return [attribute for attribute in ("bucketPolicy", "foreignRules") if olds.get(attribute)]

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        conflict = super()._conflict(verb, ident, observed)
        if verb != "create" or observed.owner is not None or observed.params.get("tags"):
            return conflict
        # S3 makes a bucket and tags it in two calls: one cut between them leaves an empty, untagged
        # bucket, which devstack must not take for its own (a bucket made by hand looks the same).
        instance = self._instances[ident.instance]
        bucket, s3 = bucket_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        if s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount"):
            return conflict
        return Conflict(verb, conflict.what, conflict.cause,
                        cut_short_hint("empty and untagged", instance, f"s3 rb s3://{bucket}"))

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        assert isinstance(spec, BucketSpec)
        self.enforce("create", ident, spec)
        bucket, s3 = bucket_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        adopted = bucket_exists(s3, bucket)
        if adopted:
            # `create` observed before it called this: one made meanwhile (another stack) is not ours to converge.
            self._require_holder(s3, ident, bucket, (ident.owner,))
        else:
            self._create_bucket(instance, ident, s3, bucket, spec)
            # S3 in us-east-1 (moto too) answers 200 to a create of a bucket that exists: another stack's
            # create may have come first. Only one nobody has marked is ours to tag.
            self._require_holder(s3, ident, bucket, (ident.owner, None))
        try:
            self._converge(s3, ident, bucket, spec, props.get("stack"), bucket_policy=adopted)
        except boto_errors.ClientError as err:
            if not adopted:
                delete_bucket(s3, bucket, self.keeps_deleted_tags)  # made by this call, still empty: not left unmarked
            if error_code(err) in ("InvalidTag", "MalformedXML", "InvalidArgument"):
                raise InvalidSpec("create", f"bucket {ident}", f"params.tags: the engine refused them ({err})",
                                  "change the tags; nothing was left behind") from err
            raise
        if not adopted:
            # Two such creates may both have found it unmarked; the last to tag holds it. Looked at again
            # once the other's tags would have landed, the first gives it up.
            time.sleep(_TAG_SETTLE)
            self._require_holder(s3, ident, bucket, (ident.owner,))
        self.stands(instance, ident, spec, made=not adopted)
        return self._attributes(instance, bucket)

    def _require_holder(self, s3: BaseClient, ident: Identity, bucket: str, allowed: tuple[str | None, ...]) -> None:
        holder = tags_owner(bucket_tags(s3, bucket))
        if holder not in allowed:
            raise self._conflict("create", ident, Observed(owner=holder))

    def stands(self, instance: SharedInstance, ident: Identity, spec: BucketSpec, made: bool) -> None:
        """A hook once create's bucket stands, tagged (`made`: by this call): MinIO checks its reach again."""

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = BucketSpec.model_validate(new.get("params") or {})
        self.enforce("update", ident, spec)
        bucket, s3 = bucket_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        self._converge(s3, ident, bucket, spec, new.get("stack"), bucket_policy=True)
        with bucket_lock(instance, bucket):  # the project's lifecycle rules may be written meanwhile
            rules = rules_of(s3, bucket)
            foreign = foreign_rules(rules, ident.owner)
            if foreign:
                put_rules(s3, bucket, [r for r in rules if r not in foreign])
        return self._attributes(instance, bucket)

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        bucket, s3 = bucket_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "s3")
        # S3 refuses to delete a bucket that holds anything, old versions included; the project's
        # services may still be writing into it, so it is emptied again a few times before giving up.
        for _ in range(REMOVE_ATTEMPTS):
            empty_bucket(s3, bucket, bypass_retention=bool(observed.params.get("object_lock")))
            try:
                delete_bucket(s3, bucket, self.keeps_deleted_tags)
                return
            except boto_errors.ClientError as err:
                if error_code(err) == "NoSuchBucket":
                    raise NotFound("drop", f"bucket {ident}", "it does not exist") from err
                if error_code(err) != "BucketNotEmpty":
                    raise
        raise Conflict("drop", f"bucket {ident}", "objects kept arriving while it was emptied",
                       "stop what writes into it (the project's services), then run it again; it is kept, emptied")

    # --- steps -----------------------------------------------------------

    def _create_bucket(
        self, instance: SharedInstance, ident: Identity, s3: BaseClient, bucket: str, spec: BucketSpec
    ) -> None:
        args: dict[str, Any] = {"Bucket": bucket, "ObjectLockEnabledForBucket": spec.object_lock}
        if region_of(instance) != DEFAULT_REGION:
            args["CreateBucketConfiguration"] = {"LocationConstraint": region_of(instance)}
        try:
            s3.create_bucket(**args)
        except boto_errors.ClientError as err:
            if error_code(err) in _ALREADY_EXISTS:
                # Created by someone else since we looked: not ours to tag.
                raise self._conflict("create", ident, self.observe(instance, ident) or Observed(owner=None)) from err
            raise

    @staticmethod
    def _converge(s3: BaseClient, ident: Identity, bucket: str, spec: BucketSpec, stack: str | None,
                  bucket_policy: bool) -> None:
        """Tags (marker included) and versioning as the spec says, and no bucket policy (`bucket_policy`:
        there may be one); each step idempotent."""
        if bucket_policy:
            # devstack grants access through each key's own policy; a bucket policy (public read,
            # another project's key) would reach past that.
            s3.delete_bucket_policy(Bucket=bucket)
        tags = {**spec.tags, **marker_tags(ident, stack)}
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tag_list(tags)})
        current = _versioning(s3, bucket)
        # Versioning once enabled can only be suspended, never switched off.
        wanted = "Enabled" if spec.versioning else ("Suspended" if current == "Enabled" else current)
        if wanted != current:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": wanted})

    @staticmethod
    def _attributes(instance: SharedInstance, bucket: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "region": region_of(instance), "bucket": bucket,
                "bucketPolicy": False, "foreignRules": []}
