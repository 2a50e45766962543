"""MinIO: buckets, lifecycle rules and bucket-scoped access keys.

Buckets and lifecycle rules are the shared S3 implementation of
`providers.s3`. Access keys are MinIO users made through the admin API
(`minio.MinioAdmin`): one user per declaration, with one canned policy that
reaches only the project's buckets (`<owner>` and `<owner>-*`) and leaves
bucket management (create, delete, tags, versioning, lifecycle, policy) to
devstack. MinIO users carry no tags or comments, so the policy is the marker:
its `ID` holds `base.ownership_marker` and its name the reserved prefix
`devstack-`.

Each MinIO bucket has a key of its own too (spec 27's `credentials:` on a
bucket): the user `<bucket>~key`, whose policy reaches that bucket alone
and whose marker says `"kind": "bucket"`. `~` is outside every access key
name, so the two kinds never meet on one user.
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field
from pulumi.dynamic import ReadResult

from providers import naming as naming_rules
from providers import s3
from providers.base import REACH, KindProvider, Observed
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.clients import LazyModule, one_per_key
from providers.credentials import MINIO_SECRET_MINIMUM, password_for
from providers.errors import Conflict, InvalidSpec, NotFound
from providers.identity import CURRENT_NAMING, PREFIXED, Identity
from providers.instances import SharedInstance

if TYPE_CHECKING:
    from minio.minioadmin import MinioAdmin

# Imported on the first engine call: the program, check and diff never need them.
minio_credentials = LazyModule("minio.credentials")
minio_admin = LazyModule("minio.minioadmin")
minio_errors = LazyModule("minio.error")
urllib3 = LazyModule("urllib3")

ENGINE = "minio"
POLICY_PREFIX = "devstack-"
BUCKET_KEY_SUFFIX = "~key"
#: MinIO encrypts some admin calls with a key Argon2id derives in 64 MiB of memory: one at a time in a
#: provider process, or its four worker threads' would take a quarter of a GiB at once.
_ARGON2 = threading.Lock()
_ACCESS_KEY = re.compile(r"[a-z0-9][a-z0-9._-]*")
#: Bucket management stays with devstack: a tenant key may use its buckets, not reshape them.
MANAGEMENT_ACTIONS = (
    "s3:CreateBucket", "s3:DeleteBucket", "s3:ForceDeleteBucket", "s3:PutBucketTagging",
    "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration", "s3:PutBucketObjectLockConfiguration", "s3:PutEncryptionConfiguration",
    "s3:PutBucketNotification", "s3:PutReplicationConfiguration",
)
#: A user may mint service accounts for itself unless denied: credentials that would outlive a rotation.
SELF_SERVICE_ACTIONS = ("admin:CreateServiceAccount", "admin:UpdateServiceAccount")


class MinioBucket(s3.Bucket):
    """An S3 bucket on MinIO, kept out of reach of other projects' access keys.

    A key of project P reaches every bucket named `P` or `P-*`, and project
    names may extend each other (`shop`, `shop-admin`): a bucket of
    `shop-admin` would sit within `shop`'s reach. Creating such a bucket is an
    identity conflict (and `AccessKey` refuses the converse).
    """

    engine = ENGINE
    attributes = (*s3.Bucket.attributes, "accessKey", "secretKey")
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
        reaching = _reaching(s3.bucket_name(name, owner, naming=CURRENT_NAMING), owner, holders.get("access_key", ()))
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
            info, _, out_of_band = _key_state(instance, admin, key, bucket_key_policy(ident, bucket, None),
                                              service_accounts=False)
            observed.attributes.update(accessKey=key, keyOutOfBand=out_of_band if info else ["accessKey"])
        return observed

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if result.id and props.get("secretKey") and not {"accessKey", "status"} & set(result.outs["keyOutOfBand"]):
            instance = self._instance(Identity.from_props(props), "read")
            with self.engine_errors(props):
                if not _secret_works(instance, result.outs["accessKey"], props["secretKey"]):
                    result.outs["keyOutOfBand"] = [*result.outs["keyOutOfBand"], "secretKey"]
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return [*super().drift(olds), *(olds.get("keyOutOfBand") or [])]

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        bucket, admin = self.engine_name(ident.name, ident.owner, naming=ident.naming), admin_client(instance)
        _refuse_keys_in_reach(admin, ident, bucket)
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

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, props)
        except NotFound:
            # The bucket went (a drop cut short, or out of band): its key must not outlive it, or it
            # would reach the next bucket made under that name, whoever's it is.
            _remove_marked_key(admin_client(instance), bucket_key_name(self.engine_name(ident.name, ident.owner, naming=ident.naming)),
                               ident.owner)
            raise

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        # The key first: a bucket whose drop fails stays, visible to gc; a key left alone would not be.
        _remove_key(admin_client(instance), bucket_key_name(self.engine_name(ident.name, ident.owner, naming=ident.naming)))
        super().remove(instance, ident, observed)

    # --- the bucket's key ------------------------------------------------

    def _refuse_foreign_key(self, instance: SharedInstance, admin: MinioAdmin, ident: Identity, bucket: str,
                            stored: Mapping[str, Any], verb: str) -> bool:
        """Conflict when the bucket's key name is a user devstack did not make for this project: another
        project's, or one without our marker that the state (`stored`: outputs) does not say we made.
        Whether the user exists."""
        key = bucket_key_name(bucket)
        if _user_info(instance, admin, key) is None:
            return False
        document = _policy_document(admin, policy_name(key))
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
        secret = _secret(ident, key, 0, new.get("credentials", "predictable"), previous)
        _converge_key(instance, admin, key, secret, bucket_key_policy(ident, bucket, new.get("stack")),
                      end_sessions=secret != old.get("secretKey"), fresh=fresh)
        return {"accessKey": key, "secretKey": secret, "keyOutOfBand": []}

    def stands(self, instance: SharedInstance, ident: Identity, spec: s3.BucketSpec, made: bool) -> None:
        # Checked again now that the bucket stands: a key made meanwhile (by another project of this
        # up, or another stack) was checked before it did. Each side checks after its own effect,
        # so of a racing bucket and key at least one sees the other and undoes itself.
        try:
            _refuse_keys_in_reach(admin_client(instance), ident, s3.bucket_name(ident.name, ident.owner, naming=ident.naming))
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


class MinioLifecycle(s3.Lifecycle):
    engine = ENGINE


# --- admin API ---------------------------------------------------------------


def _minio_only(pool: Any) -> Any:
    """`pool` whose refusals must come from MinIO (`s3.expect_server`): another S3 server answers
    an admin call as a request for a missing bucket named "minio". MinIO names itself in the
    admin API's errors only, not in its successful answers."""
    urlopen = pool.urlopen

    def checked(*args: Any, **kwargs: Any) -> Any:
        response = urlopen(*args, **kwargs)
        if response.status >= 400:
            s3.expect_server(ENGINE, response.headers.get("Server"))
        return response

    pool.urlopen = checked
    return pool


