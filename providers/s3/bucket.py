"""S3, and the AWS-API plumbing MinIO and LocalStack share.

One S3 implementation serves both object-storage engines: the `bucket` kind
(and MinIO's `lifecycle`) speak S3 through boto3 with path-style addressing,
so `providers.minio` and `providers.localstack` only name the engine. Besides
the S3 kinds, this module holds what every kind of those two engines needs:

- one boto3 client per (instance, service, key), built lazily from one session and never pickled;
- `GuardedKind`: name rules reported by `check`, connection failures turned
  into EngineUnavailable, and ownership re-checked before any update or drop;
- the ownership marker as tags (`managed-by=devstack`, `devstack-owner`,
  `devstack-stack`): tag values cannot hold the JSON text of
  `base.ownership_marker`, so each fact is one tag;
- owner-prefixed engine names: `<owner>-<name>`, or `<owner>` alone when the
  declaration is named after its project.
"""

from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager, suppress
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, ContextManager, Iterator, Mapping

from pulumi.dynamic import CheckFailure, CheckResult
from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers import naming as naming_rules
from providers.base import KindProvider, Observed, referenced_name
from providers.clients import LazyModule, one_per_key
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound, Unsupported, first_line
from providers.identity import CURRENT_NAMING, PREFIXED, Identity, naming_of
from providers.instances import SharedInstance

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

# Imported on the first engine call: the program, check and diff never need them.
boto3 = LazyModule("boto3")
botocore_config = LazyModule("botocore.config")
boto_errors = LazyModule("botocore.exceptions")
urllib3_errors = LazyModule("urllib3.exceptions")

DEFAULT_REGION = "us-east-1"
MANAGED_TAG, MANAGED_VALUE = "managed-by", "devstack"
OWNER_TAG, STACK_TAG = "devstack-owner", "devstack-stack"
RESERVED_TAGS = frozenset({MANAGED_TAG, OWNER_TAG, STACK_TAG})
#: S3 allows 50 tags on a bucket; the marker takes three of them.
MAX_USER_TAGS = 50 - len(RESERVED_TAGS)


def transport_failures() -> tuple[type[Exception], ...]:
    """Errors that mean the engine did not answer (as opposed to answering "no")."""
    return boto_errors.ConnectionError, boto_errors.HTTPClientError, urllib3_errors.HTTPError


# --- plumbing ---------------------------------------------------------------


def region_of(instance: SharedInstance) -> str:
    """us-east-1 unless the instance names a region (SharedInstance has no such field yet)."""
    return instance.region or DEFAULT_REGION


def endpoint_of(instance: SharedInstance) -> str:
    return f"http://{instance.host}:{instance.port}"


@cache
def _session() -> Any:
    """The boto3 session every client is built from, so service models and endpoint rules are parsed once.

    A session is not safe across threads (its clients are): only `_client` calls
    this, and it runs under one_per_key's lock.
    """
    return boto3.session.Session()


class ForeignServer(Exception):
    """An answer from another kind of server than the instance's engine."""


def expect_server(engine: str, server: str | None) -> None:
    """Refuse an answer MinIO gave for LocalStack, or another server gave for MinIO.

    Each speaks S3 well enough to answer: a port that points at the other one
    would read every bucket as gone, and a refresh would drop them from the ledger.
    MinIO names itself in every response's Server header.
    """
    if ("minio" in (server or "").lower()) != (engine == "minio"):
        raise ForeignServer(f"the server there answers as {server or 'an unnamed server'}, not as {engine}")


@one_per_key
def _client(service: str, endpoint: str, region: str, key: str, secret: str, engine: str) -> BaseClient:
    config = botocore_config.Config(
        connect_timeout=3,
        read_timeout=30,
        retries={"max_attempts": 2, "mode": "standard"},
        # MinIO and moto serve buckets under the endpoint's path, not as subdomains.
        s3={"addressing_style": "path"},
    )
    client = _session().client(
        service, endpoint_url=endpoint, region_name=region,
        aws_access_key_id=key, aws_secret_access_key=secret, config=config,
    )
    # Every answer, errors included, passes here before the client parses or raises it.
    client.meta.events.register("after-call", lambda http_response, **_: expect_server(engine, http_response.headers.get("Server")))
    return client


def aws_client(instance: SharedInstance, service: str) -> BaseClient:
    """The admin client of `service` on `instance` (thread-safe, cached per process)."""
    return _client(service, endpoint_of(instance), region_of(instance), instance.admin_user, instance.password(),
                   instance.engine)


