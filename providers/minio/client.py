"""MinIO's admin API (minio.MinioAdmin): one client per instance and admin, its errors read.

Buckets and objects are S3 (providers.s3.client); users, policies and sessions are this API's. Over TLS
(an instance with `tls:`) it verifies the server as the S3 client does (providers.s3.client.tls_options).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from providers.clients import LazyModule, one_per_key
from providers.instances import SharedInstance
from providers.s3.client import ADMIN_REJECTED, admin_rejected, expect_server, region_of, tls_options

if TYPE_CHECKING:
    from minio.minioadmin import MinioAdmin

# Imported on the first engine call: the program, check and diff never need them.
minio_credentials = LazyModule("minio.credentials")
minio_admin = LazyModule("minio.minioadmin")
minio_errors = LazyModule("minio.error")
urllib3 = LazyModule("urllib3")

ENGINE_NAME = "minio"
#: MinIO encrypts some admin calls with a key Argon2id derives in 64 MiB of memory: one at a time in a
#: provider process, or its four worker threads' would take a quarter of a GiB at once.
ARGON2 = threading.Lock()


def _minio_only(pool: Any) -> Any:
    """`pool` whose refusals must come from MinIO (`expect_server`): another S3 server answers
    an admin call as a request for a missing bucket named "minio". MinIO names itself in the
    admin API's errors only, not in its successful answers."""
    urlopen = pool.urlopen

    def checked(*args: Any, **kwargs: Any) -> Any:
        response = urlopen(*args, **kwargs)
        if response.status >= 400:
            expect_server(ENGINE_NAME, response.headers.get("Server"))
        return response

    pool.urlopen = checked
    return pool


@one_per_key
def _admin(address: str, region: str, user: str, secret: str, secure: bool, verify: str | bool,
           client_cert: tuple[str, str] | None) -> MinioAdmin:
    credentials = minio_credentials.StaticProvider(user, secret)
    cert_file, key_file = client_cert or (None, None)
    # Fail fast when the server is down instead of the library's 5-minute default.
    http = _minio_only(urllib3.PoolManager(timeout=urllib3.Timeout(connect=3, read=30),
                                           retries=urllib3.Retry(total=2, connect=1, read=0, backoff_factor=0.2),
                                           cert_reqs="CERT_REQUIRED" if verify else "CERT_NONE",
                                           ca_certs=verify if isinstance(verify, str) else None,
                                           cert_file=cert_file, key_file=key_file))
    return minio_admin.MinioAdmin(endpoint=address, credentials=credentials, region=region, secure=secure,
                                  http_client=http)


def admin_client(instance: SharedInstance) -> MinioAdmin:
    return _admin(instance.address, region_of(instance), instance.admin_user, instance.password(),
                  instance.tls is not None, *tls_options(instance, ENGINE_NAME))


def _admin_code(err: Exception) -> str:
    try:
        return str(json.loads(err._body).get("Code", ""))  # the library keeps the body only here
    except (ValueError, AttributeError):
        return ""


def user_info(instance: SharedInstance, admin: MinioAdmin, user: str) -> dict[str, Any] | None:
    try:
        return json.loads(admin.user_info(user))
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) == "XMinioAdminNoSuchUser":
            return None
        if _admin_code(err) in ADMIN_REJECTED:  # the first admin call of every verb: a wrong secret shows here
            raise admin_rejected(instance, "minio", err) from err
        raise


class _AdminCall:
    """An admin API path minio-py has no method for; its signer takes any path with a `value`."""

    def __init__(self, path: str) -> None:
        self.value = path


def revoke_sessions(admin: MinioAdmin, user: str) -> None:
    """Revoke every temporary (STS) credential of `user`.

    Any user may mint them with AssumeRole, for up to a year, and no policy can
    deny it. They would outlive a rotation, and MinIO keeps them when the user
    is removed: a user made later under the same name (another project's key,
    say) would bring them back with its own policy.
    """
    admin._url_open(method="POST", command=_AdminCall("revoke-tokens/builtin"),
                    query_params={"user": user, "fullRevoke": "true"})


def list_service_accounts(admin: MinioAdmin, user: str) -> list[str]:
    with ARGON2:
        accounts = json.loads(admin.list_service_account(user) or "{}").get("accounts") or []
    return [account["accessKey"] if isinstance(account, dict) else account for account in accounts]


def policy_document(admin: MinioAdmin, policy: str) -> dict[str, Any] | None:
    try:
        return json.loads(admin.policy_info(policy))
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) == "XMinioAdminNoSuchPolicy":
            return None
        raise


def ignore_missing(call, *codes: str) -> None:
    try:
        call()
    except minio_errors.MinioAdminException as err:
        if _admin_code(err) not in codes:
            raise
