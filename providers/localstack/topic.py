"""The `topic` kind: an SNS topic, standard or FIFO, tagged with the ownership marker."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


from providers.identity import Identity
from providers.instances import SharedInstance
from providers.localstack.client import account_id, location, missing, vanished_is_none
from providers.localstack.kind import AwsKind, AwsSpec
from providers.localstack.names import fifo_capable_name, fifo_rules
from providers.s3.client import aws_client, boto_errors, region_of
from providers.s3.tags import marker_tags, tag_dict, tag_list, tags_owner, tags_workspace
from providers.markers import Observed


class TopicSpec(AwsSpec):
    """Params of a `topic`. FIFO is fixed at creation; the display name changes in place."""

    fifo: bool = False
    display_name: str = Field(default="", max_length=100, alias="displayName")
    content_based_deduplication: bool = Field(default=False, alias="contentBasedDeduplication")


def _topic_attributes(spec: TopicSpec) -> dict[str, str]:
    attributes = {"DisplayName": spec.display_name}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Topic(AwsKind):
    """An SNS topic, standard or FIFO, tagged with the ownership marker."""

    kind = "topic"
    name_attribute = "topic"
    Spec = TopicSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "topic", "topicArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SNS topic", limit=256, naming=naming)

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, TopicSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "topic")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sns")
        # SNS has no lookup by name; the ARN is determined by region, account and name.
        arn = f"arn:aws:sns:{region_of(instance)}:{account_id(instance)}:{name}"
        try:
            live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        except boto_errors.ClientError as err:
            if missing(err, "NotFound", "NotFoundException"):
                return None
            raise
        params = {"fifo": live.get("FifoTopic") == "true", "display_name": live.get("DisplayName", ""),
                  "content_based_deduplication": live.get("ContentBasedDeduplication") == "true"}
        tags = tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        return Observed(owner=tags_owner(tags), workspace=tags_workspace(tags), params=params,
                        attributes={**location(instance), "topic": name, "topicArn": arn})

    def make(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any] | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sns")
        attributes = {**_topic_attributes(spec), **({"FifoTopic": "true"} if spec.fifo else {})}
        marker = marker_tags(ident, stack)
        arn = sns.create_topic(Name=name, Attributes=attributes, Tags=tag_list(marker))["TopicArn"]
        # CreateTopic is idempotent: an existing topic must already be ours.
        tags = tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a topic another run made needs re-marking.
        return {**location(instance), "topic": name, "topicArn": arn} if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any]:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sns")
        arn = f"arn:aws:sns:{region_of(instance)}:{account_id(instance)}:{name}"
        live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        for attribute, value in _topic_attributes(spec).items():
            if live.get(attribute, "") != value:
                sns.set_topic_attributes(TopicArn=arn, AttributeName=attribute, AttributeValue=value)
        sns.tag_resource(ResourceArn=arn, Tags=tag_list(marker_tags(ident, stack)))
        return {**location(instance), "topic": name, "topicArn": arn}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        aws_client(instance, "sns").delete_topic(TopicArn=observed.attributes["topicArn"])
