import pytest

# Shared by the MinIO and LocalStack tests: their assertions report as a test module's do.
pytest.register_assert_rewrite("tests.providers.s3.contract")
