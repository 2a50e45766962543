"""The `queue` kind: an SQS queue, standard or FIFO, tagged with the ownership marker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field


from providers.identity import Identity
from providers.instances import SharedInstance
from providers.localstack.client import location, missing, vanished_is_none
from providers.localstack.kind import AwsKind, AwsSpec
from providers.localstack.names import fifo_capable_name, fifo_rules
from providers.s3.client import aws_client, boto_errors
from providers.s3.tags import marker_tags, tags_owner, tags_workspace
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.client import BaseClient


#: Spec field -> SQS attribute, all integers.
QUEUE_ATTRIBUTES = {
    "visibility_timeout": "VisibilityTimeout",
    "message_retention_period": "MessageRetentionPeriod",
    "delay_seconds": "DelaySeconds",
    "receive_wait_time_seconds": "ReceiveMessageWaitTimeSeconds",
}

#: Settings a queue has none of unless set outside devstack: a dead-letter queue (moving messages to
#: any queue, another project's too) and an access policy. Drift when set.
QUEUE_EXTRAS = ("RedrivePolicy", "Policy")


class QueueSpec(AwsSpec):
    """Params of a `queue`. FIFO is fixed at creation; the rest change in place (defaults = SQS's)."""

    fifo: bool = False
    visibility_timeout: int = Field(default=30, ge=0, le=43200, alias="visibilityTimeout")
    message_retention_period: int = Field(default=345600, ge=60, le=1209600, alias="messageRetentionPeriod")
    delay_seconds: int = Field(default=0, ge=0, le=900, alias="delaySeconds")
    receive_wait_time_seconds: int = Field(default=0, ge=0, le=20, alias="receiveWaitTimeSeconds")
    content_based_deduplication: bool = Field(default=False, alias="contentBasedDeduplication")


def _queue_url(sqs: BaseClient, name: str) -> str | None:
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except boto_errors.ClientError as err:
        if missing(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            return None
        raise


def _queue_attributes(spec: QueueSpec) -> dict[str, str]:
    attributes = {sqs_name: str(getattr(spec, field)) for field, sqs_name in QUEUE_ATTRIBUTES.items()}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Queue(AwsKind):
    """An SQS queue, standard or FIFO, tagged with the ownership marker."""

    kind = "queue"
    name_attribute = "queue"
    Spec = QueueSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "queue", "queueUrl", "queueArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SQS queue", limit=80, naming=naming)

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, QueueSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "queue")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        if url is None:
            return None
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        params: dict[str, Any] = {field: int(live[attr]) for field, attr in QUEUE_ATTRIBUTES.items() if attr in live}
        params["fifo"] = live.get("FifoQueue") == "true"
        params["content_based_deduplication"] = live.get("ContentBasedDeduplication") == "true"
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        return Observed(
            owner=tags_owner(tags),
            workspace=tags_workspace(tags),
            params=params,
            attributes={**location(instance), "queue": name, "queueUrl": url, "queueArn": live["QueueArn"],
                        "configInSync": not any(live.get(extra) for extra in QUEUE_EXTRAS)},
        )

    def make(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any] | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sqs")
        attributes = {**_queue_attributes(spec), **({"FifoQueue": "true"} if spec.fifo else {})}
        marker = marker_tags(ident, stack)
        url = sqs.create_queue(QueueName=name, Attributes=attributes, tags=marker)["QueueUrl"]
        # CreateQueue returns an existing queue of the same attributes: it must be ours.
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a queue another run made needs re-marking.
        return self._attributes(instance, sqs, name, url) if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any]:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        # An empty value removes the setting.
        extras = {extra: "" for extra in QUEUE_EXTRAS if live.get(extra)}
        sqs.set_queue_attributes(QueueUrl=url, Attributes={**_queue_attributes(spec), **extras})
        sqs.tag_queue(QueueUrl=url, Tags=marker_tags(ident, stack))
        return self._attributes(instance, sqs, name, url)

    @staticmethod
    def _attributes(instance: SharedInstance, sqs: BaseClient, name: str, url: str) -> dict[str, Any]:
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return {**location(instance), "queue": name, "queueUrl": url, "queueArn": arn, "configInSync": True}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        aws_client(instance, "sqs").delete_queue(QueueUrl=observed.attributes["queueUrl"])