@one_per_key
def _admin(address: str, region: str, user: str, secret: str) -> MinioAdmin:
    credentials = minio_credentials.StaticProvider(user, secret)
    # Fail fast when the server is down instead of the library's 5-minute default.
    http = _minio_only(urllib3.PoolManager(timeout=urllib3.Timeout(connect=3, read=30),
                                           retries=urllib3.Retry(total=2, connect=1, read=0, backoff_factor=0.2)))
    return minio_admin.MinioAdmin(endpoint=address, credentials=credentials, region=region, secure=False,
                                  http_client=http)


def admin_client(instance: SharedInstance) -> MinioAdmin:
    return _admin(instance.address, s3.region_of(instance), instance.admin_user, instance.password())


def _admin_code(err: Exception) -> str:
    try:
        return str(json.loads(err._body).get("Code", ""))  # the library keeps the body only here
    except (ValueError, AttributeError):
        return ""


def _user_info(instance: SharedInstance, admin: MinioAdmin, user: str) -> dict[str, Any] | None:
    try:
        return json.loads(admin.user_info(user))
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) == "XMinioAdminNoSuchUser":
            return None
        if _admin_code(err) in s3.ADMIN_REJECTED:  # the first admin call of every verb: a wrong secret shows here
            raise s3.admin_rejected(instance, "minio", err) from err
        raise


