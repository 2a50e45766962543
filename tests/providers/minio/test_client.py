"""MinIO's clients: a wrong admin secret, and another S3 server at the instance's address."""

from __future__ import annotations

import json

import pytest

from providers.errors import EngineUnavailable
from providers.minio.access_key import AccessKey
from providers.minio.bucket import MinioBucket
from tests.providers.conftest import props


def test_an_access_key_on_another_s3_server_is_refused_not_read_as_gone(owner, buckets, keys, minio_admin):
    """The instance's port pointing at LocalStack: its admin API answers as a missing bucket "minio"."""
    buckets()
    provider, outs = keys()
    aws_port = next(i.port for i in provider._instances.values() if i.engine == "localstack")
    provider._instances["objects"] = provider._instances["objects"].model_copy(update={"port": aws_port})
    refused = rf"minio instance 'objects' at 127\.0\.0\.1:{aws_port}: the server there answers as .*, not as minio"
    with pytest.raises(EngineUnavailable, match=refused):
        provider.read("id", outs)
    with pytest.raises(EngineUnavailable, match=refused):
        provider.delete("id", {**outs, "purge": True})
    assert json.loads(minio_admin.user_info(owner))["status"] == "enabled"


@pytest.mark.parametrize("kind", [MinioBucket, AccessKey], ids=["bucket", "access_key"])
def test_a_wrong_admin_secret_is_named_as_such(kind, admin, local_workspace, owner):
    """The engine runs and refuses the admin: one line naming the config key, not a client traceback."""
    from providers.errors import EngineUnavailable
    from tests.conftest import configured

    passwords = {engine: credential.password for engine, credential in admin.items()}
    provider = configured(kind(), local_workspace, {**passwords, "minio": "not-the-admin-secret"})
    inputs = provider.check({}, props("minio", "objects", kind.kind, owner, owner)).inputs
    with pytest.raises(EngineUnavailable, match="refuses the admin credentials") as refused:
        provider.create(inputs)
    secret_key = local_workspace["shared"]["objects"]["adminSecret"]
    assert f"check devstack:{secret_key} in the stack config" in str(refused.value)
