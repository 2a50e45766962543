"""Spec 27's MinIO entries as validation reads them: a bucket's own credentials and a lifecycle
without `params.bucket` (on the bucket of its own name). LocalStack buckets keep refusing
`credentials: generated`: moto checks no signature, so a key would protect nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.components.test_validation import HEADER, marked_line, problems
from tools.engines.ports import PORTS

WORKSPACE = {"name": "test", "shared": {
    "minio": {"engine": "minio", "host": "127.0.0.1", "port": PORTS["minio"], "adminUser": "admin", "adminSecret": "m"},
    "aws": {"engine": "localstack", "host": "127.0.0.1", "port": PORTS["localstack"], "adminUser": "test", "adminSecret": "l"},
}}
SPEC_EXAMPLE = HEADER.replace("name: shop", "name: acme") + """resources:
  - uses: workspace.shared.minio
    kind: bucket
    name: acme-uploads
    credentials: generated
  - uses: workspace.shared.minio
    kind: lifecycle
    name: acme-uploads
    params: { expireDays: 7 }
"""


def test_spec_27s_bucket_with_generated_credentials_and_its_lifecycle_are_valid(tmp_path):
    assert problems(tmp_path, SPEC_EXAMPLE, workspace=WORKSPACE) == []


@pytest.mark.parametrize("engine, refused", [("minio", False), ("aws", True)], ids=["minio", "localstack"])
def test_generated_credentials_on_a_bucket(tmp_path: Path, engine, refused):
    text = HEADER + f"resources:\n  - uses: {engine}\n    kind: bucket\n    credentials: generated  # <-\n"
    found = [(p.path, p.line, "has no credentials of its own" in p.message)
             for p in problems(tmp_path, text, workspace=WORKSPACE)]
    assert found == ([("resources[0].credentials", marked_line(text), True)] if refused else [])


def test_a_lifecycle_without_a_bucket_needs_a_bucket_of_its_own_name(tmp_path):
    text = SPEC_EXAMPLE.replace("    name: acme-uploads\n    credentials", "    name: acme-media\n    credentials")
    text = text.replace("expireDays: 7 }\n", "expireDays: 7 }  # <-\n")
    (problem,) = problems(tmp_path, text, workspace=WORKSPACE)
    assert (problem.path, problem.line) == ("resources[1].params.bucket", marked_line(text))
    assert "unset, so the bucket of its own name, names no bucket 'acme-uploads'" in problem.message