def client_as(instance: SharedInstance, service: str, key: str, secret: str) -> BaseClient:
    """A client of `service` on `instance` signing with another key pair (a tenant's)."""
    return _client(service, endpoint_of(instance), region_of(instance), key, secret, instance.engine)


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def http_status(err: ClientError) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


#: Error codes with which an S3 engine refuses the admin credentials themselves (HeadBucket says only 403).
ADMIN_REJECTED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "403")


def admin_rejected(instance: SharedInstance, engine: str, err: Exception) -> EngineUnavailable:
    cause = first_line(err)
    return EngineUnavailable("log in to", f"{engine} instance {instance.name!r} at {instance.address}",
                             f"it refuses the admin credentials ({cause})",
                             f"check devstack:{instance.admin_secret} in the stack config")


@contextmanager
def reachable(instance: SharedInstance, engine: str) -> Iterator[None]:
    """Turn "the engine did not answer" (or refused the admin) into EngineUnavailable naming it,
    its address and the fix."""
    try:
        yield
    except boto_errors.ClientError as err:
        if error_code(err) not in ADMIN_REJECTED:
            raise
        raise admin_rejected(instance, engine, err) from err
    except ForeignServer as err:
        raise EngineUnavailable("connect to", f"{engine} instance {instance.name!r} at {instance.address}", str(err),
                                f"check shared.{instance.name}.host and .port in the stack config") from err
    except transport_failures() as err:
        raise EngineUnavailable(
            "connect to", f"{engine} instance {instance.name!r} at {instance.address}", first_line(err),
            instance.start_hint(),
        ) from err


#: How many times a bucket's removal empties it and tries DeleteBucket.
REMOVE_ATTEMPTS = 3


def prefixed(name: str, owner: str) -> str:
    """`<owner>-<name>`, or `<owner>` alone for the declaration named after its project."""
    return owner if name == owner else f"{owner}-{name}"


def marker_tags(ident: Identity, stack: str | None) -> dict[str, str]:
    """The ownership marker as tags (empty tag values are dropped by some engines: never send one)."""
    return {MANAGED_TAG: MANAGED_VALUE, OWNER_TAG: ident.owner, STACK_TAG: stack or "unknown"}


def tags_owner(tags: dict[str, str]) -> str | None:
    """The owner the marker tags name, or None when the resource carries no marker of ours."""
    if tags.get(MANAGED_TAG) != MANAGED_VALUE:
        return None
    return tags.get(OWNER_TAG) or None


def tags_workspace(tags: dict[str, str]) -> str | None:
    """The workspace the marker tags name ("unknown": made where none was known), None when not ours."""
    stack = tags.get(STACK_TAG) if tags_owner(tags) else None
    return None if stack == "unknown" else stack


def user_tags(tags: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in tags.items() if key not in RESERVED_TAGS}


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    """Tags as the `[{"Key": .., "Value": ..}]` list most AWS APIs take."""
    return [{"Key": key, "Value": value} for key, value in sorted(tags.items())]


def tag_dict(tags: list[dict[str, str]]) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in tags}


def prefixed_name(name: str, owner: str, *, service: str, length: tuple[int, int], charset: re.Pattern[str],
                  allowed: str) -> str:
    """`prefixed(name, owner)` when it keeps `service`'s naming rules; InvalidSpec naming the broken one."""
    mapped = prefixed(name, owner)
    rule = name_rule(mapped, service=service, length=length, charset=charset, allowed=allowed)
    if rule:
        raise InvalidSpec("map", f"{service} name {mapped!r}", rule)
    return mapped


def name_rule(mapped: str, *, service: str, length: tuple[int, int], charset: re.Pattern[str], allowed: str) -> str | None:
    """The first naming rule `mapped` breaks, or None: length first, then characters."""
    low, high = length
    if not low <= len(mapped) <= high:
        return f"{service} names are {low}-{high} characters long ({mapped!r} has {len(mapped)})"
    if not charset.fullmatch(mapped):
        return f"{service} names use only {allowed} ({mapped!r} does not)"
    return None


# --- the shared verbs -------------------------------------------------------


