"""The imperative verbs' choices: params as YAML, the URNs a verb targets, the entry it writes."""

from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pulumi import automation as auto
from pulumi.automation.events import OpType

from devstack import declare
from devstack.errors import InvalidQuery


def test_params_parse_as_yaml_values_with_keys_as_written():
    assert declare.parse_params(["connectionLimit=20", "readOnly=true", "locale=C.UTF-8", "extensions=[a, b]",
                                    "rotation=", "displayName=a=b"]) == {
        "connectionLimit": 20, "readOnly": True, "locale": "C.UTF-8", "extensions": ["a", "b"],
        "rotation": "", "displayName": "a=b"}
    for bad in ("novalue", "=3"):
        with pytest.raises(InvalidQuery, match="expected KEY=VALUE"):
            declare.parse_params([bad])


def test_targets_bring_missing_ancestors_and_drop_dependents(ws):
    target = declare.resolve(ws, ("minio",), "bucket", "media", project="shop")
    resource, project, workspace_urn, stack = target.urns()
    assert resource == ("urn:pulumi:dev::devstack::devstack:index:Workspace$devstack:index:Project$"
                        "pulumi-python:dynamic/minio:bucket::shop/objects/bucket/media")
    assert project == "urn:pulumi:dev::devstack::devstack:index:Workspace$devstack:index:Project::shop"
    ws.state_urns = lambda: {stack, workspace_urn}
    assert target.targets() == ([resource, project], False)
    ws.state_urns = lambda: {stack, workspace_urn, project}
    assert target.targets() == ([resource], True)


def test_declaration_omits_defaults(ws):
    own = declare.resolve(ws, ("minio",), "bucket", None, project="shop")
    assert (own.name, declare.declaration(own, {}, None)) == ("shop", {"uses": "workspace.shared.objects", "kind": "bucket"})
    named = declare.resolve(ws, ("minio",), "bucket", "media", project="shop")
    assert declare.declaration(named, {"versioning": True}, "generated") == {
        "uses": "workspace.shared.objects", "kind": "bucket", "name": "media", "params": {"versioning": True}, "credentials": "generated"}


@pytest.mark.parametrize("result", [
    auto.PreviewResult("", "", {OpType.CREATE: 2, OpType.SAME: 5, OpType.DELETE_REPLACED: 1}),
    auto.UpResult("", "", auto.UpdateSummary("update", datetime.now(timezone.utc), "", {}, {}, "succeeded",
                                             resource_changes={"create": 2, "same": 5, "delete-replaced": 1}), {}),
], ids=["preview-op-types", "up-summary-strings"])
def test_change_counts_name_each_operation_and_leave_out_same(result):
    assert declare.change_counts(result) == {"create": 2, "delete-replaced": 1}


def test_no_devstack_module_imports_a_private_name_of_another():
    """A `_name` is its module's own: a caller that needs it asks for a public function instead."""
    root = Path(declare.__file__).parent
    private = [f"{path.name}:{node.lineno} {alias.name}" for path in sorted(root.glob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("devstack")
               for alias in node.names if alias.name.startswith("_")]
    assert private == []
