"""MinIO's `lifecycle`: the S3 expiration rule of providers.s3.lifecycle."""

from __future__ import annotations

from providers.minio.client import ENGINE_NAME
from providers.s3.lifecycle import Lifecycle


class MinioLifecycle(Lifecycle):
    engine = ENGINE_NAME