class _AdminCall:
    """An admin API path minio-py has no method for; its signer takes any path with a `value`."""

    def __init__(self, path: str) -> None:
        self.value = path


def _end_sessions(admin: MinioAdmin, user: str) -> None:
    """Revoke every temporary (STS) credential of `user`.

    Any user may mint them with AssumeRole, for up to a year, and no policy can
    deny it. They would outlive a rotation, and MinIO keeps them when the user
    is removed: a user made later under the same name (another project's key,
    say) would bring them back with its own policy.
    """
    admin._url_open(method="POST", command=_AdminCall("revoke-tokens/builtin"),
                    query_params={"user": user, "fullRevoke": "true"})


def _service_accounts(admin: MinioAdmin, user: str) -> list[str]:
    with _ARGON2:
        accounts = json.loads(admin.list_service_account(user) or "{}").get("accounts") or []
    return [account["accessKey"] if isinstance(account, dict) else account for account in accounts]


def _policy_document(admin: MinioAdmin, policy: str) -> dict[str, Any] | None:
    try:
        return json.loads(admin.policy_info(policy))
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) == "XMinioAdminNoSuchPolicy":
            return None
        raise


def _ignore_missing(call, *codes: str) -> None:
    try:
        call()
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) not in codes:
            raise


# --- naming, policy and reach ----------------------------------------------------


def access_key_name(name: str, owner: str, *, naming: int) -> str:
    """The MinIO user (its access key id): the name sanitized, or owner-prefixed (PREFIXED, where
    InvalidSpec names the rule it breaks)."""
    if naming != PREFIXED:
        return naming_rules.minio_access_key(name)
    return s3.prefixed_name(name, owner, service="MinIO access key", length=(3, 128), charset=_ACCESS_KEY,
                            allowed="lowercase letters, digits, '-', '_' and '.', starting with a letter or digit")


def policy_name(access_key: str) -> str:
    return POLICY_PREFIX + access_key


def project_buckets(owner: str) -> list[str]:
    """ARNs of every bucket (and its objects) the project's pattern covers: `<owner>` and `<owner>-*`, the
    project name mapped as its default bucket is."""
    mapped = naming_rules.bucket(owner)
    return [f"arn:aws:s3:::{mapped}", f"arn:aws:s3:::{mapped}/*", f"arn:aws:s3:::{mapped}-*", f"arn:aws:s3:::{mapped}-*/*"]


def within_reach(bucket: str, owner: str) -> bool:
    """Whether a key of project `owner` reaches `bucket` by its pattern (`<owner>` and `<owner>-*`)."""
    mapped = naming_rules.bucket(owner)
    return bucket == mapped or bucket.startswith(mapped + "-")


def key_owners(admin: MinioAdmin) -> set[str]:
    """Projects holding access keys on this server, read from the markers of devstack's policies."""
    policies = json.loads(admin.policy_list() or "{}")
    markers = [(doc or {}).get("ID") for name, doc in policies.items() if name.startswith(POLICY_PREFIX)]
    # A bucket's own key reaches that bucket alone, not the project's `<owner>-*`.
    owners = {marker_owner(marker) for marker in markers if marker_field(marker, "kind") != "bucket"}
    return {owner for owner in owners if owner}


def bucket_key_name(bucket: str) -> str:
    """The MinIO user (access key id) of a bucket's own key: `~` keeps it apart from every access key."""
    return bucket + BUCKET_KEY_SUFFIX


