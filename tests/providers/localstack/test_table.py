"""DynamoDB tables beyond the contract: key schema, adoption and the marker tags."""

from __future__ import annotations

import pytest

from providers.errors import Unsupported
from providers.localstack.table import Table
from tests.providers.localstack.helpers import TableOutOfBand, checked


def test_a_table_the_create_call_finds_made_meanwhile_by_this_project_is_converged(provider_for, owner, monkeypatch):
    """CreateTable refused because the table exists now: the SDK retried a call whose reply was lost,
    or another run of this project made it. Ours: converged, not a Conflict against itself."""
    table, oob = provider_for(Table), TableOutOfBand()
    name = f"{owner}-items"
    try:
        table.create(checked(table, "items", owner, {"hashKey": "id"}, stack="other"))
        real, calls = table.observe, []

        def absent_at_first(*args):
            calls.append(args)
            return None if len(calls) <= 2 else real(*args)  # create and create_resource look first

        monkeypatch.setattr(table, "observe", absent_at_first)
        outs = table.create(checked(table, "items", owner, {"hashKey": "id"})).outs
        assert all(outs[k] not in (None, "") for k in Table.attributes)
        assert oob.tags(name)["devstack-stack"] == "test"
    finally:
        oob.cleanup(name)


def test_table_key_shorthand_and_range_key(provider_for, owner):
    table, oob = provider_for(Table), TableOutOfBand()
    name = f"{owner}-events"
    try:
        inputs = checked(table, "events", owner, {"hashKey": "pk", "rangeKey": {"name": "at", "type": "N"}})
        outs = table.create(inputs).outs
        schema = oob.ddb.describe_table(TableName=name)["Table"]["KeySchema"]
        assert schema == [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}]
        assert table.diff("id", table.read("id", outs).outs, inputs).changes is False
        dropped_range = {**checked(table, "events", owner, {"hashKey": "pk"}), "purge": True}
        assert table.diff("id", {**outs, "purge": True}, dropped_range).replaces == ["params.range_key"]
    finally:
        oob.cleanup(name)


def test_a_table_marker_is_read_whole_and_written_only_when_it_changes(configure, owner):
    """moto's TagResource adds a key again instead of replacing its value, and ListTagsOfResource pages (10 a
    page): after adoptions back and forth between two workspaces, the scan read an old marker on the first
    page, and gc took a table another workspace tracks for its own orphan."""
    from devstack.scan import scan

    # Each workspace's `adopt` names the other for the project, as a move there and back again does.
    tables = {"one": configure(Table(), adopt={owner: "two"}), "two": configure(Table(), adopt={owner: "one"})}
    table, oob = tables["one"], TableOutOfBand()
    name = f"{owner}-moved"
    try:
        inputs = {stack: checked(table, "moved", owner, {"hashKey": "id"}, stack=stack) for stack in ("one", "two")}
        for stack in ("one", "two", "one", "two", "one"):
            outs = tables[stack].create(inputs[stack]).outs
        (found,) = [f for f in scan(table._instances["aws"], ["table"]) if f.engine_name == name]
        assert found.stack == "one"
        arn = oob.ddb.describe_table(TableName=name)["Table"]["TableArn"]
        before = oob.ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]
        assert len(before) == 3  # one entry per marker tag
        table.update("id", outs, inputs["one"])  # the marker is already right: no tags written again
        assert oob.ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == before
    finally:
        oob.cleanup(name)


def test_table_adoption_refuses_a_different_key_schema(provider_for, owner):
    """Ours already (a retained replace) with another hash key: refused, not recorded as declared."""
    table, oob = provider_for(Table), TableOutOfBand()
    name = f"{owner}-items"
    try:
        table.create(checked(table, "items", owner, {"hashKey": {"name": "pk", "type": "N"}}))
        with pytest.raises(Unsupported, match=r'exists with params.hashKey \{"name": "pk", "type": "N"\}'):
            table.create(checked(table, "items", owner, {"hashKey": "id"}))
        schema = oob.ddb.describe_table(TableName=name)["Table"]["KeySchema"]
        assert schema == [{"AttributeName": "pk", "KeyType": "HASH"}]
    finally:
        oob.cleanup(name)
