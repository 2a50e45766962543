"""The imperative verbs' choices: params as YAML, the URNs a verb targets, the entry it writes."""

from __future__ import annotations

import pytest

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
