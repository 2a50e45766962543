"""Shared fixtures: the repo root on sys.path and the local stack's admin credentials."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.pulumi_env import let_plugins_see_sigint  # noqa: E402 - needs the root on sys.path

let_plugins_see_sigint()  # a suite run in the background would otherwise stall 5s per pulumi command


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
