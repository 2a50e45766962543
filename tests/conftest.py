"""Shared fixtures and helpers: the repo root on sys.path, providers configured as Pulumi does, schemas."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.pulumi_env import let_plugins_see_sigint  # noqa: E402 - needs the root on sys.path

let_plugins_see_sigint()  # a suite run in the background would otherwise stall 5s per pulumi command

P = TypeVar("P")


def configured(provider: P, workspace: dict[str, Any], passwords: dict[str, str]) -> P:
    """`provider` configured as Pulumi configures it: the workspace (with its `shared`
    instances) and each instance's admin secret, the password of its engine in `passwords`."""
    from pulumi.dynamic import Config, ConfigureRequest

    from providers.instances import WORKSPACE_KEY

    raw = {WORKSPACE_KEY: workspace}
    for instance in workspace["shared"].values():
        raw[f"devstack:{instance['adminSecret']}"] = passwords[instance["engine"]]
    provider.configure(ConfigureRequest(Config(raw_config=raw, project_name="devstack")))
    return provider


@pytest.fixture(scope="session")
def validator():
    """Checks a JSON document of the devstack CLI against its schema in devstack/schemas/ (all checked valid first)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schemas = {p.name: json.loads(p.read_text()) for p in (ROOT / "devstack" / "schemas").glob("*.schema.json")}
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas.values()])
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)

    def validate(name: str, document: dict) -> None:
        Draft202012Validator(schemas[name], registry=registry,
                             format_checker=Draft202012Validator.FORMAT_CHECKER).validate(document)

    return validate
