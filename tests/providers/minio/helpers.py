"""Out-of-band access to MinIO, and clients signing with a tenant's key."""

from __future__ import annotations

from botocore.exceptions import ClientError
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin

from tests.providers.s3.contract import BucketOutOfBand, aws
from tools.engines.ports import PORTS

MINIO = f"127.0.0.1:{PORTS['minio']}"
ENDPOINT = f"http://{MINIO}"


class MinioBucketOutOfBand(BucketOutOfBand):
    """A bucket's cleanup removes the bucket's own key (user and policy) too."""

    def __init__(self, admin_api: MinioAdmin, *args):
        super().__init__(*args)
        self.admin = admin_api

    def cleanup(self, name):
        super().cleanup(name)
        for call in (lambda: self.admin.user_remove(f"{name}~key"), lambda: self.admin.policy_remove(f"devstack-{name}~key")):
            try:
                call()
            except MinioAdminException:
                pass


def as_key(outs: dict):
    return aws("s3", ENDPOINT, outs["accessKey"], outs["secretKey"])


def denied(call) -> bool:
    try:
        call()
    except ClientError as err:
        return err.response["Error"]["Code"] in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")
    return False
