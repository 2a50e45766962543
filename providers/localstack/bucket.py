"""LocalStack's `bucket`: the S3 bucket of providers.s3.bucket."""

from __future__ import annotations

from providers.localstack.client import ENGINE_NAME
from providers.s3.bucket import Bucket


class LocalstackBucket(Bucket):
    engine = ENGINE_NAME
    keeps_deleted_tags = True