class GuardedKind(KindProvider):
    """Verbs every S3/AWS-API/MinIO kind shares on top of the base.

    `check` also reports the engine-name rules and the cross-field rules of
    `spec_rules`; every verb reports an unreachable engine as
    EngineUnavailable; `drop` observes first, as every kind's `update` does,
    and acts only on a resource that exists and carries this project's marker
    (a resource that changed hands since the last refresh is never touched).
    Kinds implement `remove` instead of `drop`.
    """

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        """(field, message) for each rule across fields (or name and params) the spec breaks, for a resource
        named by `naming`."""
        return []

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        """Drop a resource `drop` has verified to exist and to be ours."""
        raise NotImplementedError

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result = super().check(olds, news)  # identity, engine name and params
        name, owner = str(news.get("name") or ""), str(news.get("owner") or "")
        if not result.failures:
            spec = self.Spec.model_validate(result.inputs.get("params") or {})
            rules = self.spec_rules(name, owner, spec, naming=naming_of(news, CURRENT_NAMING))
            result.failures.extend(CheckFailure(field, message) for field, message in rules)
        return result

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        self.remove(instance, ident, self._owned(instance, ident, "drop"))

    # --- helpers ---------------------------------------------------------

    def enforce(self, verb: str, ident: Identity, spec: BaseModel) -> None:
        """Raise InvalidSpec for the first broken cross-field rule (for callers that skipped check)."""
        broken = self.spec_rules(ident.name, ident.owner, spec, naming=ident.naming)
        if broken:
            field, message = broken[0]
            raise InvalidSpec(verb, f"{self.kind} {ident}", f"{field}: {message}")

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        return reachable(instance, self.engine)


# --- buckets ----------------------------------------------------------------

_BUCKET_CHARS = re.compile(r"[a-z0-9.-]+")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_ALREADY_EXISTS = ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")
#: Seconds from tagging a bucket just made to looking at its tags again (see Bucket.create_resource).
_TAG_SETTLE = 0.1


def bucket_rule(mapped: str) -> str | None:
    """The first S3 bucket naming rule `mapped` breaks, or None."""
    rule = name_rule(mapped, service="S3 bucket", length=(3, 63), charset=_BUCKET_CHARS,
                     allowed="lowercase letters, digits, '-' and '.'")
    if rule:
        return rule
    if not (mapped[0].isalnum() and mapped[-1].isalnum()):
        return f"S3 bucket names begin and end with a letter or digit ({mapped!r} does not)"
    if ".." in mapped:
        return f"S3 bucket names must not contain '..' ({mapped!r} does)"
    if _IPV4.fullmatch(mapped):
        return f"S3 bucket names must not look like an IP address ({mapped!r} does)"
    if mapped.startswith(_RESERVED_PREFIXES) or mapped.endswith(_RESERVED_SUFFIXES):
        return f"S3 reserves the prefixes {', '.join(_RESERVED_PREFIXES)} and the suffixes {', '.join(_RESERVED_SUFFIXES)}"
    return None


def bucket_name(name: str, owner: str, *, naming: int) -> str:
    """The bucket of a declaration: its name sanitized (SANITIZED), or owner-prefixed (PREFIXED, where
    InvalidSpec names the S3 rule it breaks)."""
    if naming != PREFIXED:
        return naming_rules.bucket(name)
    mapped = prefixed(name, owner)
    rule = bucket_rule(mapped)
    if rule:
        raise InvalidSpec("map", f"bucket name {mapped!r}", rule,
                          "buckets are named `<project>-<name>`, or after the project alone")
    return mapped


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


def cut_short_hint(state: str, instance: SharedInstance, aws_command: str) -> str:
    """The hint of a create's Conflict with an object that may be a create cut short: made, not yet tagged."""
    return (f"it is {state}, as a create cut short leaves it, or as another stack's create leaves it for a "
            f"moment: if it is still so in a minute, remove it with the instance's admin credentials (`aws "
            f"--endpoint-url {endpoint_of(instance)} {aws_command}`) and run `pulumi up` again; otherwise choose "
            "another `name` for this resource; nothing was changed")


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

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
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
                        "foreignRules": sorted(str(r.get("ID") or "") for r in _foreign_rules(_rules(s3, bucket), ident.owner))},
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
        with _bucket_lock(instance, bucket):  # the project's lifecycle rules may be written meanwhile
            rules = _rules(s3, bucket)
            foreign = _foreign_rules(rules, ident.owner)
            if foreign:
                _put_rules(s3, bucket, [r for r in rules if r not in foreign])
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


# --- lifecycle rules --------------------------------------------------------

RULE_PREFIX = "devstack:"
_RULE_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")
_bucket_locks: dict[tuple[str, str], threading.Lock] = {}
_bucket_locks_guard = threading.Lock()


