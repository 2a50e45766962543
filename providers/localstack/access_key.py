"""LocalStack: per-project AWS-API resources (S3, SQS, SNS, Kinesis, DynamoDB).

On this machine the engine is moto in server mode (tools/engines/localstack.py);
the providers speak only the AWS APIs through boto3, so LocalStack itself
serves them as well. Buckets are the shared S3 implementation of
`providers.s3`. Every other kind carries the ownership marker as the
service's own tags and its name mapped to the service's charset and length
rules (providers.naming; a FIFO queue or topic keeps its `.fifo` suffix last).
An `access_key` is an IAM user whose policy names exactly the project's
resources on the instance; how far the emulator enforces it is measured per
service in docs/engines.md (UNISOLATED below).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from functools import wraps
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping

from pulumi.dynamic import CheckFailure, CheckResult, ReadResult
from pydantic import BaseModel, ConfigDict, Field, model_validator

from providers import naming as naming_rules
from providers import s3
from providers.base import REACH, KindProvider, Observed
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance

if TYPE_CHECKING:  # botocore.client takes 0.1s to import; clients come from s3.aws_client
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

ENGINE = "localstack"
FIFO = ".fifo"
#: How long to wait for a stream or table to become ACTIVE (moto: at once; AWS: seconds).
ACTIVE_TIMEOUT = 60.0
_SQS_SNS_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_KINESIS_DYNAMODB_CHARS = re.compile(r"[A-Za-z0-9_.-]+")


class LocalstackBucket(s3.Bucket):
    engine = ENGINE
    keeps_deleted_tags = True


# --- shared steps ------------------------------------------------------------


def fifo_capable_name(name: str, owner: str, *, service: str, limit: int, naming: int) -> str:
    """SQS/SNS name, sanitized (a final `.fifo` kept) or owner-prefixed (PREFIXED: a declaration named
    `<x>.fifo` maps to `<owner>-<x>.fifo`)."""
    if naming != PREFIXED:
        return naming_rules.sqs_sns(name, limit=limit)
    fifo = name.endswith(FIFO)
    base = s3.prefixed(name[: -len(FIFO)] if fifo else name, owner)
    mapped = base + (FIFO if fifo else "")
    if not 1 <= len(mapped) <= limit:
        rule = f"{service} names are 1-{limit} characters long, '.fifo' included ({mapped!r} has {len(mapped)})"
    elif not _SQS_SNS_CHARS.fullmatch(base):
        rule = f"{service} names use only letters, digits, '-' and '_', plus a final '.fifo' ({mapped!r} does not)"
    else:
        return mapped
    raise InvalidSpec("map", f"{service} name {mapped!r}", rule)


def plain_name(name: str, owner: str, *, service: str, length: tuple[int, int], naming: int) -> str:
    """Kinesis/DynamoDB name (letters, digits, '_', '-' and '.'): sanitized, or owner-prefixed (PREFIXED)."""
    if naming != PREFIXED:
        return naming_rules.kinesis_dynamodb(name, length=length)
    mapped = s3.prefixed(name, owner)
    rule = s3.name_rule(mapped, service=service, length=length, charset=_KINESIS_DYNAMODB_CHARS,
                        allowed="letters, digits, '_', '-' and '.'")
    if rule:
        raise InvalidSpec("map", f"{service} name {mapped!r}", rule)
    return mapped


def fifo_rules(name: str, fifo: bool, deduplication: bool, what: str) -> list[tuple[str, str]]:
    """A FIFO queue or topic and its name agree: FIFO exactly when the name ends in `.fifo`."""
    if fifo and not name.endswith(FIFO):
        return [("params.fifo", f"a FIFO {what}'s name must end in '.fifo' (name the declaration '{name}.fifo')")]
    if not fifo and name.endswith(FIFO):
        return [("params.fifo", f"a {what} named '*.fifo' is a FIFO {what}: set fifo: true")]
    if deduplication and not fifo:
        return [("params.contentBasedDeduplication", f"only a FIFO {what} deduplicates by content")]
    return []


def wait_until(ready: Callable[[], bool], what: str, instance: SharedInstance) -> None:
    """Poll `ready` until it holds, at most ACTIVE_TIMEOUT seconds."""
    deadline = time.monotonic() + ACTIVE_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            raise EngineUnavailable("wait for", what, f"not ACTIVE after {ACTIVE_TIMEOUT:.0f} s on {instance.address}",
                                    "check the engine's log; the resource may finish later, then run `pulumi refresh`")
        time.sleep(0.2)


def missing(err: ClientError, *codes: str) -> bool:
    return s3.error_code(err) in codes


#: What SQS, SNS, Kinesis and DynamoDB answer about a resource that is not there.
GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException", "NotFound")


def vanished_is_none(observe: Callable[..., Observed | None]) -> Callable[..., Observed | None]:
    """An observe that finds the resource and then loses it (another run's purge dropped it between two
    calls) sees nothing, as it would have a moment later."""
    @wraps(observe)
    def looking(self: Any, instance: SharedInstance, ident: Identity) -> Observed | None:
        try:
            return observe(self, instance, ident)
        except s3.boto_errors.ClientError as err:
            if missing(err, *GONE):
                return None
            raise

    return looking


_accounts: dict[tuple[str, str], str] = {}


def account_id(instance: SharedInstance) -> str:
    """The account the admin key acts as (moto: 123456789012, LocalStack: 000000000000), asked once."""
    key = (s3.endpoint_of(instance), instance.admin_user)
    if key not in _accounts:
        _accounts[key] = str(s3.aws_client(instance, "sts").get_caller_identity()["Account"])
    return _accounts[key]


def location(instance: SharedInstance) -> dict[str, Any]:
    return {"host": instance.host, "port": instance.port, "region": s3.region_of(instance)}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _AwsKind(s3.GuardedKind):
    """A LocalStack kind: converge = apply the spec to the live resource, marker tags included."""

    engine = ENGINE

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        self.enforce("create", ident, spec)
        observed = self.observe(instance, ident)
        if observed is None:
            made = self.make(instance, ident, spec, props.get("stack"))
            if made is not None:
                return made
        elif observed.owner != ident.owner:  # made meanwhile by another stack: `create`'s observe came first
            raise self._conflict("create", ident, observed)
        return self.converge(instance, ident, spec, props.get("stack"))

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, props)
        except s3.boto_errors.ClientError as err:
            if missing(err, *GONE):  # another run's drop came first
                raise NotFound("drop", f"{self.kind} {ident}", "it was dropped meanwhile") from err
            raise

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = self.Spec.model_validate(new.get("params") or {})
        self.enforce("update", ident, spec)
        return self.converge(instance, ident, spec, new.get("stack"))

    def make(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any] | None:
        """Create the resource, marker tags included where the API takes them at creation.

        Return its attributes when the creation call applied the whole spec, or None
        to have `converge` finish it.
        """
        raise NotImplementedError

    def converge(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any]:
        """Bring the live resource in line with `spec`; return its attributes."""
        raise NotImplementedError

    def made_meanwhile(self, instance: SharedInstance, ident: Identity, err: Exception) -> None:
        """After a create refused because the name exists now: ours (the SDK retried a call whose
        first reply was lost, or another run of this project made it) goes on to converge; anything
        else is a Conflict."""
        observed = self.observe(instance, ident) or Observed(owner=None)
        if observed.owner != ident.owner:
            raise self._conflict("create", ident, observed) from err

    def claimed(self, ident: Identity, tags: dict[str, str]) -> None:
        """After a create call that succeeds on an existing name: it must carry our marker."""
        if s3.tags_owner(tags) != ident.owner:
            raise self._conflict("create", ident, Observed(owner=s3.tags_owner(tags)))


# --- SQS queue ----------------------------------------------------------------

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


class QueueSpec(_Spec):
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
    except s3.boto_errors.ClientError as err:
        if missing(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            return None
        raise


def _queue_attributes(spec: QueueSpec) -> dict[str, str]:
    attributes = {sqs_name: str(getattr(spec, field)) for field, sqs_name in QUEUE_ATTRIBUTES.items()}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Queue(_AwsKind):
    """An SQS queue, standard or FIFO, tagged with the ownership marker."""

    kind = "queue"
    name_attribute = "queue"
    Spec = QueueSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "queue", "queueUrl", "queueArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SQS queue", limit=80, naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, QueueSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "queue")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        if url is None:
            return None
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        params: dict[str, Any] = {field: int(live[attr]) for field, attr in QUEUE_ATTRIBUTES.items() if attr in live}
        params["fifo"] = live.get("FifoQueue") == "true"
        params["content_based_deduplication"] = live.get("ContentBasedDeduplication") == "true"
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        return Observed(
            owner=s3.tags_owner(tags),
            workspace=s3.tags_workspace(tags),
            params=params,
            attributes={**location(instance), "queue": name, "queueUrl": url, "queueArn": live["QueueArn"],
                        "configInSync": not any(live.get(extra) for extra in QUEUE_EXTRAS)},
        )

    def make(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any] | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        attributes = {**_queue_attributes(spec), **({"FifoQueue": "true"} if spec.fifo else {})}
        marker = s3.marker_tags(ident, stack)
        url = sqs.create_queue(QueueName=name, Attributes=attributes, tags=marker)["QueueUrl"]
        # CreateQueue returns an existing queue of the same attributes: it must be ours.
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a queue another run made needs re-marking.
        return self._attributes(instance, sqs, name, url) if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any]:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        # An empty value removes the setting.
        extras = {extra: "" for extra in QUEUE_EXTRAS if live.get(extra)}
        sqs.set_queue_attributes(QueueUrl=url, Attributes={**_queue_attributes(spec), **extras})
        sqs.tag_queue(QueueUrl=url, Tags=s3.marker_tags(ident, stack))
        return self._attributes(instance, sqs, name, url)

    @staticmethod
    def _attributes(instance: SharedInstance, sqs: BaseClient, name: str, url: str) -> dict[str, Any]:
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return {**location(instance), "queue": name, "queueUrl": url, "queueArn": arn, "configInSync": True}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "sqs").delete_queue(QueueUrl=observed.attributes["queueUrl"])


# --- SNS topic ----------------------------------------------------------------


class TopicSpec(_Spec):
    """Params of a `topic`. FIFO is fixed at creation; the display name changes in place."""

    fifo: bool = False
    display_name: str = Field(default="", max_length=100, alias="displayName")
    content_based_deduplication: bool = Field(default=False, alias="contentBasedDeduplication")


def _topic_attributes(spec: TopicSpec) -> dict[str, str]:
    attributes = {"DisplayName": spec.display_name}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Topic(_AwsKind):
    """An SNS topic, standard or FIFO, tagged with the ownership marker."""

    kind = "topic"
    name_attribute = "topic"
    Spec = TopicSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "topic", "topicArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SNS topic", limit=256, naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, TopicSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "topic")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        # SNS has no lookup by name; the ARN is determined by region, account and name.
        arn = f"arn:aws:sns:{s3.region_of(instance)}:{account_id(instance)}:{name}"
        try:
            live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        except s3.boto_errors.ClientError as err:
            if missing(err, "NotFound", "NotFoundException"):
                return None
            raise
        params = {"fifo": live.get("FifoTopic") == "true", "display_name": live.get("DisplayName", ""),
                  "content_based_deduplication": live.get("ContentBasedDeduplication") == "true"}
        tags = s3.tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        return Observed(owner=s3.tags_owner(tags), workspace=s3.tags_workspace(tags), params=params,
                        attributes={**location(instance), "topic": name, "topicArn": arn})

    def make(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any] | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        attributes = {**_topic_attributes(spec), **({"FifoTopic": "true"} if spec.fifo else {})}
        marker = s3.marker_tags(ident, stack)
        arn = sns.create_topic(Name=name, Attributes=attributes, Tags=s3.tag_list(marker))["TopicArn"]
        # CreateTopic is idempotent: an existing topic must already be ours.
        tags = s3.tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a topic another run made needs re-marking.
        return {**location(instance), "topic": name, "topicArn": arn} if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any]:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        arn = f"arn:aws:sns:{s3.region_of(instance)}:{account_id(instance)}:{name}"
        live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        for attribute, value in _topic_attributes(spec).items():
            if live.get(attribute, "") != value:
                sns.set_topic_attributes(TopicArn=arn, AttributeName=attribute, AttributeValue=value)
        sns.tag_resource(ResourceArn=arn, Tags=s3.tag_list(s3.marker_tags(ident, stack)))
        return {**location(instance), "topic": name, "topicArn": arn}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "sns").delete_topic(TopicArn=observed.attributes["topicArn"])


# --- Kinesis stream -----------------------------------------------------------


class StreamSpec(_Spec):
    """Params of a `stream` (provisioned mode); both change in place."""

    shard_count: int = Field(default=1, ge=1, le=500, alias="shardCount")
    retention_hours: int = Field(default=24, ge=24, le=8760, alias="retentionHours")


def _stream_summary(kinesis: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    except s3.boto_errors.ClientError as err:
        if missing(err, "ResourceNotFoundException"):
            return None
        raise
    return None if summary.get("StreamStatus") == "DELETING" else summary


def _on_demand(summary: dict[str, Any]) -> bool:
    return (summary.get("StreamModeDetails") or {}).get("StreamMode") == "ON_DEMAND"


class Stream(_AwsKind):
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
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        summary = _stream_summary(kinesis, name)
        if summary is None:
            return None
        tags = s3.tag_dict(kinesis.list_tags_for_stream(StreamName=name).get("Tags", []))
        # Switched to on-demand out of band, it has no fixed shard count: none, which the next up sets again.
        shards = None if _on_demand(summary) else summary.get("OpenShardCount")
        return Observed(
            owner=s3.tags_owner(tags),
            workspace=s3.tags_workspace(tags),
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
        if s3.aws_client(instance, "kinesis").list_tags_for_stream(StreamName=name).get("Tags"):
            return conflict
        return Conflict(verb, conflict.what, conflict.cause,
                        s3.cut_short_hint("untagged", instance, f"kinesis delete-stream --stream-name {name}"))

    def make(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> None:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        try:
            kinesis.create_stream(StreamName=name, ShardCount=spec.shard_count,
                                  StreamModeDetails={"StreamMode": "PROVISIONED"}, Tags=s3.marker_tags(ident, stack))
        except s3.boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, kinesis, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> dict[str, Any]:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        # Tags first: some servers (moto) ignore the Tags of CreateStream.
        kinesis.add_tags_to_stream(StreamName=name, Tags=s3.marker_tags(ident, stack))
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
        s3.aws_client(instance, "kinesis").delete_stream(StreamName=name, EnforceConsumerDeletion=True)

    @staticmethod
    def _wait_active(instance: SharedInstance, kinesis: BaseClient, name: str) -> None:
        wait_until(lambda: (_stream_summary(kinesis, name) or {}).get("StreamStatus") == "ACTIVE",
                   f"Kinesis stream {name!r}", instance)


# --- DynamoDB table -----------------------------------------------------------


class KeySpec(_Spec):
    """One key attribute: `{name: id, type: S}`, or just `id` (a string key)."""

    name: str = Field(min_length=1, max_length=255)
    type: Literal["S", "N", "B"] = "S"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class TableSpec(_Spec):
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
        tags.update(s3.tag_dict(page.get("Tags", [])))
        token = page.get("NextToken")
        if not token or token in seen:
            return tags
        seen.add(token)


def _describe_table(ddb: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        table = ddb.describe_table(TableName=name)["Table"]
    except s3.boto_errors.ClientError as err:
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


class Table(_AwsKind):
    """A DynamoDB table tagged with the ownership marker."""

    kind = "table"
    name_attribute = "table"
    Spec = TableSpec
    create_only = frozenset({"hash_key", "range_key"})
    attributes = ("host", "port", "region", "table", "tableArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return plain_name(name, owner, service="DynamoDB table", length=(3, 255), naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
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
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name)
        if table is None:
            return None
        ttl = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        tags = table_tags(ddb, table["TableArn"])
        return Observed(owner=s3.tags_owner(tags), workspace=s3.tags_workspace(tags), params=_table_params(table, ttl),
                        attributes={**location(instance), "table": name, "tableArn": table["TableArn"]})

    def make(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> None:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        keys = [(spec.hash_key, "HASH")] + ([(spec.range_key, "RANGE")] if spec.range_key else [])
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": [{"AttributeName": key.name, "KeyType": role} for key, role in keys],
            "AttributeDefinitions": [{"AttributeName": key.name, "AttributeType": key.type} for key, _ in keys],
            "BillingMode": spec.billing_mode,
            "Tags": s3.tag_list(s3.marker_tags(ident, stack)),
        }
        if spec.billing_mode == "PROVISIONED":
            args["ProvisionedThroughput"] = _throughput(spec)
        try:
            ddb.create_table(**args)
        except s3.boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, ddb, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> dict[str, Any]:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name) or {}
        live = _table_params(table, ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {}))
        self._converge_billing(instance, ddb, name, spec, live)
        self._converge_ttl(ddb, name, spec.ttl_attribute, live["ttl_attribute"])
        marker = s3.marker_tags(ident, stack)
        if not marker.items() <= table_tags(ddb, table["TableArn"]).items():
            # Untagged first: moto would keep the old values beside the new ones.
            ddb.untag_resource(ResourceArn=table["TableArn"], TagKeys=sorted(marker))
            ddb.tag_resource(ResourceArn=table["TableArn"], Tags=s3.tag_list(marker))
        return {**location(instance), "table": name, "tableArn": table["TableArn"]}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "dynamodb").delete_table(TableName=observed.attributes["table"])

    # --- steps -----------------------------------------------------------

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


# --- IAM access key -------------------------------------------------------------

#: The kinds whose resources a project's access key reaches, each by its exact ARN.
REACHED_KINDS = ("bucket", "queue", "topic", "stream", "table")
#: What a project's key may do on its own resources: use their data (read, write, list, delete), never create,
#: drop, retag or reconfigure them. IAM's action names, and beside them the API operation's where it differs:
#: moto checks `s3:<operation>` (`s3:ListObjectsV2` where IAM says `s3:ListBucket`).
DATA_ACTIONS: dict[str, tuple[str, ...]] = {
    "bucket": ("s3:GetObject", "s3:HeadObject", "s3:PutObject", "s3:CopyObject", "s3:DeleteObject", "s3:DeleteObjects",
               "s3:GetObjectVersion", "s3:DeleteObjectVersion", "s3:GetObjectTagging", "s3:PutObjectTagging",
               "s3:DeleteObjectTagging", "s3:GetObjectAttributes", "s3:ListBucket", "s3:ListObjects",
               "s3:ListObjectsV2", "s3:ListBucketVersions", "s3:ListObjectVersions", "s3:HeadBucket",
               "s3:GetBucketLocation", "s3:CreateMultipartUpload", "s3:UploadPart", "s3:UploadPartCopy",
               "s3:CompleteMultipartUpload", "s3:AbortMultipartUpload", "s3:ListBucketMultipartUploads",
               "s3:ListMultipartUploads", "s3:ListMultipartUploadParts", "s3:ListParts"),
    "queue": ("sqs:SendMessage", "sqs:SendMessageBatch", "sqs:ReceiveMessage", "sqs:DeleteMessage",
              "sqs:DeleteMessageBatch", "sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibilityBatch",
              "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:PurgeQueue"),
    "topic": ("sns:Publish", "sns:PublishBatch", "sns:GetTopicAttributes", "sns:Subscribe", "sns:ConfirmSubscription",
              "sns:Unsubscribe", "sns:ListSubscriptionsByTopic"),
    "stream": ("kinesis:PutRecord", "kinesis:PutRecords", "kinesis:GetRecords", "kinesis:GetShardIterator",
               "kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:ListShards"),
    "table": ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
              "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:Query", "dynamodb:Scan",
              "dynamodb:ConditionCheckItem", "dynamodb:TransactGetItems", "dynamodb:TransactWriteItems",
              "dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"),
}
#: Per emulator, the actions it authorizes against no resource at all, so that a grant naming resources never
#: matches them (measured on moto 5.2.6: every SNS, Kinesis and DynamoDB call, and SQS's GetQueueUrl). The key
#: gets those on "*", or it could not use its own resources either.
UNSCOPED_ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "moto": {"queue": ("sqs:GetQueueUrl",), "topic": DATA_ACTIONS["topic"], "stream": DATA_ACTIONS["stream"],
             "table": DATA_ACTIONS["table"]},
    "localstack": {},
}
#: Per emulator, the services where a project's key reaches other projects' resources too (measured: see
#: docs/engines.md); devstack doctor names them.
UNISOLATED: dict[str, tuple[str, ...]] = {"moto": ("SNS", "Kinesis", "DynamoDB"), "localstack": ()}
POLICY_NAME = "devstack"
PREDICTABLE_REFUSED = ("the emulator draws an IAM access key's id and secret itself, so the key cannot have the "
                       "predictable secret; set `credentials: generated` on this access_key")
_SERVICE_KINDS = {"s3": "bucket", "sqs": "queue", "sns": "topic", "kinesis": "stream", "dynamodb": "table"}
_IAM_USER_CHARS = re.compile(r"[A-Za-z0-9_.-]+")
_emulators: dict[str, str] = {}


def emulator(instance: SharedInstance) -> str:
    """"moto" when the server serves moto's dashboard page (GET /moto-api/), else "localstack"; asked once."""
    endpoint = s3.endpoint_of(instance)
    if endpoint not in _emulators:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
        try:
            with opener.open(f"{endpoint}/moto-api/", timeout=3) as answer:
                _emulators[endpoint] = "moto" if answer.status == 200 else "localstack"
        except urllib.error.HTTPError:
            _emulators[endpoint] = "localstack"
        except OSError as err:
            raise EngineUnavailable("connect to", f"{ENGINE} instance {instance.name!r} at {instance.address}",
                                    str(err), instance.start_hint()) from err
    return _emulators[endpoint]


