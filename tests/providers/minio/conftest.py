"""Fixtures of the MinIO kinds' tests, against the real MinIO server."""

from __future__ import annotations

import pytest
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin

from providers.identity import PREFIXED
from providers.minio.access_key import AccessKey
from providers.minio.bucket import MinioBucket
from tests.providers.conftest import props
from tests.providers.minio.helpers import ENDPOINT, MINIO, MinioBucketOutOfBand
from tests.providers.s3.contract import BucketOutOfBand, require_server


@pytest.fixture(scope="module", autouse=True)
def minio_running():
    require_server(f"{ENDPOINT}/minio/health/live", "MinIO (instance 'objects')", "minio")


@pytest.fixture
def minio_admin(admin) -> MinioAdmin:
    return MinioAdmin(endpoint=MINIO, credentials=StaticProvider(admin["minio"].user, admin["minio"].password), secure=False)


@pytest.fixture
def oob(admin, minio_admin) -> BucketOutOfBand:
    return MinioBucketOutOfBand(minio_admin, ENDPOINT, admin["minio"].user, admin["minio"].password)


@pytest.fixture
def buckets(configure, owner, oob):
    """Create a project's buckets by declaration name; all of them are removed after the test."""
    made: list[str] = []

    def make(name: str = "data", project: str | None = None, params: dict | None = None, **policy) -> dict:
        provider = configure(MinioBucket())
        inputs = provider.check({}, props("minio", "objects", "bucket", name, project or owner, params, **policy)).inputs
        outs = provider.create(inputs).outs
        made.append(outs["bucket"])
        return outs

    yield make
    for bucket in made:
        oob.cleanup(bucket)


@pytest.fixture
def keys(configure, owner, minio_admin):
    """Create access keys; their users and policies are removed after the test."""
    made: list[str] = []

    def make(name: str | None = None, project: str | None = None, **policy) -> tuple[AccessKey, dict]:
        provider = configure(AccessKey())
        project = project or owner
        inputs = provider.check({}, props("minio", "objects", "access_key", name or project, project,
                                          policy.pop("params", {}), **policy)).inputs
        made.append(AccessKey.engine_name(name or project, project, naming=PREFIXED))
        return provider, provider.create(inputs).outs

    yield make
    for key in made:
        for call in (lambda: minio_admin.user_remove(key), lambda: minio_admin.policy_remove(f"devstack-{key}")):
            try:
                call()
            except MinioAdminException:
                pass
