"""Fixtures for provider tests against the real local engines.

Providers are configured exactly as Pulumi configures them: with the local
stack's workspace and the admin secrets `python -m tools.engines start`
generated, passed through `configure`.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from pulumi.dynamic import Config, ConfigureRequest

from providers.base import KindProvider
from providers.instances import WORKSPACE_KEY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def admin():
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


@pytest.fixture(scope="session")
def local_workspace() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return config[WORKSPACE_KEY]


@pytest.fixture(scope="session")
def configure(admin, local_workspace) -> Callable[[KindProvider], KindProvider]:
    """Configure a provider instance with the local workspace and admin secrets."""
    raw = {WORKSPACE_KEY: local_workspace}
    for instance in local_workspace["shared"].values():
        raw[f"devstack:{instance['adminSecret']}"] = admin[instance["engine"]].password

    def configure_provider(provider: KindProvider) -> KindProvider:
        provider.configure(ConfigureRequest(Config(raw_config=raw, project_name="devstack")))
        return provider

    return configure_provider


@pytest.fixture
def owner() -> str:
    """A fresh project name per test, so tests never collide with each other or with examples."""
    return f"t{secrets.token_hex(4)}"


def props(engine: str, instance: str, kind: str, name: str, owner: str, params: dict | None = None, **policy) -> dict:
    """Resource inputs as the component layer builds them (after check)."""
    return {
        "engine": engine, "instance": instance, "kind": kind, "name": name, "owner": owner,
        "params": params or {}, "credentials": policy.get("credentials", "predictable"),
        "purge": policy.get("purge", False), "stack": policy.get("stack", "test"),
    }