@contextmanager
def _bucket_lock(instance: SharedInstance, bucket: str) -> Iterator[None]:
    """Serialize read-modify-write of one bucket's lifecycle configuration within this process.

    A bucket's rules are one document; two lifecycle declarations on one
    bucket are applied in parallel by Pulumi's workers and must not lose each
    other's rule.
    """
    with _bucket_locks_guard:
        lock = _bucket_locks.setdefault((instance.address, bucket), threading.Lock())
    with lock:
        yield


def rule_id(name: str, owner: str, *, naming: int) -> str:
    """`devstack:<owner>:<name>`: the reserved prefix is the rule's ownership marker (rules carry no tags).
    Rule ids take any text: SANITIZED keeps both parts as they are (no name devstack accepts has a ':')."""
    mapped = f"{RULE_PREFIX}{owner}:{name}"
    if naming != PREFIXED:
        prefix = f"{RULE_PREFIX}{owner}:"
        return mapped if len(mapped) <= 255 else prefix + naming_rules.suffixed(name, name, 255 - len(prefix))
    if len(mapped) > 255:
        raise InvalidSpec("map", f"lifecycle rule {mapped!r}", "S3 lifecycle rule ids are at most 255 characters")
    if not (_RULE_NAME.fullmatch(name) and _RULE_NAME.fullmatch(owner)):
        raise InvalidSpec("map", f"lifecycle rule {mapped!r}",
                          "lifecycle names use lowercase letters, digits, '-' and '.', starting with a letter or digit")
    return mapped


def _has_policy(s3: BaseClient, bucket: str) -> bool:
    try:
        s3.get_bucket_policy(Bucket=bucket)
    except boto_errors.ClientError as err:
        if error_code(err) == "NoSuchBucketPolicy":
            return False
        raise
    return True


def _rules(s3: BaseClient, bucket: str) -> list[dict[str, Any]]:
    try:
        return list(s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", []))
    except boto_errors.ClientError as err:
        if error_code(err) == "NoSuchLifecycleConfiguration":
            return []
        raise


def _foreign_rules(rules: list[dict[str, Any]], owner: str) -> list[dict[str, Any]]:
    """The lifecycle rules no lifecycle of the project made: one set outside devstack may expire every object."""
    return [r for r in rules if not str(r.get("ID") or "").startswith(f"{RULE_PREFIX}{owner}:")]


def _put_rules(s3: BaseClient, bucket: str, rules: list[dict[str, Any]]) -> None:
    if rules:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    else:
        s3.delete_bucket_lifecycle(Bucket=bucket)


def _rule(rule_id: str, expire_days: int | None, prefix: str, enabled: bool) -> dict[str, Any]:
    """A rule as devstack writes it: expiry after some days, for one prefix, and nothing else."""
    return {"ID": rule_id, "Status": "Enabled" if enabled else "Disabled",
            "Filter": {"Prefix": prefix}, "Expiration": {"Days": expire_days}}


def _rule_params(rule: dict[str, Any]) -> dict[str, Any]:
    rule_filter = rule.get("Filter") or {}
    prefix = rule_filter.get("Prefix", (rule_filter.get("And") or {}).get("Prefix", rule.get("Prefix", "")))
    return {"expire_days": (rule.get("Expiration") or {}).get("Days"), "prefix": prefix or "",
            "enabled": rule.get("Status") == "Enabled"}


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

    def defaults(self, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        return {**super().defaults(params, name, owner), **({"bucket": name} if "bucket" in params else {})}

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
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
        params = _rule_params(found)
        # Anything written beside what those params say (a tag filter, non-current versions expired...)
        # changes what the rule deletes.
        in_sync = found == _rule(rule, **params)
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
        with _bucket_lock(instance, bucket):
            _put_rules(s3, bucket, [r for r in _rules(s3, bucket) if r.get("ID") != rule])

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
        wanted = _rule(rule, spec.expire_days, spec.prefix, spec.enabled)
        for elsewhere, _ in self._locate(s3, ident, rule):
            if elsewhere != bucket:
                with _bucket_lock(instance, elsewhere):
                    _put_rules(s3, elsewhere, [r for r in _rules(s3, elsewhere) if r.get("ID") != rule])
        with _bucket_lock(instance, bucket):
            rules = [r for r in _rules(s3, bucket) if r.get("ID") != rule]
            _put_rules(s3, bucket, rules + [wanted])
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
                found += [(bucket, r) for r in _rules(s3, bucket) if r.get("ID") == rule]
            except boto_errors.ClientError as err:
                if error_code(err) != "NoSuchBucket":  # dropped while we looked: nothing there
                    raise
        return found
