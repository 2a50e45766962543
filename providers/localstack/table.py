"""The `table` kind: a DynamoDB table tagged with the ownership marker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator


from providers.identity import Identity
from providers.instances import SharedInstance
from providers.localstack.client import location, missing, vanished_is_none, wait_until
from providers.localstack.kind import AwsKind, AwsSpec
from providers.localstack.names import plain_name
from providers.s3.client import aws_client, boto_errors
from providers.s3.tags import marker_tags, tag_dict, tag_list, tags_owner, tags_workspace
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.client import BaseClient


class KeySpec(AwsSpec):
    """One key attribute: `{name: id, type: S}`, or just `id` (a string key)."""

    name: str = Field(min_length=1, max_length=255)
    type: Literal["S", "N", "B"] = "S"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class TableSpec(AwsSpec):
    """Params of a `table`. The key schema is fixed at creation; billing, throughput and TTL change in place."""

    hash_key: KeySpec = Field(alias="hashKey")
    range_key: KeySpec | None = Field(default=None, alias="rangeKey")
    billing_mode: Literal["PAY_PER_REQUEST", "PROVISIONED"] = Field(default="PAY_PER_REQUEST", alias="billingMode")
    read_capacity: int | None = Field(default=None, ge=1, alias="readCapacity")
    write_capacity: int | None = Field(default=None, ge=1, alias="writeCapacity")
    ttl_attribute: str | None = Field(default=None, min_length=1, max_length=255, alias="ttlAttribute")


def table_tags(ddb: BaseClient, arn: str) -> dict[str, str]:
    """Every tag of a table, a page at a time (10 on moto). moto's TagResource adds a key again instead of
    replacing its value (the last one is live) and then pages by key, round and round: stop at a token seen."""
    tags: dict[str, str] = {}
    token: str | None = None
    seen: set[str] = set()
    while True:
        page = ddb.list_tags_of_resource(ResourceArn=arn, **({"NextToken": token} if token else {}))
        tags.update(tag_dict(page.get("Tags", [])))
        token = page.get("NextToken")
        if not token or token in seen:
            return tags
        seen.add(token)


def _describe_table(ddb: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        table = ddb.describe_table(TableName=name)["Table"]
    except boto_errors.ClientError as err:
        if missing(err, "ResourceNotFoundException"):
            return None
        raise
    return None if table.get("TableStatus") == "DELETING" else table


def _throughput(spec: TableSpec) -> dict[str, int | None]:
    return {"ReadCapacityUnits": spec.read_capacity, "WriteCapacityUnits": spec.write_capacity}


def _table_params(table: dict[str, Any], ttl: dict[str, Any]) -> dict[str, Any]:
    """The live table in the shape of TableSpec.model_dump()."""
    types = {d["AttributeName"]: d["AttributeType"] for d in table.get("AttributeDefinitions", [])}
    keys = {k["KeyType"]: k["AttributeName"] for k in table.get("KeySchema", [])}
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
    throughput = (table.get("ProvisionedThroughput") or {}) if billing == "PROVISIONED" else {}
    return {
        "hash_key": {"name": keys["HASH"], "type": types.get(keys["HASH"], "S")},
        "range_key": {"name": keys["RANGE"], "type": types.get(keys["RANGE"], "S")} if "RANGE" in keys else None,
        "billing_mode": billing,
        "read_capacity": throughput.get("ReadCapacityUnits"),
        "write_capacity": throughput.get("WriteCapacityUnits"),
        "ttl_attribute": ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else None,
    }


class Table(AwsKind):
    """A DynamoDB table tagged with the ownership marker."""

    kind = "table"
    name_attribute = "table"
    Spec = TableSpec
    create_only = frozenset({"hash_key", "range_key"})
    attributes = ("host", "port", "region", "table", "tableArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return plain_name(name, owner, service="DynamoDB table", length=(3, 255), naming=naming)

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, TableSpec)
        provisioned = spec.billing_mode == "PROVISIONED"
        rules = []
        for field, value in (("readCapacity", spec.read_capacity), ("writeCapacity", spec.write_capacity)):
            if provisioned and value is None:
                rules.append((f"params.{field}", "is required with billingMode: PROVISIONED"))
            if not provisioned and value is not None:
                rules.append((f"params.{field}", "applies only with billingMode: PROVISIONED"))
        if spec.range_key and spec.range_key.name == spec.hash_key.name:
            rules.append(("params.rangeKey", "must differ from hashKey"))
        return rules

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name)
        if table is None:
            return None
        ttl = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        tags = table_tags(ddb, table["TableArn"])
        return Observed(owner=tags_owner(tags), workspace=tags_workspace(tags), params=_table_params(table, ttl),
                        attributes={**location(instance), "table": name, "tableArn": table["TableArn"]})

    def make(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> None:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "dynamodb")
        keys = [(spec.hash_key, "HASH")] + ([(spec.range_key, "RANGE")] if spec.range_key else [])
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": [{"AttributeName": key.name, "KeyType": role} for key, role in keys],
            "AttributeDefinitions": [{"AttributeName": key.name, "AttributeType": key.type} for key, _ in keys],
            "BillingMode": spec.billing_mode,
            "Tags": tag_list(marker_tags(ident, stack)),
        }
        if spec.billing_mode == "PROVISIONED":
            args["ProvisionedThroughput"] = _throughput(spec)
        try:
            ddb.create_table(**args)
        except boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, ddb, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> dict[str, Any]:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name) or {}
        live = _table_params(table, ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {}))
        self._converge_billing(instance, ddb, name, spec, live)
        self._converge_ttl(ddb, name, spec.ttl_attribute, live["ttl_attribute"])
        marker = marker_tags(ident, stack)
        if not marker.items() <= table_tags(ddb, table["TableArn"]).items():
            # Untagged first: moto would keep the old values beside the new ones.
            ddb.untag_resource(ResourceArn=table["TableArn"], TagKeys=sorted(marker))
            ddb.tag_resource(ResourceArn=table["TableArn"], Tags=tag_list(marker))
        return {**location(instance), "table": name, "tableArn": table["TableArn"]}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        aws_client(instance, "dynamodb").delete_table(TableName=observed.attributes["table"])

    
    def _converge_billing(
        self, instance: SharedInstance, ddb: BaseClient, name: str, spec: TableSpec, live: dict[str, Any]
    ) -> None:
        wanted = (spec.billing_mode, spec.read_capacity, spec.write_capacity)
        if wanted == (live["billing_mode"], live["read_capacity"], live["write_capacity"]):
            return
        args: dict[str, Any] = {"TableName": name, "BillingMode": spec.billing_mode}
        if spec.billing_mode == "PROVISIONED":
            args["ProvisionedThroughput"] = _throughput(spec)
        ddb.update_table(**args)
        self._wait_active(instance, ddb, name)

    @staticmethod
    def _converge_ttl(ddb: BaseClient, name: str, wanted: str | None, live: str | None) -> None:
        """DynamoDB enables TTL on one attribute at a time: disable the old one before enabling another."""
        if live and live != wanted:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": False, "AttributeName": live})
        if wanted and wanted != live:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": wanted})

    @staticmethod
    def _wait_active(instance: SharedInstance, ddb: BaseClient, name: str) -> None:
        wait_until(lambda: (_describe_table(ddb, name) or {}).get("TableStatus") == "ACTIVE",
                   f"DynamoDB table {name!r}", instance)
