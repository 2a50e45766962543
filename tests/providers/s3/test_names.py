"""Bucket names: S3's rules for both engines, and MinIO's own beside them."""

from __future__ import annotations

import pytest

from providers.errors import InvalidSpec
from providers.identity import PREFIXED


def test_a_bucket_name_with_a_hyphen_next_to_a_dot_is_s3s_to_take_but_not_minios(owner):
    """S3 (and moto) accept `a-.b`; MinIO answers 400. Refusing it for S3 too would strand buckets an
    earlier release made: their name would no longer map, so nothing could read or drop them."""
    from providers.localstack.bucket import LocalstackBucket
    from providers.minio.bucket import MinioBucket

    assert LocalstackBucket.engine_name("a-.b", owner, naming=PREFIXED) == f"{owner}-a-.b"
    with pytest.raises(InvalidSpec, match="MinIO bucket names must not have '-' next to '.'"):
        MinioBucket.engine_name("a-.b", owner, naming=PREFIXED)