def iam_user_name(name: str, owner: str, *, naming: int) -> str:
    """The IAM user (one per access_key): the name sanitized, or owner-prefixed (PREFIXED)."""
    if naming != PREFIXED:
        return naming_rules.kinesis_dynamodb(name, length=(1, 64))
    return s3.prefixed_name(name, owner, service="IAM user", length=(1, 64), charset=_IAM_USER_CHARS,
                            allowed="letters, digits, '_', '-' and '.'")


def resource_arns(kind: str, name: str, region: str, account: str) -> list[str]:
    """The ARNs a grant on the `kind` called `name` names: the resource, and what lives in it."""
    if kind == "bucket":
        return [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]
    if kind == "queue":
        return [f"arn:aws:sqs:{region}:{account}:{name}"]
    if kind == "topic":
        return [f"arn:aws:sns:{region}:{account}:{name}"]
    if kind == "stream":
        return [f"arn:aws:kinesis:{region}:{account}:stream/{name}"]
    return [f"arn:aws:dynamodb:{region}:{account}:table/{name}", f"arn:aws:dynamodb:{region}:{account}:table/{name}/index/*"]


def reach_entry(arn: str) -> str | None:
    """`<kind>:<name>` of a resource ARN as `resource_arns` writes it, None for any other text."""
    parts = str(arn).split(":", 5)
    if len(parts) < 6 or parts[0] != "arn" or parts[2] not in _SERVICE_KINDS:
        return None
    service, rest = parts[2], parts[5]
    name = {"s3": rest.split("/")[0], "kinesis": rest.removeprefix("stream/"),
            "dynamodb": rest.removeprefix("table/").split("/")[0]}.get(service, rest)
    return f"{_SERVICE_KINDS[service]}:{name}" if name and "*" not in name else None


