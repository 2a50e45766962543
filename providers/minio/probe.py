"""`devstack doctor`'s check of a MinIO server: the admin logs in to the admin API; the version it reports."""

from __future__ import annotations

import json

from providers.engine import Probed, Rejected
from providers.errors import first_line
from providers.instances import SharedInstance
from providers.minio.client import admin_client, minio_errors


def probe(instance: SharedInstance) -> Probed:
    try:
        info = json.loads(admin_client(instance).info())
    except minio_errors.MinioAdminException as err:
        if str(getattr(err, "_code", "")) in ("401", "403"):
            raise Rejected(first_line(err)) from err
        raise
    versions = sorted({server.get("version", "") for server in info.get("servers", [])} - {""})
    return Probed(", ".join(versions) or "unknown")