def key_bucket(user: str) -> str | None:
    """The bucket whose own key `user` is named as, None for any other user."""
    return user.removesuffix(BUCKET_KEY_SUFFIX) if user.endswith(BUCKET_KEY_SUFFIX) else None


def _key_policy(marker: str, buckets: list[str]) -> dict[str, Any]:
    """Everything on `buckets` (ARNs) except reshaping them; nothing anywhere else.

    No s3:ListAllMyBuckets: MinIO then lists only the buckets the key can use.
    """
    return {
        "Version": "2012-10-17",
        "ID": marker,
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:*"], "Resource": buckets},
            {"Effect": "Deny", "Action": list(MANAGEMENT_ACTIONS), "Resource": buckets},
            {"Effect": "Deny", "Action": list(SELF_SERVICE_ACTIONS)},
        ],
    }


def tenant_policy(ident: Identity, stack: str | None, exact: Iterable[str] = ()) -> dict[str, Any]:
    """An access key's policy: the project's buckets, by pattern and, for those named otherwise, `exact`."""
    arns = [arn for bucket in sorted(exact) for arn in (f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*")]
    return _key_policy(ownership_marker(ident, stack or ""), project_buckets(ident.owner) + arns)


def policy_buckets(document: Mapping[str, Any] | None, owner: str) -> list[str]:
    """The buckets a key's policy names one by one, beyond the project's pattern."""
    found = set()
    for statement in (document or {}).get("Statement", []):
        resources = statement.get("Resource") or []
        for arn in [resources] if isinstance(resources, str) else resources:
            bucket = str(arn).removeprefix("arn:aws:s3:::").split("/")[0]
            if "*" not in bucket and not within_reach(bucket, owner):
                found.add(bucket)
    return sorted(found)


def bucket_key_policy(ident: Identity, bucket: str, stack: str | None) -> dict[str, Any]:
    """A bucket's own key's policy: that bucket and its objects. Its marker's kind keeps it out of
    `key_owners`, as it reaches no `<owner>-*` pattern."""
    marker = json.dumps({**json.loads(ownership_marker(ident, stack or "")), "kind": "bucket"}, sort_keys=True)
    return _key_policy(marker, [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"])


def _policy_current(expected: dict[str, Any], key: str, info: dict[str, Any], document: dict[str, Any] | None) -> bool:
    """Exactly our policy is attached to the user, and it says what `expected` says."""
    attached = [name for name in str(info.get("policyName") or "").split(",") if name]
    if attached != [policy_name(key)] or document is None:
        return False
    return _statements(document) == _statements(expected)


def _statements(document: dict[str, Any]) -> set[frozenset[tuple[str, Any]]]:
    """Whole statements, compared as sets: MinIO stores lists unordered and may add empty fields. Every
    field counts: a Condition or NotAction on a Deny turns it off as surely as removing it."""
    def canonical(value: Any) -> Any:
        if isinstance(value, dict):
            return frozenset((key, canonical(item)) for key, item in value.items() if item not in (None, "", [], {}))
        if isinstance(value, list):
            return frozenset(canonical(item) for item in value)
        return frozenset([value]) if isinstance(value, str) else value  # "s3:*" and ["s3:*"] are one

    return {canonical({key: value for key, value in st.items() if key != "Sid"})
            for st in document.get("Statement", [])}


# --- keys: a MinIO user and its one policy ---------------------------------------


def _key_state(instance: SharedInstance, admin: MinioAdmin, key: str,
               expected: dict[str, Any] | Callable[[dict[str, Any] | None], dict[str, Any]], *,
               service_accounts: bool = True) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """(user info, its devstack policy, what differs out of band from a key with policy `expected`, or
    the policy `expected` makes of the live one); (None, None, []) when there is no such user.
    `service_accounts`: look for them too (MinIO encrypts that answer with a key derived by Argon2:
    some 0.3 s of CPU per call)."""
    info = _user_info(instance, admin, key)
    if info is None:
        return None, None, []
    document = _policy_document(admin, policy_name(key))
    out_of_band = []
    if info.get("status") != "enabled":
        out_of_band.append("status")
    if not _policy_current(expected(document) if callable(expected) else expected, key, info, document):
        out_of_band.append("policy")
    if info.get("memberOf"):  # a group's policies would reach beyond the key's buckets
        out_of_band.append("groups")
    if service_accounts and _service_accounts(admin, key):  # made out of band: they would outlive a rotation
        out_of_band.append("serviceAccounts")
    return info, document, out_of_band


def _converge_key(instance: SharedInstance, admin: MinioAdmin, key: str, secret: str, policy: dict[str, Any],
                  *, end_sessions: bool = False, fresh: bool = False) -> None:
    """Policy, user (secret, enabled), the one attachment, no group and no service account
    (and, with `end_sessions`, no temporary credential); each call idempotent. `fresh`: the
    user did not exist, so it is in no group and has no service account (not asked, see _key_state)."""
    admin.policy_add(policy_name(key), policy=policy)
    with _ARGON2:
        admin.user_add(key, secret)  # creates, or resets secret and status of, the user
    if end_sessions:
        _end_sessions(admin, key)
    admin.policy_set(policy_name(key), user=key)  # replaces whatever else was attached
    if fresh:
        return
    for group in (_user_info(instance, admin, key) or {}).get("memberOf") or []:
        admin.group_remove(group, [key])
    for account in _service_accounts(admin, key):
        admin.delete_service_account(account)


def _secret_works(instance: SharedInstance, key: str, secret: str) -> bool:
    """Whether the stored secret still signs requests (a reset out of band breaks it)."""
    try:
        s3.client_as(instance, "s3", key, secret).list_buckets()
    except s3.boto_errors.ClientError as err:
        return s3.error_code(err) != "SignatureDoesNotMatch"
    return True


def _remove_key(admin: MinioAdmin, key: str) -> None:
    """Sessions, user and policy of `key`; each already gone is fine."""
    _ignore_missing(lambda: _end_sessions(admin, key), "XMinioAdminNoSuchUser")  # before the user: MinIO keeps them
    _ignore_missing(lambda: admin.user_remove(key), "XMinioAdminNoSuchUser")
    # After the user: MinIO refuses to remove a policy that is still attached.
    _ignore_missing(lambda: admin.policy_remove(policy_name(key)), "XMinioAdminNoSuchPolicy")


def _remove_marked_key(admin: MinioAdmin, key: str, owner: str) -> None:
    """`_remove_key`, when the key's policy carries `owner`'s marker (a drop cut short, run again)."""
    document = _policy_document(admin, policy_name(key))
    if document is not None and marker_owner(document.get("ID")) == owner:
        _remove_key(admin, key)


# --- the kind -----------------------------------------------------------------


class AccessKeySpec(BaseModel):
    """Params of an `access_key`. Bumping `rotation` issues a new secret key in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    rotation: int = Field(default=0, ge=0)


class AccessKey(s3.GuardedKind):
    """A MinIO user whose policy reaches only the project's buckets.

    The secret key follows the resource's credential policy (`predictable`:
    the project's name with the rotation, repeated up to MinIO's 8
    characters, see providers.credentials; `generated`: random, kept across
    updates until `rotation` changes) and is always a secret output. `read`
    reports out-of-band changes (user disabled, policy detached or edited,
    secret reset, added to a group, service accounts made for it) in
    `outOfBand`, which the next diff turns into an update.
    """

    engine = ENGINE
    kind = "access_key"
    logins = True
    Spec = AccessKeySpec
    # The project's own buckets first: one still being made (not yet tagged) would look foreign.
    after_kinds = ("bucket",)
    attributes = ("host", "port", "accessKey", "secretKey", "policy")
    secret_outputs = ("secretKey",)
    # 2: the policy denies setting a bucket's encryption, notifications and replication (2026-11-30).
    access_rules = 2
    # The project's buckets named otherwise than `<owner>`/`<owner>-*` are listed in the policy by name.
    reach_kind = "bucket"

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
        info, document, out_of_band = _key_state(
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
        if result.id and props.get("secretKey") and "status" not in result.outs.get("outOfBand", []):
            ident = Identity.from_props(props)
            instance, key = self._instance(ident, "read"), access_key_name(ident.name, ident.owner, naming=ident.naming)
            with self.engine_errors(props):
                if not _secret_works(instance, key, props["secretKey"]):
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
        document = _policy_document(admin, policy_name(key))
        if document is not None and marker_owner(document.get("ID")) != ident.owner:
            # Another project's policy, or one without a marker: not ours to rewrite.
            raise self._policy_taken(ident, key, marker_owner(document.get("ID")))
        self._refuse_foreign_buckets_in_reach(instance, ident)
        made = _user_info(instance, admin, key) is None
        secret = _secret(ident, key, spec.rotation, props.get("credentials", "predictable"))
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
        secret = _secret(ident, key, spec.rotation, new.get("credentials", "predictable"),
                         old.get("secretKey") if unchanged else None)
        # A new secret ends the sessions the old one minted, as it ends the old secret.
        self._converge(instance, admin_client(instance), ident, key, secret, new.get("stack"),
                       self._reach(instance, ident, new), end_sessions=secret != old.get("secretKey"))
        return self._attributes(instance, key, secret)

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, props)
        except NotFound:
            # A drop cut after the user went, run again: its policy goes too, or it would keep every
            # `<owner>-*` bucket of another project out of reach of creation, with nothing to remove it.
            _remove_marked_key(admin_client(instance), access_key_name(ident.name, ident.owner, naming=ident.naming), ident.owner)
            raise

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        _remove_key(admin_client(instance), access_key_name(ident.name, ident.owner, naming=ident.naming))

    # --- steps -----------------------------------------------------------

    def _refuse_foreign_buckets_in_reach(self, instance: SharedInstance, ident: Identity) -> None:
        """The key would reach `<owner>-*`: no bucket of another project (or none of ours) may sit there."""
        listed = [b["Name"] for b in s3.aws_client(instance, "s3").list_buckets().get("Buckets", [])]
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
        admin_s3, foreign = s3.aws_client(instance, "s3"), []
        for bucket in buckets:
            try:
                holder = s3.tags_owner(s3.bucket_tags(admin_s3, bucket))
            except s3.boto_errors.ClientError as err:
                if s3.error_code(err) == "NoSuchBucket":  # gone since it was named: nothing to reach there
                    continue
                raise
            if holder != ident.owner:
                foreign.append((bucket, holder))
        return foreign

    @staticmethod
    def _converge(instance: SharedInstance, admin: MinioAdmin, ident: Identity, key: str, secret: str,
                  stack: str | None, exact: Iterable[str] = (), *, end_sessions: bool = False) -> None:
        _converge_key(instance, admin, key, secret, tenant_policy(ident, stack, exact), end_sessions=end_sessions)

    @staticmethod
    def _attributes(instance: SharedInstance, key: str, secret: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "accessKey": key, "secretKey": secret,
                "policy": policy_name(key), "outOfBand": []}


def _secret(ident: Identity, key: str, rotation: int, policy: str, previous: str | None = None) -> str:
    """The secret key under the credential policy, padded to MinIO's minimum; a new `rotation` derives
    (or draws) a new one."""
    principal = key if rotation == 0 else f"{key}#rotation-{rotation}"  # as the legacy hash spells it
    return password_for(ident, principal, policy, previous, rotation=rotation, minimum=MINIO_SECRET_MINIMUM)


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"bucket": MinioBucket, "lifecycle": MinioLifecycle, "access_key": AccessKey}
