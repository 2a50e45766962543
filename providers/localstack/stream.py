"""The `stream` kind: a provisioned Kinesis data stream tagged with the ownership marker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field


from providers.errors import Conflict
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.localstack.client import location, missing, vanished_is_none, wait_until
from providers.localstack.kind import AwsKind, AwsSpec
from providers.localstack.names import plain_name
from providers.s3.client import aws_client, boto_errors
from providers.s3.guarded import cut_short_hint
from providers.s3.tags import marker_tags, tag_dict, tags_owner, tags_workspace
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.client import BaseClient


class StreamSpec(AwsSpec):
    """Params of a `stream` (provisioned mode); both change in place."""

    shard_count: int = Field(default=1, ge=1, le=500, alias="shardCount")
    retention_hours: int = Field(default=24, ge=24, le=8760, alias="retentionHours")


def _stream_summary(kinesis: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    except boto_errors.ClientError as err:
        if missing(err, "ResourceNotFoundException"):
            return None
        raise
    return None if summary.get("StreamStatus") == "DELETING" else summary


def _on_demand(summary: dict[str, Any]) -> bool:
    return (summary.get("StreamModeDetails") or {}).get("StreamMode") == "ON_DEMAND"


class Stream(AwsKind):
    """A provisioned Kinesis data stream tagged with the ownership marker."""

    kind = "stream"
    name_attribute = "stream"
    Spec = StreamSpec
    attributes = ("host", "port", "region", "stream", "streamArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return plain_name(name, owner, service="Kinesis stream", length=(1, 128), naming=naming)

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "kinesis")
        summary = _stream_summary(kinesis, name)
        if summary is None:
            return None
        tags = tag_dict(kinesis.list_tags_for_stream(StreamName=name).get("Tags", []))
        # Switched to on-demand out of band, it has no fixed shard count: none, which the next up sets again.
        shards = None if _on_demand(summary) else summary.get("OpenShardCount")
        return Observed(
            owner=tags_owner(tags),
            workspace=tags_workspace(tags),
            params={"shard_count": shards, "retention_hours": summary.get("RetentionPeriodHours")},
            attributes={**location(instance), "stream": name, "streamArn": summary["StreamARN"]},
        )

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        conflict = super()._conflict(verb, ident, observed)
        if verb != "create" or observed.owner is not None:
            return conflict
        # moto ignores CreateStream's tags and converge adds them after: a create cut between the two
        # leaves an untagged stream, which devstack must not take for its own (one made by hand looks the same).
        name, instance = self.engine_name(ident.name, ident.owner, naming=ident.naming), self._instances[ident.instance]
        if aws_client(instance, "kinesis").list_tags_for_stream(StreamName=name).get("Tags"):
            return conflict
        return Conflict(verb, conflict.what, conflict.cause,
                        cut_short_hint("untagged", instance, f"kinesis delete-stream --stream-name {name}"))

    def make(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> None:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "kinesis")
        try:
            kinesis.create_stream(StreamName=name, ShardCount=spec.shard_count,
                                  StreamModeDetails={"StreamMode": "PROVISIONED"}, Tags=marker_tags(ident, stack))
        except boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, kinesis, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> dict[str, Any]:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "kinesis")
        # Tags first: some servers (moto) ignore the Tags of CreateStream.
        kinesis.add_tags_to_stream(StreamName=name, Tags=marker_tags(ident, stack))
        summary = _stream_summary(kinesis, name) or {}
        if _on_demand(summary):  # the shard count of an on-demand stream cannot be set
            kinesis.update_stream_mode(StreamARN=summary["StreamARN"], StreamModeDetails={"StreamMode": "PROVISIONED"})
            self._wait_active(instance, kinesis, name)
            summary = _stream_summary(kinesis, name) or {}
        if summary.get("OpenShardCount") != spec.shard_count:
            kinesis.update_shard_count(StreamName=name, TargetShardCount=spec.shard_count, ScalingType="UNIFORM_SCALING")
            self._wait_active(instance, kinesis, name)
        retention = summary.get("RetentionPeriodHours", 24)
        if retention < spec.retention_hours:
            kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=spec.retention_hours)
        elif retention > spec.retention_hours:
            kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=spec.retention_hours)
        return {**location(instance), "stream": name, "streamArn": summary.get("StreamARN")}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        name = observed.attributes["stream"]
        aws_client(instance, "kinesis").delete_stream(StreamName=name, EnforceConsumerDeletion=True)

    @staticmethod
    def _wait_active(instance: SharedInstance, kinesis: BaseClient, name: str) -> None:
        wait_until(lambda: (_stream_summary(kinesis, name) or {}).get("StreamStatus") == "ACTIVE",
                   f"Kinesis stream {name!r}", instance)
