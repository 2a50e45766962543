"""MinIO keys: a MinIO user and the one policy devstack attaches to it, which is also its marker.

MinIO users carry no tags or comments, so the policy is the marker: its `ID` holds
providers.markers.ownership_marker and its name the reserved prefix `devstack-`. An access key's policy
reaches the project's buckets (`<owner>`, `<owner>-*`, and those it names); a bucket's own key
(`<bucket>~key`) reaches that bucket alone. Neither may reshape a bucket: that stays with devstack.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from providers import naming as naming_rules
from providers.credentials import MINIO_SECRET_MINIMUM, password_for
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.minio.client import (ARGON2, ignore_missing, list_service_accounts, policy_document,
                                    revoke_sessions, user_info)
from providers.s3.client import boto_errors, client_as, error_code

if TYPE_CHECKING:
    from minio.minioadmin import MinioAdmin

POLICY_PREFIX = "devstack-"
BUCKET_KEY_SUFFIX = "~key"
#: Bucket management stays with devstack: a tenant key may use its buckets, not reshape them.
MANAGEMENT_ACTIONS = (
    "s3:CreateBucket", "s3:DeleteBucket", "s3:ForceDeleteBucket", "s3:PutBucketTagging",
    "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration", "s3:PutBucketObjectLockConfiguration", "s3:PutEncryptionConfiguration",
    "s3:PutBucketNotification", "s3:PutReplicationConfiguration",
)
#: A user may mint service accounts for itself unless denied: credentials that would outlive a rotation.
SELF_SERVICE_ACTIONS = ("admin:CreateServiceAccount", "admin:UpdateServiceAccount")


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


def key_state(instance: SharedInstance, admin: MinioAdmin, key: str,
              expected: dict[str, Any] | Callable[[dict[str, Any] | None], dict[str, Any]], *,
              service_accounts: bool = True) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """(user info, its devstack policy, what differs out of band from a key with policy `expected`, or
    the policy `expected` makes of the live one); (None, None, []) when there is no such user.
    `service_accounts`: look for them too (MinIO encrypts that answer with a key Argon2 derives, at a
    cost in CPU on every call)."""
    info = user_info(instance, admin, key)
    if info is None:
        return None, None, []
    document = policy_document(admin, policy_name(key))
    out_of_band = []
    if info.get("status") != "enabled":
        out_of_band.append("status")
    if not _policy_current(expected(document) if callable(expected) else expected, key, info, document):
        out_of_band.append("policy")
    if info.get("memberOf"):  # a group's policies would reach beyond the key's buckets
        out_of_band.append("groups")
    if service_accounts and list_service_accounts(admin, key):  # made out of band: they would outlive a rotation
        out_of_band.append("serviceAccounts")
    return info, document, out_of_band


def converge_key(instance: SharedInstance, admin: MinioAdmin, key: str, secret: str, policy: dict[str, Any],
                 *, end_sessions: bool = False, fresh: bool = False) -> None:
    """Policy, user (secret, enabled), the one attachment, no group and no service account
    (and, with `end_sessions`, no temporary credential); each call idempotent. `fresh`: the
    user did not exist, so it is in no group and has no service account (not asked, see key_state)."""
    admin.policy_add(policy_name(key), policy=policy)
    with ARGON2:
        admin.user_add(key, secret)  # creates, or resets secret and status of, the user
    if end_sessions:
        revoke_sessions(admin, key)
    admin.policy_set(policy_name(key), user=key)  # replaces whatever else was attached
    if fresh:
        return
    for group in (user_info(instance, admin, key) or {}).get("memberOf") or []:
        admin.group_remove(group, [key])
    for account in list_service_accounts(admin, key):
        admin.delete_service_account(account)


def secret_works(instance: SharedInstance, key: str, secret: str) -> bool:
    """Whether the stored secret still signs requests (a reset out of band breaks it)."""
    try:
        client_as(instance, "s3", key, secret).list_buckets()
    except boto_errors.ClientError as err:
        return error_code(err) != "SignatureDoesNotMatch"
    return True


def remove_key(admin: MinioAdmin, key: str) -> None:
    """Sessions, user and policy of `key`; each already gone is fine."""
    ignore_missing(lambda: revoke_sessions(admin, key), "XMinioAdminNoSuchUser")  # before the user: MinIO keeps them
    ignore_missing(lambda: admin.user_remove(key), "XMinioAdminNoSuchUser")
    # After the user: MinIO refuses to remove a policy that is still attached.
    ignore_missing(lambda: admin.policy_remove(policy_name(key)), "XMinioAdminNoSuchPolicy")


def remove_marked_key(admin: MinioAdmin, key: str, owner: str) -> None:
    """`remove_key`, when the key's policy carries `owner`'s marker (a drop cut short, run again)."""
    document = policy_document(admin, policy_name(key))
    if document is not None and marker_owner(document.get("ID")) == owner:
        remove_key(admin, key)


def key_secret(ident: Identity, key: str, rotation: int, policy: str, previous: str | None = None) -> str:
    """The secret key under the credential policy, padded to MinIO's minimum; a new `rotation` derives
    (or draws) a new one."""
    principal = key if rotation == 0 else f"{key}#rotation-{rotation}"  # as the legacy hash spells it
    return password_for(ident, principal, policy, previous, rotation=rotation, minimum=MINIO_SECRET_MINIMUM)
