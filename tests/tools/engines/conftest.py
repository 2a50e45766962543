"""The engine scripts' tests use the provider tests' fixtures: admin credentials, the local workspace."""

from tests.providers.conftest import admin, configure, local_workspace, owner, through_proxy  # noqa: F401 - fixtures