def key_policy(reach: Iterable[str], region: str, account: str, server: str) -> dict[str, Any] | None:
    """The inline policy of a key reaching `reach` (`<kind>:<name>` entries) on emulator `server`; None
    when it reaches nothing (the key then may do nothing)."""
    arns: dict[str, list[str]] = {}
    for entry in sorted(set(reach)):
        kind, _, name = entry.partition(":")
        if kind in DATA_ACTIONS and name:
            arns.setdefault(kind, []).extend(resource_arns(kind, name, region, account))
    statements: list[dict[str, Any]] = [
        {"Sid": f"Data{kind.title()}", "Effect": "Allow", "Action": list(DATA_ACTIONS[kind]), "Resource": names}
        for kind, names in sorted(arns.items())]
    unscoped = sorted({action for kind in arns for action in UNSCOPED_ACTIONS.get(server, {}).get(kind, ())})
    if unscoped:
        statements.append({"Sid": "UncheckedResources", "Effect": "Allow", "Action": unscoped, "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements} if statements else None


def policy_reach(document: Mapping[str, Any] | None) -> list[str]:
    """The `<kind>:<name>` entries a key's live policy names."""
    found = set()
    for statement in (document or {}).get("Statement", []):
        resources = statement.get("Resource") or []
        for arn in [resources] if isinstance(resources, str) else resources:
            entry = reach_entry(arn)
            if entry:
                found.add(entry)
    return sorted(found)


def _canonical(document: Mapping[str, Any] | None) -> str:
    return json.dumps(document, sort_keys=True) if document else ""


def _ignoring(codes: tuple[str, ...], call: Callable[[], Any]) -> Any:
    """`call()`, or None when it fails with one of `codes` (already gone)."""
    try:
        return call()
    except s3.boto_errors.ClientError as err:
        if missing(err, *codes):
            return None
        raise


def resource_owner(instance: SharedInstance, kind: str, name: str) -> tuple[bool, str | None]:
    """(whether it exists, the owner its marker names) of the `kind` called `name`."""
    client = s3.aws_client(instance, {"bucket": "s3", "queue": "sqs", "topic": "sns", "stream": "kinesis",
                                      "table": "dynamodb"}[kind])

    def tags() -> dict[str, str]:
        if kind == "bucket":
            return s3.bucket_tags(client, name)
        if kind == "queue":
            url = _queue_url(client, name)
            return client.list_queue_tags(QueueUrl=url).get("Tags", {}) if url else None
        if kind == "topic":
            arn = resource_arns(kind, name, s3.region_of(instance), account_id(instance))[0]
            return s3.tag_dict(client.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        if kind == "stream":
            return s3.tag_dict(client.list_tags_for_stream(StreamName=name).get("Tags", []))
        return table_tags(client, client.describe_table(TableName=name)["Table"]["TableArn"])

    found = _ignoring((*GONE, "NoSuchBucket"), tags)
    return found is not None, s3.tags_owner(found) if found is not None else None


class AccessKeySpec(_Spec):
    """Params of an `access_key`. Bumping `rotation` issues a new key pair in place."""

    rotation: int = Field(default=0, ge=0)


class AccessKey(s3.GuardedKind):
    """An IAM user whose one inline policy reaches exactly the project's resources on the instance.

    The program fills `reach` with them (`<kind>:<name>`, every bucket, queue, topic, stream and table the
    project declares there); the policy lets the key use their data, not manage them. The emulator draws
    the key pair, so only `credentials: generated` is possible; the secret is a secret output, kept across
    updates until `rotation` or the credential policy changes. The marker is the user's tags. `read` reports
    out-of-band changes in `outOfBand` (policy edited or gone, other policies or groups, other keys, the
    stored key deleted, deactivated or its secret no longer working), which the next diff turns into an update.
    """

    engine = ENGINE
    kind = "access_key"
    logins = True
    Spec = AccessKeySpec
    # The project's resources first: the policy names them, and they must be tagged as its own by then.
    after_kinds = REACHED_KINDS
    reach_kind = REACHED_KINDS
    attributes = ("host", "port", "region", "user", "accessKey", "secretKey")
    secret_outputs = ("secretKey",)

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return iam_user_name(name, owner, naming=naming)

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        return sorted({str(entry) for entry in props.get(REACH) or []})

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result = super().check(olds, news)
        if news.get("credentials", "predictable") == "predictable":
            result.failures.append(CheckFailure("credentials", PREDICTABLE_REFUSED))
        return result

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "iam")
        found = _ignoring(("NoSuchEntity",), lambda: iam.list_user_tags(UserName=user))
        if found is None:
            return None
        tags = s3.tag_dict(found.get("Tags", []))
        observed = Observed(owner=s3.tags_owner(tags), workspace=s3.tags_workspace(tags),
                            attributes={**location(instance), "user": user})
        if observed.owner == ident.owner:
            observed.attributes["outOfBand"] = self._out_of_band(instance, iam, ident, user)
        return observed

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if result.id and props.get("accessKey") and props.get("secretKey"):
            instance = self._instance(Identity.from_props(props), "read")
            with self.engine_errors(props):
                if not self._key_works(instance, result.outs["user"], props["accessKey"], props["secretKey"]):
                    result.outs["outOfBand"] = [*result.outs.get("outOfBand", []), "secretKey"]
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return list(olds.get("outOfBand") or [])

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "iam")
        reach = self._reach(instance, ident, props)
        if self.observe(instance, ident) is None:
            try:
                iam.create_user(UserName=user, Tags=s3.tag_list(s3.marker_tags(ident, props.get("stack"))))
            except s3.boto_errors.ClientError as err:
                if not missing(err, "EntityAlreadyExists"):
                    raise
                self._owned(instance, ident, "create")  # made meanwhile: ours to converge, or a Conflict
        return self._converge(instance, iam, ident, user, reach, props.get("stack"), keep=None)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "iam")
        spec = AccessKeySpec.model_validate(new.get("params") or {})
        # The key pair survives any update but a new rotation or credential policy, or a broken stored one.
        same = (old.get("credentials"), (old.get("params") or {}).get("rotation")) == (new.get("credentials"), spec.rotation)
        usable = same and old.get("accessKey") and "secretKey" not in (old.get("outOfBand") or [])
        keep = (str(old["accessKey"]), str(old.get("secretKey"))) if usable else None
        return self._converge(instance, iam, ident, user, self._reach(instance, ident, new), new.get("stack"), keep=keep)

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        user, iam = observed.attributes["user"], s3.aws_client(instance, "iam")
        # IAM deletes a user only once nothing hangs on it any more.
        for key in iam.list_access_keys(UserName=user).get("AccessKeyMetadata", []):
            _ignoring(("NoSuchEntity",), lambda key=key: iam.delete_access_key(UserName=user, AccessKeyId=key["AccessKeyId"]))
        self._revoke_other_grants(iam, user, keep_inline=None)
        iam.delete_user(UserName=user)

    # --- steps -----------------------------------------------------------

    def _reach(self, instance: SharedInstance, ident: Identity, props: Mapping[str, Any]) -> list[str]:
        """The entries `props` ask the key to reach; Conflict when one exists and is not the project's."""
        reach = self.exact_reach(props)
        foreign = self._foreign(instance, ident, reach)
        if foreign:
            entry, holder = foreign[0]
            who = f"project {holder!r}" if holder else "something devstack does not manage"
            raise Conflict("grant", f"access_key {ident}", f"{entry.replace(':', ' ', 1)!r} belongs to {who}",
                           "a key reaches only its project's resources; nothing was changed")
        return reach

    @staticmethod
    def _foreign(instance: SharedInstance, ident: Identity, reach: Iterable[str]) -> list[tuple[str, str | None]]:
        """(entry, the owner its marker names) of those of `reach` that exist without this project's marker."""
        foreign = []
        for entry in reach:
            kind, _, name = entry.partition(":")
            exists, owner = resource_owner(instance, kind, name) if kind in DATA_ACTIONS else (True, None)
            if exists and owner != ident.owner:
                foreign.append((entry, owner))
        return foreign

    def _expected(self, instance: SharedInstance, reach: Iterable[str]) -> dict[str, Any] | None:
        return key_policy(reach, s3.region_of(instance), account_id(instance), emulator(instance))

    def _out_of_band(self, instance: SharedInstance, iam: BaseClient, ident: Identity, user: str) -> list[str]:
        """What differs from a key devstack made: its policy (rebuilt from the resources it names, which must
        be the project's), other grants, other or inactive keys."""
        document = _ignoring(("NoSuchEntity",), lambda: iam.get_user_policy(UserName=user, PolicyName=POLICY_NAME))
        live = document["PolicyDocument"] if document else None
        live = json.loads(live) if isinstance(live, str) else live
        reached = policy_reach(live)
        drifted = []
        if _canonical(live) != _canonical(self._expected(instance, reached)) or self._foreign(instance, ident, reached):
            drifted.append("policy")
        inline = [name for name in iam.list_user_policies(UserName=user).get("PolicyNames", []) if name != POLICY_NAME]
        if inline or iam.list_attached_user_policies(UserName=user).get("AttachedPolicies") \
                or iam.list_groups_for_user(UserName=user).get("Groups"):
            drifted.append("grants")
        keys = iam.list_access_keys(UserName=user).get("AccessKeyMetadata", [])
        if len(keys) != 1 or keys[0].get("Status") != "Active":
            drifted.append("accessKeys")
        return drifted

    @staticmethod
    def _key_works(instance: SharedInstance, user: str, key: str, secret: str) -> bool:
        """Whether the stored key is the user's, active, and its secret still signs (GetCallerIdentity needs no grant)."""
        iam = s3.aws_client(instance, "iam")
        keys = _ignoring(("NoSuchEntity",), lambda: iam.list_access_keys(UserName=user)) or {}
        if not any(k["AccessKeyId"] == key and k.get("Status") == "Active" for k in keys.get("AccessKeyMetadata", [])):
            return False
        try:
            s3.client_as(instance, "sts", key, secret).get_caller_identity()
        except s3.boto_errors.ClientError as err:
            if s3.error_code(err) in ("SignatureDoesNotMatch", "InvalidClientTokenId", "403"):
                return False
            raise
        return True

    def _converge(self, instance: SharedInstance, iam: BaseClient, ident: Identity, user: str, reach: list[str],
                  stack: str | None, keep: tuple[str, str] | None) -> dict[str, Any]:
        """Marker, the one policy, no other grant, and one active key: `keep` (id, secret) when the user still
        has it, else a new one. Each step idempotent."""
        iam.tag_user(UserName=user, Tags=s3.tag_list(s3.marker_tags(ident, stack)))
        policy = self._expected(instance, reach)
        if policy:
            iam.put_user_policy(UserName=user, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(policy))
        else:
            _ignoring(("NoSuchEntity",), lambda: iam.delete_user_policy(UserName=user, PolicyName=POLICY_NAME))
        self._revoke_other_grants(iam, user, keep_inline=POLICY_NAME)
        live = [k["AccessKeyId"] for k in iam.list_access_keys(UserName=user).get("AccessKeyMetadata", [])]
        kept = keep if keep and keep[0] in live else None
        # Others first: IAM holds at most two keys per user.
        for key in live:
            if kept is None or key != kept[0]:
                iam.delete_access_key(UserName=user, AccessKeyId=key)
        if kept:
            iam.update_access_key(UserName=user, AccessKeyId=kept[0], Status="Active")
        else:
            made = iam.create_access_key(UserName=user)["AccessKey"]
            kept = (made["AccessKeyId"], made["SecretAccessKey"])
        return {**location(instance), "user": user, "accessKey": kept[0], "secretKey": kept[1], "outOfBand": []}

    @staticmethod
    def _revoke_other_grants(iam: BaseClient, user: str, keep_inline: str | None) -> None:
        """Every inline policy but `keep_inline`, every attached policy and every group of `user`."""
        for name in iam.list_user_policies(UserName=user).get("PolicyNames", []):
            if name != keep_inline:
                iam.delete_user_policy(UserName=user, PolicyName=name)
        for attached in iam.list_attached_user_policies(UserName=user).get("AttachedPolicies", []):
            iam.detach_user_policy(UserName=user, PolicyArn=attached["PolicyArn"])
        for group in iam.list_groups_for_user(UserName=user).get("Groups", []):
            iam.remove_user_from_group(GroupName=group["GroupName"], UserName=user)


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {
    "bucket": LocalstackBucket,
    "queue": Queue,
    "topic": Topic,
    "stream": Stream,
    "table": Table,
    "access_key": AccessKey,
}
